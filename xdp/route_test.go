package xdp_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xroce/xroce/bpf"
	"github.com/xroce/xroce/transport"
)

// TestResolveRoutes: Resolve follows the kernel's routes, as rdma_rxe's rxe_net.c
// does: an on-link peer resolves to its own MAC, a peer behind a gateway to the
// gateway's, and an address no route reaches through the interface (none at all,
// or this host's own) fails at once with transport.ErrNoRoute instead of waiting
// for an ARP answer that cannot come. The UDP link (here on B's side) refuses the
// same addresses.
func TestResolveRoutes(t *testing.T) {
	n := newTestNet(t, 1500, false)
	la, lb := openXDPOn(t, n.ifA, n.nsA, bpf.ModeGeneric), openUDPOn(t, n.ifB, n.nsB)
	if mac, err := la.Resolve(n.ipB); err != nil || mac != lb.HardwareAddr() {
		t.Fatalf("Resolve(%v) = %x, %v; want B's %x", n.ipB, mac, err, lb.HardwareAddr())
	}
	far := netip.MustParseAddr("10.250.7.9")
	for _, c := range []struct {
		name   string
		l      transport.Link
		ifname string
		dst    netip.Addr
		want   string
	}{
		{"afxdp", la, n.ifA, far, "xdp: no route to 10.250.7.9 in this network namespace (ip route get 10.250.7.9: "},
		{"afxdp", la, n.ifA, n.ipA, "it is an address of this host (lo), which RoCE frames on " + n.ifA + " cannot reach"},
		{"udp", lb, n.ifB, far, "xdp: no route to 10.250.7.9 in this network namespace (ip route get 10.250.7.9: "},
		{"udp", lb, n.ifB, n.ipB, "it is an address of this host (lo), which RoCE frames on " + n.ifB + " cannot reach"},
	} {
		start := time.Now()
		_, err := c.l.Resolve(c.dst)
		if !errors.Is(err, transport.ErrNoRoute) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Resolve(%v): %v; want transport.ErrNoRoute and %q", c.name, c.dst, err, c.want)
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("%s: Resolve(%v) took %v: a missing route needs no neighbour wait", c.name, c.dst, took)
		}
	}
	sh(t, "ip", "-n", n.nsA, "route", "add", "10.250.7.0/24", "via", n.ipB.String())
	if mac, err := la.Resolve(far); err != nil || mac != lb.HardwareAddr() {
		t.Errorf("Resolve(%v) through the gateway %v = %x, %v; want the gateway's %x", far, n.ipB, mac, err, lb.HardwareAddr())
	}
	sh(t, "ip", "-n", n.nsB, "route", "add", "10.250.7.0/24", "via", n.ipA.String())
	if _, err := lb.Resolve(far); err != nil {
		t.Errorf("udp: Resolve(%v) through the gateway %v: %v", far, n.ipA, err)
	}
}
