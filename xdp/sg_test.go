package xdp

import (
	"fmt"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xroce/xroce/xdp/xsk"
)

// TestSGRefused: the bind errors that make the link fall back to single-buffer are
// EINVAL (a kernel before 6.6 does not know XDP_USE_SG) and EOPNOTSUPP (a zero-copy
// driver without multi-buffer), from bind only.
func TestSGRefused(t *testing.T) {
	bind := func(e error) error {
		return fmt.Errorf("xdp: eth0 queue 0: %w", fmt.Errorf("xsk: %w to queue 0 with flags XDP_USE_SG: %w", xsk.ErrBind, e))
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{bind(unix.EINVAL), true},
		{bind(unix.EOPNOTSUPP), true},
		{bind(unix.EBUSY), false},
		{fmt.Errorf("xsk: sizing the RX ring: %w", unix.EINVAL), false},
		{fmt.Errorf("xsk: registering the UMEM: %w", unix.ENOMEM), false},
	} {
		if got := sgRefused(c.err); got != c.want {
			t.Errorf("sgRefused(%v) = %v", c.err, got)
		}
	}
}

func TestReleaseAtLeast(t *testing.T) {
	for rel, want := range map[string]bool{
		"6.18.0-1-amd64": true, "6.6.0": true, "6.5.13-generic": false, "5.15.0-105-generic": false,
		"7.0": true, "6.10": true, "": false, "garbage": false,
	} {
		if got := releaseAtLeast(rel, 6, 6); got != want {
			t.Errorf("releaseAtLeast(%q, 6, 6) = %v", rel, got)
		}
	}
}
