package xdp

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestRouteHandleFamilies: the link's netlink handle holds a NETLINK_ROUTE socket
// and nothing else, so kernels without xfrm_user or nfnetlink can run xroce.
func TestRouteHandleFamilies(t *testing.T) {
	h, err := routeHandle()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if !h.SupportsNetlinkFamily(unix.NETLINK_ROUTE) {
		t.Error("no NETLINK_ROUTE socket")
	}
	for _, f := range []int{unix.NETLINK_XFRM, unix.NETLINK_NETFILTER} {
		if h.SupportsNetlinkFamily(f) {
			t.Errorf("the handle opened netlink family %d", f)
		}
	}
}
