package daemon

import (
	"net/netip"
	"testing"
)

// TestListenerTakes: a listening id bound to an address takes only requests for
// that address; one bound to the unspecified address (or never bound) takes any
// (rdma_cm's listener lookup by the REQ's destination, cma_ib_id_from_event).
func TestListenerTakes(t *testing.T) {
	v4, v6, other := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1"), netip.MustParseAddr("10.0.0.2")
	for _, c := range []struct {
		bound netip.AddrPort
		req   netip.Addr
		want  bool
	}{
		{netip.AddrPortFrom(v4, 7174), v4, true},
		{netip.AddrPortFrom(v4, 7174), other, false},
		{netip.AddrPortFrom(v4, 7174), v6, false},
		{netip.AddrPortFrom(netip.IPv4Unspecified(), 7174), v6, true},
		{netip.AddrPortFrom(netip.IPv6Unspecified(), 7174), v4, true},
		{netip.AddrPort{}, v4, true},
		{netip.AddrPortFrom(netip.AddrFrom16(v4.As16()), 7174), v4, true}, // ::ffff:10.0.0.1
	} {
		if got := (&cmID{bound: c.bound}).takes(c.req); got != c.want {
			t.Errorf("bound %v, request for %v: %v, want %v", c.bound, c.req, got, c.want)
		}
	}
}
