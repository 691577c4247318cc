package rdmacm_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/transport/rdmacm"
)

// TestListenAddrs: two listeners share a port on two addresses of one device and
// each takes the requests to its own address, as rdma_cm's listeners do
// (cma_check_port, cma_ib_id_from_event); cma_check_port's refusals come with
// EADDRINUSE's and EADDRNOTAVAIL's errors.
func TestListenAddrs(t *testing.T) {
	ipB2 := netip.MustParseAddr("10.9.1.2")
	endA, endB := transport.NewPipe(
		transport.PipeConfig{MAC: [6]byte{2, 0, 0, 0, 9, 1}, Addrs: []netip.Addr{ipA}},
		transport.PipeConfig{MAC: [6]byte{2, 0, 0, 0, 9, 2}, Addrs: []netip.Addr{ipB, ipB2}})
	a, b := openNode(t, endA, fastCM), openNode(t, endB, fastCM)
	const port = 7471
	l1, err := b.svc.ListenAddr(cm.PortSpaceTCP, ipB, port, 0)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := b.svc.ListenAddr(cm.PortSpaceTCP, netip.AddrFrom16(ipB2.As16()), port, 0) // IPv4-mapped: the same address
	if err != nil {
		t.Fatalf("a second address on the port: %v", err)
	}
	if l2.Addr() != ipB2 || l1.Port() != port || l2.Port() != port {
		t.Errorf("listeners on %v:%d and %v:%d", l1.Addr(), l1.Port(), l2.Addr(), l2.Port())
	}
	refusals := []struct {
		addr netip.Addr
		is   error
		msg  string
	}{
		{ipB, rdmacm.ErrPortInUse, "rdmacm: port 7471 is already bound on this device: another listener holds it; stop that one, or choose another port"},
		{netip.IPv4Unspecified(), rdmacm.ErrPortShared, "rdmacm: port 7471 is already listened on for 10.9.0.2, so no listener can take it for every address (rdma_cm refuses it too): bind this one to another address of the device, or choose another port"},
	}
	for _, r := range refusals {
		if _, err := b.svc.ListenAddr(cm.PortSpaceTCP, r.addr, port, 0); !errors.Is(err, r.is) || err.Error() != r.msg {
			t.Errorf("ListenAddr(%v): %v, want %q", r.addr, err, r.msg)
		}
	}
	// Each address's request goes to its own listener, with that local address.
	for _, c := range []struct {
		to netip.Addr
		l  *rdmacm.Listener
	}{{ipB2, l2}, {ipB, l1}} {
		qa := a.newQP(t)
		ch := make(chan error, 1)
		go func() {
			_, err := a.svc.Dial(ctx5(t), qa, netip.AddrPortFrom(c.to, port), rdmacm.Param{}, rdmacm.DialOptions{})
			ch <- err
		}()
		req, err := c.l.Accept(ctx5(t))
		if err != nil {
			t.Fatalf("request to %v: %v", c.to, err)
		}
		if req.Local != netip.AddrPortFrom(c.to, port) {
			t.Errorf("request to %v: Local %v", c.to, req.Local)
		}
		if _, err := req.Accept(b.newQP(t), rdmacm.Param{}); err != nil {
			t.Fatal(err)
		}
		if err := <-ch; err != nil {
			t.Fatalf("Dial %v: %v", c.to, err)
		}
	}
	// With one listener closed, its address's requests are refused (no listener
	// of every address takes them), and the port stays the other's.
	l2.Close()
	if _, err := a.svc.Dial(ctx5(t), a.newQP(t), netip.AddrPortFrom(ipB2, port), rdmacm.Param{}, rdmacm.DialOptions{}); !errors.Is(err, rdmacm.ErrRejected) {
		t.Errorf("Dial to the closed listener's address: %v, want ErrRejected", err)
	}
	if _, err := b.svc.ListenAddr(cm.PortSpaceTCP, netip.Addr{}, port, 0); !errors.Is(err, rdmacm.ErrPortShared) {
		t.Errorf("every address beside %v: %v", ipB, err)
	}
	l1.Close()
	any, err := b.svc.ListenAddr(cm.PortSpaceTCP, netip.Addr{}, port, 0)
	if err != nil {
		t.Fatalf("every address on the freed port: %v", err)
	}
	if _, err := b.svc.ListenAddr(cm.PortSpaceTCP, ipB2, port, 0); !errors.Is(err, rdmacm.ErrPortShared) ||
		err.Error() != "rdmacm: port 7471 is already listened on for every address of this device, so no listener can take it for 10.9.1.2 (rdma_cm refuses it too): stop that one, bind both to their own addresses, or choose another port" {
		t.Errorf("one address beside every address: %v", err)
	}
	any.Close()
}
