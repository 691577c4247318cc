package xdp_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/xroce/xroce/bpf"
)

// TestRxWorkingSet: a copy-mode link receives a ping-pong's frames in its first 256
// chunks (docs/afxdp.md, "The receive chunks' working set"); a burst below half of
// them leaves it there, one of half or more doubles it, and no frame is lost.
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

	for _, c := range []struct{ burst, want int }{{100, 256}, {200, 512}, {200, 512}} {
		// each burst below veth's ring of 256 frames
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
	}
}
