package xdp

import (
	"bytes"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// TestJoinInPlace: a chain whose chunks are adjacent, as the kernel's copy mode
// leaves a PMTU-4096 frame (chunk c from offset 256 to its end, chunk c+1 from
// offset 256) or a 9000-byte one (three chunks), becomes one contiguous slice of the
// UMEM holding the parts in order, with no capacity past its end; a chain with any
// chunk out of order is left untouched and refused (nil), and joinCopy then gives
// the same bytes.
func TestJoinInPlace(t *testing.T) {
	const h = xdpHeadroom
	for _, tc := range []struct {
		name    string
		descs   []unix.XDPDesc
		inPlace bool
	}{
		{"pmtu4096", []unix.XDPDesc{{Addr: 2*FrameSize + h, Len: FrameSize - h, Options: unix.XDP_PKT_CONTD}, {Addr: 3*FrameSize + h, Len: 330}}, true},
		{"three chunks", []unix.XDPDesc{
			{Addr: 5*FrameSize + h, Len: FrameSize - h, Options: unix.XDP_PKT_CONTD},
			{Addr: 6*FrameSize + h, Len: FrameSize - h, Options: unix.XDP_PKT_CONTD},
			{Addr: 7*FrameSize + h, Len: 1338}}, true},
		{"short first part", []unix.XDPDesc{{Addr: h, Len: 100, Options: unix.XDP_PKT_CONTD}, {Addr: FrameSize + h, Len: 200}}, true},
		{"chunks reversed", []unix.XDPDesc{{Addr: 3*FrameSize + h, Len: FrameSize - h, Options: unix.XDP_PKT_CONTD}, {Addr: 2*FrameSize + h, Len: 330}}, false},
		{"gap", []unix.XDPDesc{{Addr: 2*FrameSize + h, Len: FrameSize - h, Options: unix.XDP_PKT_CONTD}, {Addr: 4*FrameSize + h, Len: 330}}, false},
		{"third out of order", []unix.XDPDesc{
			{Addr: 5*FrameSize + h, Len: FrameSize - h, Options: unix.XDP_PKT_CONTD},
			{Addr: 6*FrameSize + h, Len: FrameSize - h, Options: unix.XDP_PKT_CONTD},
			{Addr: 1*FrameSize + h, Len: 1338}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			umem := make([]byte, 8*FrameSize)
			for i := range umem {
				umem[i] = byte(i * 7)
			}
			var want []byte
			for _, d := range tc.descs {
				want = append(want, umem[d.Addr:d.Addr+uint64(d.Len)]...)
			}
			before := slices.Clone(umem)
			copied := joinCopy(umem, tc.descs, func(n int) []byte { return make([]byte, n) })
			if !bytes.Equal(copied, want) || !bytes.Equal(umem, before) {
				t.Fatalf("joinCopy: %d bytes, or the UMEM changed", len(copied))
			}
			f := joinInPlace(umem, tc.descs)
			if !tc.inPlace {
				if f != nil || !bytes.Equal(umem, before) {
					t.Fatalf("joined %d bytes of a chain whose chunks are not adjacent, or moved data", len(f))
				}
				return
			}
			if !bytes.Equal(f, want) || cap(f) != len(f) {
				t.Fatalf("joined %d bytes (cap %d), want the %d bytes of the parts in order", len(f), cap(f), len(want))
			}
			if &f[0] != &umem[tc.descs[0].Addr] {
				t.Fatal("the joined frame does not start at the first part in the UMEM")
			}
		})
	}
}

// TestTakeRun: chunks for a frame of k chunks come from a run of k adjacent free
// chunks, lowest address returned; the initial list (ascending) and chunks freed in
// order give runs on top; a single chunk taken from a run leaves the next run to be
// found below it; no run within runScan entries of the top is no loan.
func TestTakeRun(t *testing.T) {
	const fs = FrameSize
	q := &queue{txFree: []uint64{10 * fs, 11 * fs, 12 * fs, 13 * fs}}
	if a, ok := q.takeRun(2); !ok || a != 12*fs || !slices.Equal(q.txFree, []uint64{10 * fs, 11 * fs}) {
		t.Fatalf("takeRun(2) = %d, %v; free %v", a/fs, ok, q.txFree)
	}
	q.free(12*fs, 2) // returned lowest first: a run on top again
	if a, ok := q.takeRun(1); !ok || a != 13*fs {
		t.Fatalf("takeRun(1) = %d, %v", a/fs, ok)
	}
	// 13 is gone: 11-12 is the run on top now.
	if a, ok := q.takeRun(2); !ok || a != 11*fs || !slices.Equal(q.txFree, []uint64{10 * fs}) {
		t.Fatalf("takeRun(2) after a single = %d, %v; free %v", a/fs, ok, q.txFree)
	}
	if _, ok := q.takeRun(2); ok {
		t.Fatal("took a run of 2 from one free chunk")
	}
	// A single taken from the top run leaves its lower chunk on top; the run
	// below it is found.
	q.txFree = []uint64{20 * fs, 21 * fs, 30 * fs, 31 * fs}
	if a, ok := q.takeRun(1); !ok || a != 31*fs {
		t.Fatalf("takeRun(1) = %d, %v", a/fs, ok)
	}
	if a, ok := q.takeRun(2); !ok || a != 20*fs || !slices.Equal(q.txFree, []uint64{30 * fs}) {
		t.Fatalf("takeRun(2) below a broken run = %d, %v; free %v", a/fs, ok, q.txFree)
	}
	q.txFree = []uint64{1 * fs, 3 * fs, 5 * fs, 7 * fs}
	if _, ok := q.takeRun(2); ok {
		t.Fatal("took a run of 2 from chunks that are not adjacent")
	}
	if a, ok := q.takeRun(1); !ok || a != 7*fs {
		t.Fatalf("takeRun(1) = %d, %v", a/fs, ok)
	}
	q.txFree = []uint64{0, 1 * fs}
	for i := range runScan {
		q.txFree = append(q.txFree, uint64(100+2*i)*fs)
	}
	if _, ok := q.takeRun(2); ok {
		t.Fatalf("found a run %d entries below the top (runScan %d)", runScan, runScan)
	}
	q.txFree = nil
	if _, ok := q.takeRun(1); ok {
		t.Fatal("took a chunk from an empty list")
	}
}
