package xdp_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/xroce/xroce/bpf"
	"github.com/xroce/xroce/xdp"
)

// TestRxWorkingSet: a copy-mode link receives a ping-pong's frames in its first 256
// chunks (docs/afxdp.md, "The receive chunks' working set"); the first burst it
// finds waiting gives the kernel all 2048, and no frame of it is lost.
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

	const burst = 200 // below the working set and veth's ring of 256
	var sent [][]byte
	for i := range burst {
		sent = append(sent, writeFrame(t, la, lb, n.ipA, n.ipB, 64, uint64(1000+i)))
	}
	if k, err := la.Send(sent); k != burst || err != nil {
		t.Fatalf("burst: sent %d of %d, %v", k, burst, err)
	}
	time.Sleep(100 * time.Millisecond) // all of it waits on the RX ring
	got := recvN(t, lb, burst, 2*time.Second)
	if len(got) != burst {
		st, _ := lb.Stats()
		t.Fatalf("burst: received %d of %d frames; AF_XDP stats %+v", len(got), burst, st)
	}
	for i := range got {
		if !bytes.Equal(got[i], sent[i]) {
			t.Fatalf("burst frame %d differs", i)
		}
	}
	if w := lb.RxWorkingSet(); w != xdp.RxFrames {
		t.Fatalf("working set %d chunks after a burst, want all %d", w, xdp.RxFrames)
	}
}
