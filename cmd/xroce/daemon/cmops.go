package daemon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/transport/rdmacm"
)

// The connection manager's ops of a session (librdmacm's calls in the library).

// The port spaces an id may have, each with its QP type (qptRC, qptUD).
const (
	rdmaPSTCP = 0x0106
	rdmaPSUDP = 0x0111
)

// handleCM answers one OpCM* request.
func (s *session) handleCM(op uint16, p []byte) (any, error) {
	c, err := cmFor(s.dev, s.logf)
	if err != nil {
		return nil, fail(unix.ENODEV, "connection manager: %v", err)
	}
	switch op {
	case OpCMCreateID:
		var r CMCreateIDReq
		if err := decode(p, &r); err != nil {
			return nil, err
		}
		return s.cmCreateID(c, &r)
	case OpCMBind:
		var r CMBindReq
		if err := decode(p, &r); err != nil {
			return nil, err
		}
		return s.cmBind(c, &r)
	case OpCMResolveAddr:
		var r CMResolveReq
		if err := decode(p, &r); err != nil {
			return nil, err
		}
		return s.cmResolveAddr(c, &r)
	case OpCMListen:
		var r CMListenReq
		if err := decode(p, &r); err != nil {
			return nil, err
		}
		return s.cmListen(c, &r)
	case OpCMConnect, OpCMAccept:
		var r CMConnReq
		if err := decode(p, &r); err != nil {
			return nil, err
		}
		return nil, s.cmConnect(c, op, &r)
	case OpCMReject:
		var r CMRejectReq
		if err := decode(p, &r); err != nil {
			return nil, err
		}
		return nil, s.cmReject(c, &r)
	case OpCMMigrateID:
		var r CMMigrateReq
		if err := decode(p, &r); err != nil {
			return nil, err
		}
		return nil, s.cmMigrate(c, &r)
	case OpCMInitQPAttr:
		var r CMInitQPAttrReq
		if err := decode(p, &r); err != nil {
			return nil, err
		}
		return s.cmInitQPAttr(c, &r)
	}
	var h Handle
	if err := decode(p, &h); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id, err := s.cmID(c, h.Handle)
	if err != nil {
		return nil, err
	}
	switch op {
	case OpCMResolveRoute:
		if !id.remote.IsValid() {
			return nil, fail(unix.EINVAL, "rdma_resolve_route before rdma_resolve_addr")
		}
		id.event(cmEventRouteResolved, 0)
	case OpCMDisconnect:
		if id.conn == nil {
			return nil, fail(unix.EINVAL, "rdma_disconnect on an id that is not connected")
		}
		_ = id.conn.Disconnect()
	case OpCMDestroyID:
		c.destroy(id)
	case OpCMEstablish:
		if id.conn == nil {
			return nil, fail(unix.EINVAL, "rdma_establish on an id that is not connecting")
		}
		if err := id.conn.Establish(); err != nil {
			return nil, fail(unix.EINVAL, "%v", err)
		}
	}
	return nil, nil
}

// carriesMADs says, EMSGSIZE, that the device's interface MTU carries no RoCE
// frame, not even the CM's 256-byte MADs: rdma_connect then reports
// RDMA_CM_EVENT_UNREACHABLE at once (status -EMSGSIZE), where the REQ would never
// leave and the application would wait through every CM retry (about 100 s) to be
// told the peer did not answer.
func (s *session) carriesMADs() error {
	mtu := s.dev.Link().MTU()
	if need := roce.LargestIPPacket(roce.MTU256, false); mtu < need {
		return fail(unix.EMSGSIZE, "the interface %s's MTU %d carries no RoCE frame, not even the connection manager's (%d bytes over IPv4): raise it (ip link set %s mtu 1500)",
			s.ifname, mtu, need, s.ifname)
	}
	return nil
}

// cmID returns the session's id h; c.mu is held.
func (s *session) cmID(c *cmDevice, h uint32) (*cmID, error) {
	id := c.ids[h]
	if id == nil || id.owner != s {
		return nil, fail(unix.EINVAL, "no rdma_cm_id %d in this session", h)
	}
	return id, nil
}

func (s *session) cmCreateID(c *cmDevice, r *CMCreateIDReq) (*Handle, error) {
	ch := s.chans[r.Channel]
	switch {
	case ch == nil:
		return nil, fail(unix.EINVAL, "no event channel %d in this session", r.Channel)
	case r.PS != rdmaPSTCP && r.PS != rdmaPSUDP:
		return nil, fail(unix.EPROTONOSUPPORT, "port space 0x%x: xroce's connection manager serves RDMA_PS_TCP (0x0106) and RDMA_PS_UDP (0x0111)", r.PS)
	case r.PS == rdmaPSTCP && r.QPType != qptRC, r.PS == rdmaPSUDP && r.QPType != qptUD:
		return nil, fail(unix.EPROTONOSUPPORT, "QP type %d: RDMA_PS_TCP connects RC QPs (2), RDMA_PS_UDP resolves UD QPs (4)", r.QPType)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id := &cmID{handle: c.newHandle(), owner: s, ch: ch, cookie: r.Cookie, ps: cm.PortSpace(r.PS)}
	c.ids[id.handle] = id
	return &Handle{id.handle}, nil
}

// cmMigrate points an id's events at another of the session's channels: the
// events delivered after it returns go there (deliver writes under c.mu); those
// already written wait on the old channel, from which the library's
// rdma_migrate_id moves the id's to the new one (cm.c move_events).
func (s *session) cmMigrate(c *cmDevice, r *CMMigrateReq) error {
	ch := s.chans[r.Channel]
	if ch == nil {
		return fail(unix.EINVAL, "no event channel %d in this session", r.Channel)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id, err := s.cmID(c, r.Handle)
	if err != nil {
		return err
	}
	id.ch = ch
	return nil
}

// localAddr checks that a is unspecified or one of the device's addresses.
func (s *session) localAddr(a netip.Addr) error {
	if !a.IsValid() || a.IsUnspecified() {
		return nil
	}
	for _, e := range s.dev.GIDTable() {
		if e.GID.Addr() == a.Unmap() {
			return nil
		}
	}
	return fail(unix.EADDRNOTAVAIL, "%v is not an address of this device (see xroce gids)", a)
}

func (s *session) cmBind(c *cmDevice, r *CMBindReq) (*CMAddr, error) {
	a, ok := r.Addr.addrPort()
	if !ok || !a.IsValid() {
		return nil, fail(unix.EAFNOSUPPORT, "address family %d: AF_INET or AF_INET6", r.Addr.Family)
	}
	if err := s.localAddr(a.Addr()); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id, err := s.cmID(c, r.Handle)
	if err != nil {
		return nil, err
	}
	if id.bound.IsValid() || id.remote.IsValid() || id.passive {
		// rdma_cm binds an id in RDMA_CM_IDLE only (cma.c rdma_bind_addr).
		return nil, fail(unix.EINVAL, "the id has an address already: an id is bound once, before rdma_resolve_addr or rdma_listen")
	}
	if err := c.svc.CanListen(id.ps, a.Addr(), a.Port()); err != nil {
		return nil, portErr(err)
	}
	if a.Port() == 0 { // the port is chosen now: applications read it before rdma_listen
		port, err := c.svc.Reserve(id.ps)
		if err != nil {
			return nil, fail(unix.EADDRINUSE, "%v", err)
		}
		a = netip.AddrPortFrom(a.Addr(), port)
		id.reserved = port
	}
	id.bound, id.local = a, a
	out := cmAddr(a)
	return &out, nil
}

// cmResolveAddr picks the local address and resolves the next hop to Dst in the
// background; ADDR_RESOLVED or ADDR_ERROR follows: status -ENETUNREACH at once when
// no route leads to Dst; -ETIMEDOUT when its next hop has not answered within the
// application's timeout_ms, asked again until then (drivers/infiniband/core/addr.c:
// process_one_req retries while the neighbour is not valid, then reports
// -ETIMEDOUT); -EADDRNOTAVAIL at once for an IPv6 link-local Dst, which xroce's CM
// does not take.
func (s *session) cmResolveAddr(c *cmDevice, r *CMResolveReq) (*CMAddr, error) {
	src, ok1 := r.Src.addrPort()
	dst, ok2 := r.Dst.addrPort()
	if !ok1 || !ok2 || !dst.IsValid() {
		return nil, fail(unix.EAFNOSUPPORT, "rdma_resolve_addr needs an AF_INET or AF_INET6 destination")
	}
	if err := s.localAddr(src.Addr()); err != nil {
		return nil, err
	}
	c.mu.Lock()
	id, err := s.cmID(c, r.Handle)
	if err == nil {
		id.remote = dst
	}
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if dst.Addr().Is6() && dst.Addr().IsLinkLocalUnicast() {
		// rdma_cm connects over link-local with the scope id; xroce's CM does not
		// (README, "Unmodified applications"): say so, not "no neighbour".
		s.logf("rdma_resolve_addr %v: xroce's RDMA CM takes no IPv6 link-local address: use a global or unique-local one", dst)
		c.mu.Lock()
		id.event(cmEventAddrError, -int32(unix.EADDRNOTAVAIL))
		c.mu.Unlock()
		return &CMAddr{}, nil
	}
	from := src.Addr()
	if from.IsUnspecified() {
		from = netip.Addr{}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		timeout := time.Duration(max(r.TimeoutMs, 1)) * time.Millisecond
		ctx, cancel := context.WithTimeout(s.ctx, timeout)
		defer cancel()
		local, err := resolveUntil(ctx, c.svc, from, dst.Addr(), timeout)
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.ids[id.handle] != id {
			return
		}
		if err != nil {
			s.logf("rdma_resolve_addr %v: %v", dst, err)
			status := -int32(unix.ETIMEDOUT)
			if errors.Is(err, transport.ErrNoRoute) {
				status = -int32(unix.ENETUNREACH) // as the kernel's rdma_cm: no route
			}
			id.event(cmEventAddrError, status)
			return
		}
		id.local = netip.AddrPortFrom(local, 0)
		id.event(cmEventAddrResolved, 0)
	}()
	return &CMAddr{}, nil
}

// resolveUntil is Service.ResolveAddr asked again, resolveRetry apart, until it
// succeeds, finds no route, or ctx (the application's timeout) ends.
func resolveUntil(ctx context.Context, svc *rdmacm.Service, src, dst netip.Addr, timeout time.Duration) (netip.Addr, error) {
	type res struct {
		a   netip.Addr
		err error
	}
	for {
		ch := make(chan res, 1)
		go func() {
			a, err := svc.ResolveAddr(src, dst)
			ch <- res{a, err}
		}()
		var r res
		select {
		case r = <-ch:
		case <-ctx.Done():
			return netip.Addr{}, fmt.Errorf("no answer from %v's neighbour within %v", dst, timeout)
		}
		if r.err == nil || errors.Is(r.err, transport.ErrNoRoute) {
			return r.a, r.err
		}
		select {
		case <-time.After(resolveRetry):
		case <-ctx.Done():
			return netip.Addr{}, fmt.Errorf("%w, until the timeout of %v", r.err, timeout)
		}
	}
}

// portErr is the errno of a port rdma_cm would refuse (cma_check_port):
// EADDRINUSE for one listened on at the same address, EADDRNOTAVAIL where a
// listener of every address would share it.
func portErr(err error) error {
	switch {
	case errors.Is(err, rdmacm.ErrPortInUse):
		return fail(unix.EADDRINUSE, "%v", err)
	case errors.Is(err, rdmacm.ErrPortShared):
		return fail(unix.EADDRNOTAVAIL, "%v", err)
	}
	return err
}

func (s *session) cmListen(c *cmDevice, r *CMListenReq) (*CMAddr, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, err := s.cmID(c, r.Handle)
	if err != nil {
		return nil, err
	}
	if id.listener != nil || id.conn != nil {
		return nil, fail(unix.EINVAL, "rdma_listen on an id that listens or connects already")
	}
	l, err := c.svc.ListenAddr(id.ps, id.bound.Addr(), id.bound.Port(), int(r.Backlog))
	if err != nil {
		return nil, portErr(err)
	}
	id.listener, id.reserved = l, 0
	id.bound = netip.AddrPortFrom(id.bound.Addr(), l.Port())
	id.local = id.bound
	c.byListener[l] = id
	a := cmAddr(id.bound)
	return &a, nil
}

// cmConnect is rdma_connect (a new connection on the id's QP) or rdma_accept (the
// id's connection request answered).
func (s *session) cmConnect(c *cmDevice, op uint16, r *CMConnReq) error {
	qp, qpn, err := s.connQP(r)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id, err := s.cmID(c, r.Handle)
	if err != nil {
		return err
	}
	if id.ps == rdmaPSUDP {
		return c.resolveUD(id, op, qpn, &r.Param)
	}
	var conn *rdmacm.Conn
	if op == OpCMAccept {
		if id.req == nil {
			return fail(unix.EINVAL, "rdma_accept on an id without a connection request")
		}
		if qp != nil {
			conn, err = id.req.Accept(qp, r.Param.param())
		} else {
			conn, err = id.req.AcceptQPN(qpn, r.Param.param())
		}
		id.req = nil
	} else {
		if id.conn != nil || !id.remote.IsValid() {
			return fail(unix.EINVAL, "rdma_connect needs a resolved, unconnected id")
		}
		if err := s.carriesMADs(); err != nil {
			// As the kernel's rdma_connect, which succeeds and reports the REQ's
			// fate as an event (rping, for one, hangs on a synchronous error).
			s.logf("rdma_connect to %v: %v", id.remote, err)
			id.event(uint32(rdmacm.EventUnreachable), -int32(unix.EMSGSIZE))
			return nil
		}
		o := rdmacm.DialOptions{Src: id.local.Addr(), TrafficClass: r.TOS}
		if qp != nil {
			conn, err = c.svc.Connect(qp, id.remote, r.Param.param(), o)
		} else {
			conn, err = c.svc.ConnectQPN(qpn, id.remote, r.Param.param(), o)
		}
	}
	if err != nil {
		return fail(unix.EINVAL, "%v", err)
	}
	id.conn = conn
	c.byConn[conn] = id
	return nil
}

// resolveUD is rdma_connect (a SIDR_REQ) and rdma_accept (the SIDR_REP naming
// qpn) on an RDMA_PS_UDP id; c.mu is held.
func (c *cmDevice) resolveUD(id *cmID, op uint16, qpn uint32, p *CMParam) error {
	pd := p.param().PrivateData
	if op == OpCMAccept {
		if id.req == nil {
			return fail(unix.EINVAL, "rdma_accept on an id without a connection request")
		}
		err := id.req.AcceptUD(qpn, rdmacm.UDPQKey, pd)
		id.req = nil
		return err
	}
	if id.conn != nil || !id.remote.IsValid() {
		return fail(unix.EINVAL, "rdma_connect needs a resolved, unconnected id")
	}
	conn, err := c.svc.ConnectUD(id.remote, pd, rdmacm.DialOptions{Src: id.local.Addr()})
	if err != nil {
		return fail(unix.EINVAL, "%v", err)
	}
	id.conn = conn
	c.byConn[conn] = id
	return nil
}

func (s *session) cmReject(c *cmDevice, r *CMRejectReq) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, err := s.cmID(c, r.Handle)
	if err != nil {
		return err
	}
	if id.req == nil {
		return fail(unix.EINVAL, "rdma_reject on an id without a connection request")
	}
	n := min(int(r.PrivateDataLen), len(r.PrivateData))
	err = id.req.Reject(r.PrivateData[:n])
	id.req = nil
	return err
}

// destroy ends an id: its listener closes, its connection request is rejected,
// its connection closes (a DREQ, or the DREP), as rdma_destroy_id; c.mu is held.
func (c *cmDevice) destroy(id *cmID) {
	if id.listener != nil {
		delete(c.byListener, id.listener)
		id.listener.Close()
	}
	if id.req != nil {
		_ = id.req.Reject(nil)
	}
	if id.conn != nil {
		delete(c.byConn, id.conn)
		id.conn.Close()
	}
	if id.reserved != 0 {
		c.svc.Release(id.ps, id.reserved)
	}
	delete(c.ids, id.handle)
}

// closeCM destroys the session's ids (the application exited).
func (s *session) closeCM() {
	v, ok := cmDevices.Load(s.dev)
	if !ok {
		return
	}
	c := v.(*cmDevice)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range c.ids {
		if id.owner == s {
			c.destroy(id)
		}
	}
}
