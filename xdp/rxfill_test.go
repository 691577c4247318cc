package xdp_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/xroce/xroce/bpf"
)

// TestRxWorkingSet: a copy-mode link receives a ping-pong's frames in its first 256
// chunks (docs/afxdp.md, "The receive chunks' working set"); bursts that leave the
// kernel less than half of its chunks double them, less than a quarter give it all
// 2048, and no frame is lost.
func TestRxWorkingSet(t *testing.T) {
	n := newTestNet(t, 9000, false)
	la, lb := openXDP(t, n, bpf.ModeNative)
	if lb.ZeroCopy() {
		t.Skip("zero-copy: every chunk is in the fill ring from the start")
	}
	if got := lb.RxWorkingSet(); got != 256 {
		t.Fatalf("working set %d chunks when opened, want 256", got)
	}
	for i := range 600 { // one frame at a time: more than the working set
		f := writeFrame(t, la, lb, n.ipA, n.ipB, 64, uint64(i))
		if sent, err := la.Send([][]byte{f}); sent != 1 || err != nil {
			t.Fatalf("frame %d: sent %d, %v", i, sent, err)
		}
		if got := recvOne(t, lb, 2*time.Second); !bytes.Equal(got, f) {
			t.Fatalf("frame %d: received %d bytes, want the %d sent", i, len(got), len(f))
		}
	}
	if got := lb.RxWorkingSet(); got != 256 {
		t.Fatalf("working set %d chunks after a ping-pong of 600 frames, want 256", got)
	}

	// Bursts sent in one call, read only after all of it arrived, each within the
	// chunks the kernel holds. The first Recv after a burst finds it waiting: the
	// working set doubles when that left the kernel less than half of it, and
	// becomes every chunk when less than a quarter.
	buf := make([][]byte, 64)
	for _, c := range []struct{ burst, want int }{{100, 256}, {150, 512}, {300, 1024}, {200, 1024}, {900, 2048}} {
		var sent [][]byte
		for i := range c.burst {
			sent = append(sent, writeFrame(t, la, lb, n.ipA, n.ipB, 64, uint64(1000+i)))
		}
		if k, err := la.Send(sent); k != c.burst || err != nil {
			t.Fatalf("burst of %d: sent %d, %v", c.burst, k, err)
		}
		time.Sleep(100 * time.Millisecond) // all of it waits on the RX ring
		got := recvN(t, lb, c.burst, 2*time.Second)
		if len(got) != c.burst {
			st, _ := lb.Stats()
			t.Fatalf("burst of %d: received %d frames; AF_XDP stats %+v", c.burst, len(got), st)
		}
		for i := range got {
			if !bytes.Equal(got[i], sent[i]) {
				t.Fatalf("burst of %d: frame %d differs", c.burst, i)
			}
		}
		if w := lb.RxWorkingSet(); w != c.want {
			t.Fatalf("working set %d chunks after a burst of %d, want %d", w, c.burst, c.want)
		}
		if k, err := lb.Recv(buf); k != 0 || err != nil { // gives the last batch's chunks back
			t.Fatalf("after the burst of %d: Recv returned %d frames, %v", c.burst, k, err)
		}
	}
}

// TestReserveRx: the engine's reservation (two chunks a frame) grows a copy-mode
// link's working set at once and never shrinks it, and a burst of the reserved size
// arrives whole.
func TestReserveRx(t *testing.T) {
	n := newTestNet(t, 9000, false)
	la, lb := openXDP(t, n, bpf.ModeNative)
	if lb.ZeroCopy() {
		t.Skip("zero-copy: every chunk is in the fill ring from the start")
	}
	for _, c := range []struct{ frames, want int }{{0, 256}, {128, 256}, {200, 400}, {5000, 2048}, {10, 2048}} {
		lb.ReserveRx(c.frames)
		if got := lb.RxWorkingSet(); got != c.want {
			t.Fatalf("ReserveRx(%d): working set %d chunks, want %d", c.frames, got, c.want)
		}
	}
	const burst = 1000
	var sent [][]byte
	for i := range burst {
		sent = append(sent, writeFrame(t, la, lb, n.ipA, n.ipB, 1024, uint64(i)))
	}
	if k, err := la.Send(sent); k != burst || err != nil {
		t.Fatalf("sent %d of %d, %v", k, burst, err)
	}
	time.Sleep(100 * time.Millisecond) // all of it waits on the RX ring
	got := recvN(t, lb, burst, 2*time.Second)
	if len(got) != burst {
		st, _ := lb.Stats()
		t.Fatalf("received %d of %d frames; AF_XDP stats %+v", len(got), burst, st)
	}
	for i := range got {
		if !bytes.Equal(got[i], sent[i]) {
			t.Fatalf("frame %d differs", i)
		}
	}
}
