package xdp_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/xroce/xroce/bpf"
	"github.com/xroce/xroce/xdp"
)

// TestBindModes: veth has no AF_XDP zero-copy. Auto and copy bind in copy mode
// (the link says so); zero-copy asked for fails at once with ErrZeroCopy, naming
// the interface, its driver and the fix, in native and generic mode, and leaves
// the interface free for the next Open.
func TestBindModes(t *testing.T) {
	n := newTestNet(t, 1500, false)
	for _, mode := range []bpf.Mode{bpf.ModeNative, bpf.ModeGeneric} {
		for _, bind := range []xdp.Bind{xdp.BindAuto, xdp.BindCopy} {
			l, err := xdp.Open(xdp.Config{Interface: n.ifA, Mode: mode, Netns: nsPath(n.nsA), Bind: bind})
			if err != nil {
				t.Fatalf("%v %v: %v", mode, bind, err)
			}
			want := "xdp " + mode.String() + ", copy, multi-buffer, 1 queue"
			if d := l.Describe(); l.ZeroCopy() || d != want {
				t.Errorf("%v %v: ZeroCopy %v, Describe %q, want false, %q", mode, bind, l.ZeroCopy(), d, want)
			}
			l.Close()
		}
		start := time.Now()
		_, err := xdp.Open(xdp.Config{Interface: n.ifA, Mode: mode, Netns: nsPath(n.nsA), Bind: xdp.BindZeroCopy})
		if !errors.Is(err, xdp.ErrZeroCopy) {
			t.Fatalf("%v zero-copy on veth: %v, want ErrZeroCopy", mode, err)
		}
		for _, s := range []string{"AF_XDP zero-copy refused on " + n.ifA, "(driver veth)", "use --xdp-bind auto"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%v: error %q does not say %q", mode, err, s)
			}
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%v: the refusal took %v", mode, d)
		}
	}
	l, err := xdp.Open(xdp.Config{Interface: n.ifA, Mode: bpf.ModeNative, Netns: nsPath(n.nsA)})
	if err != nil {
		t.Fatalf("open after the refusals: %v", err)
	}
	l.Close()
	for _, s := range []string{"auto", "zero-copy", "copy"} {
		if b, err := xdp.ParseBind(s); err != nil || b.String() != s {
			t.Errorf("ParseBind(%q) = %v, %v", s, b, err)
		}
	}
	if _, err := xdp.ParseBind("zerocopy"); err == nil || !strings.Contains(err.Error(), "want auto, zero-copy or copy") {
		t.Errorf("ParseBind(zerocopy): %v", err)
	}
}
