package daemon

import (
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSessionCMErrors: the connection manager's ops refuse what librdmacm would
// refuse, each with its errno: an unknown event channel or id, a port space or QP
// type it does not serve, an address family or address the device lacks, a
// malformed body, resolve_route before resolve_addr, connect on an unresolved id,
// disconnect on an unconnected one; a good bind with port 0 reserves a port at once
// and listen keeps it.
func TestSessionCMErrors(t *testing.T) {
	dp := startDataPath(t)
	c := dp.dial(t)
	sv := seqpacketPair(t)
	var ch Handle
	err := c.CallFD(OpCreateChannel, nil, sv[1], &ch)
	unix.Close(sv[1])
	if err != nil {
		t.Fatal(err)
	}
	var id Handle
	wantErrno(t, "unknown channel", c.Call(OpCMCreateID, CMCreateIDReq{Channel: 99, PS: rdmaPSTCP, QPType: qptRC}, &id), unix.EINVAL)
	wantErrno(t, "RDMA_PS_IB", c.Call(OpCMCreateID, CMCreateIDReq{Channel: ch.Handle, PS: 0x013F, QPType: qptRC}, &id), unix.EPROTONOSUPPORT)
	wantErrno(t, "TCP with UD", c.Call(OpCMCreateID, CMCreateIDReq{Channel: ch.Handle, PS: rdmaPSTCP, QPType: qptUD}, &id), unix.EPROTONOSUPPORT)
	wantErrno(t, "short body", c.Call(OpCMCreateID, Handle{ch.Handle}, &id), unix.EBADMSG)
	if err := c.Call(OpCMCreateID, CMCreateIDReq{Channel: ch.Handle, PS: rdmaPSTCP, QPType: qptRC, Cookie: 7}, &id); err != nil {
		t.Fatal(err)
	}
	var a CMAddr
	wantErrno(t, "unknown id", c.Call(OpCMBind, CMBindReq{Handle: 99, Addr: cmAddr(netip.MustParseAddrPort("10.0.0.1:7000"))}, &a), unix.EINVAL)
	wantErrno(t, "family 99", c.Call(OpCMBind, CMBindReq{Handle: id.Handle, Addr: CMAddr{Family: 99}}, &a), unix.EAFNOSUPPORT)
	wantErrno(t, "foreign address", c.Call(OpCMBind, CMBindReq{Handle: id.Handle, Addr: cmAddr(netip.MustParseAddrPort("10.9.9.9:7000"))}, &a), unix.EADDRNOTAVAIL)
	wantErrno(t, "route before addr", c.Call(OpCMResolveRoute, Handle{id.Handle}, nil), unix.EINVAL)
	wantErrno(t, "connect unresolved", c.Call(OpCMConnect, CMConnReq{Handle: id.Handle, QP: 99}, nil), unix.EINVAL)
	wantErrno(t, "disconnect unconnected", c.Call(OpCMDisconnect, Handle{id.Handle}, nil), unix.EINVAL)
	if err := c.Call(OpCMBind, CMBindReq{Handle: id.Handle, Addr: cmAddr(netip.MustParseAddrPort("10.0.0.1:0"))}, &a); err != nil {
		t.Fatal(err)
	}
	bound, _ := a.addrPort()
	if bound.Addr() != netip.MustParseAddr("10.0.0.1") || bound.Port() < 32768 || bound.Port() > 60999 {
		t.Errorf("bound %v", bound)
	}
	var l CMAddr
	if err := c.Call(OpCMListen, CMListenReq{Handle: id.Handle, Backlog: 1}, &l); err != nil || l != a {
		t.Errorf("listen: %v, %+v, want %+v", err, l, a)
	}
	wantErrno(t, "listen twice", c.Call(OpCMListen, CMListenReq{Handle: id.Handle, Backlog: 1}, &l), unix.EINVAL)
	if err := c.Call(OpCMDestroyID, Handle{id.Handle}, nil); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "destroyed id", c.Call(OpCMDestroyID, Handle{id.Handle}, nil), unix.EINVAL)
}
