package rdmacm

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/transport/ibcm"
)

// Listener takes the REQs for one port (rdma_bind_addr and rdma_listen on
// RDMA_PS_TCP), or the SIDR_REQs for one port of RDMA_PS_UDP: those for every local
// address, or for one (ListenAddr).
type Listener struct {
	s      *Service
	ps     cm.PortSpace
	port   uint16
	addr   netip.Addr // the local address it takes requests for; the zero Addr: every one
	reqs   chan *Request
	closed chan struct{}
}

// DefaultBacklog is how many REQs wait for Accept when Listen is given 0.
const DefaultBacklog = 64

// Listen takes REQs for port (Service ID 0x0000000001060000 | port). Port 0 picks a
// free ephemeral port (Port tells which). Up to backlog REQs wait for Accept; more
// are rejected (Consumer Reject). A port already listened on is ErrPortInUse.
func (s *Service) Listen(port uint16, backlog int) (*Listener, error) {
	return s.ListenPS(cm.PortSpaceTCP, port, backlog)
}

// ListenPS is Listen in port space ps: cm.PortSpaceTCP (REQs, RC connections) or
// cm.PortSpaceUDP (SIDR_REQs: a UD QP's QPN and Q_Key asked for, Request.AcceptUD).
func (s *Service) ListenPS(ps cm.PortSpace, port uint16, backlog int) (*Listener, error) {
	return s.ListenAddr(ps, netip.Addr{}, port, backlog)
}

// ListenAddr is ListenPS for the requests to one local address of the device
// (rdma_bind_addr to that address, then rdma_listen), or to every one when addr is
// the zero Addr or unspecified. Listeners of different addresses share a port, and
// a request goes to the one of its destination address, else to the one of every
// address; as rdma_cm's cma_check_port, a second listener of the same address is
// ErrPortInUse (EADDRINUSE), and a listener of every address beside another one
// on the port, or of one address beside a listener of every address, is
// ErrPortShared (EADDRNOTAVAIL).
func (s *Service) ListenAddr(ps cm.PortSpace, addr netip.Addr, port uint16, backlog int) (*Listener, error) {
	if ps != cm.PortSpaceTCP && ps != cm.PortSpaceUDP {
		return nil, fmt.Errorf("rdmacm: port space 0x%04x: RDMA_PS_TCP and RDMA_PS_UDP are served: %w", uint16(ps), ErrParam)
	}
	if addr.IsUnspecified() {
		addr = netip.Addr{}
	}
	addr = addr.Unmap()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	id := cm.IPServiceID(ps, port)
	if port == 0 {
		p, err := s.allocPort(ps)
		if err != nil {
			return nil, err
		}
		port, id = p, cm.IPServiceID(ps, p)
	} else if s.reserved[id] {
		delete(s.reserved, id) // Reserve's caller listens on it now
	} else if err := s.portFree(id, addr, port); err != nil {
		return nil, err
	}
	if backlog <= 0 {
		backlog = DefaultBacklog
	}
	s.ports[id] = true
	l := &Listener{s: s, ps: ps, port: port, addr: addr, reqs: make(chan *Request, backlog), closed: make(chan struct{})}
	if len(s.listeners[id]) == 0 {
		s.mgr.Listen(id)
	}
	s.listeners[id] = append(s.listeners[id], l)
	return l, nil
}

// CanListen returns the error ListenAddr would give for a listener of addr on
// port now (nil: none), for rdma_bind_addr, which refuses a taken port before the
// rdma_listen that takes it (cma_use_port).
func (s *Service) CanListen(ps cm.PortSpace, addr netip.Addr, port uint16) error {
	if addr.IsUnspecified() {
		addr = netip.Addr{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if port == 0 || s.reserved[cm.IPServiceID(ps, port)] {
		return nil
	}
	return s.portFree(cm.IPServiceID(ps, port), addr.Unmap(), port)
}

// portFree says whether a listener of addr (the zero Addr: every address) may
// take the port of Service ID id, as cma_check_port decides; s.mu is held.
func (s *Service) portFree(id uint64, addr netip.Addr, port uint16) error {
	ls := s.listeners[id]
	if len(ls) == 0 && s.ports[id] { // an active connection's port, or a reservation
		return portInUse{port}
	}
	for _, l := range ls {
		switch {
		case !addr.IsValid() || !l.addr.IsValid():
			return portShared{port, addr, l.addr}
		case l.addr == addr:
			return portInUse{port}
		}
	}
	return nil
}

// listenerFor returns the listener of Service ID id that takes a request to the
// local address dst: the one of dst, else the one of every address; s.mu is held.
func (s *Service) listenerFor(id uint64, dst netip.Addr) *Listener {
	var any *Listener
	for _, l := range s.listeners[id] {
		switch {
		case l.addr.IsValid() && l.addr == dst.Unmap():
			return l
		case !l.addr.IsValid():
			any = l
		}
	}
	return any
}

// Reserve binds a free ephemeral port for a later Listen (rdma_bind_addr with port
// 0, whose port the application reads before rdma_listen: qperf does). Release
// frees it when no Listen comes.
func (s *Service) Reserve(ps cm.PortSpace) (uint16, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.allocPort(ps)
	if err == nil {
		s.reserved[cm.IPServiceID(ps, p)] = true
	}
	return p, err
}

// Release frees a port Reserve returned that no Listener took.
func (s *Service) Release(ps cm.PortSpace, port uint16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id := cm.IPServiceID(ps, port); s.reserved[id] {
		delete(s.reserved, id)
		delete(s.ports, id)
	}
}

// Port returns the port the Listener takes REQs for.
func (l *Listener) Port() uint16 { return l.port }

// Addr returns the local address the Listener takes REQs for; the zero Addr:
// every one.
func (l *Listener) Addr() netip.Addr { return l.addr }

// Accept returns the next connection request (RDMA_CM_EVENT_CONNECT_REQUEST), or
// an error when ctx ends or the Listener closes (ErrClosed).
func (l *Listener) Accept(ctx context.Context) (*Request, error) {
	select {
	case r := <-l.reqs:
		return r, nil
	case <-l.closed:
		return nil, fmt.Errorf("rdmacm: listener on port %d: %w", l.port, ErrClosed)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close stops taking REQs; the requests not yet accepted are rejected.
func (l *Listener) Close() error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	now := time.Now()
	l.closeLocked(now)
	l.s.settle(now)
	return nil
}

// closeLocked closes l; s.mu is held.
func (l *Listener) closeLocked(now time.Time) {
	id := cm.IPServiceID(l.ps, l.port)
	ls := l.s.listeners[id]
	i := slices.Index(ls, l)
	if i < 0 {
		return
	}
	if ls = slices.Delete(ls, i, i+1); len(ls) > 0 {
		l.s.listeners[id] = ls
	} else {
		delete(l.s.listeners, id)
		delete(l.s.ports, id)
		l.s.mgr.Unlisten(id)
	}
	close(l.closed)
	for {
		select {
		case r := <-l.reqs:
			r.c.closeLocked(now, fmt.Errorf("rdmacm: listener on port %d closed: %w", l.port, ErrClosed))
		default:
			return
		}
	}
}

// Request is a REQ waiting for Accept or Reject.
type Request struct {
	c   *Conn
	req cm.REQ
	ud  bool   // a SIDR_REQ (RDMA_PS_UDP): AcceptUD answers it
	psn uint32 // this side's Starting PSN, which the REP carries
	// Local and Remote are the addresses of the IP CM header: this device's and
	// the active side's, with its port.
	Local, Remote netip.AddrPort
	// Param is the REQ seen from here (Conn.PeerParam): the consumer's private data
	// after the IP CM header, the peer's initiator depth as ResponderResources and
	// its responder resources as InitiatorDepth, its retry counts.
	Param Param
	// RemoteQPN is the active side's QP.
	RemoteQPN uint32
}

// onREQ makes a Request of a REQ for a listened port, or rejects it; s.mu is held.
func (s *Service) onREQ(now time.Time, id *ibcm.Conn, req *cm.REQ) {
	_, port, _ := cm.ParseIPServiceID(req.ServiceID)
	h, herr := req.IPCM()
	l := s.listenerFor(req.ServiceID, h.DestinationIP)
	reason := cm.RejectReason(0)
	sgid, _, aerr := sgidFor(s.g.dev.GIDTable(), h.DestinationIP, h.DestinationIP)
	switch {
	case l == nil:
		reason = cm.RejInvalidServiceID
	case req.TransportServiceType != cm.TransportRC:
		reason = cm.RejInvalidTransportServiceType
	case herr != nil || aerr != nil:
		reason = cm.RejConsumerReject // cma_req_handler fails on bad IP CM data; ib_cm rejects
	}
	if reason != 0 {
		_ = s.mgr.Reject(id, reason, nil, nil)
		return
	}
	r := &Request{req: *req, Local: netip.AddrPortFrom(h.DestinationIP, port),
		Remote: netip.AddrPortFrom(h.SourceIP, h.SourcePort), RemoteQPN: req.LocalQPN,
		Param: Param{PrivateData: append([]byte(nil), req.PrivateData[cm.IPCMHeaderLen:]...),
			ResponderResources: req.InitiatorDepth, InitiatorDepth: req.ResponderResources,
			FlowControl: req.EndToEndFlowControl, RetryCount: req.RetryCount, RNRRetryCount: req.RNRRetryCount, SRQ: req.SRQ}}
	r.c = newConn(s, id, nil, r.Local, r.Remote)
	r.c.sgid = sgid
	r.c.peer = r.Param
	// The QP's attributes before the accept (QPAttrs, for an application-managed
	// QP): the REQ's offer, as ib_cm keeps it until the REP.
	r.psn = psn()
	offer := cm.REP{StartingPSN: r.psn, ResponderResources: req.InitiatorDepth, InitiatorDepth: req.ResponderResources}
	qpp := passiveParams(req, &offer, sgid)
	r.c.params = &qpp
	// As rdma_cm: an MRA, sent if the peer asks again before the consumer answers,
	// gives the consumer up to mraServiceTimeout more.
	_ = s.mgr.DelayMRA(id, mraServiceTimeout)
	s.deliver(l, r)
}

// mraServiceTimeout is the service timeout of the MRA a REQ gets when the consumer
// takes long to answer: 24, 4.096 µs × 2^24 ≈ 69 s (CMA_CM_MRA_SETTING in Linux's
// drivers/infiniband/core/cma.c).
const mraServiceTimeout = 24

// deliver hands a request to OnEvent, or to the listener's backlog (a full one
// rejects it); s.mu is held.
func (s *Service) deliver(l *Listener, r *Request) {
	if s.opts.OnEvent != nil {
		s.emit(Event{Type: EventConnectRequest, Conn: r.c, Listener: l, Request: r})
		return
	}
	select {
	case l.reqs <- r:
	default:
		r.c.closeLocked(time.Now(), fmt.Errorf("rdmacm: listener on port %d: backlog full", l.port))
	}
}

// Accept answers the REQ, as rdma_accept does: qp (an RC QP in RESET or INIT)
// goes through INIT, RTR and RTS with the REQ's path, QPN and PSN and a random
// starting PSN of its own, with p's responder resources and initiator depth as
// given (MaxResources: what the peer offers, at most the device's); then the REP
// goes out, again until the RTU comes. The
// connection is established when the RTU arrives (Conn.WaitEstablished); the QP
// takes the peer's traffic from now on. An error rejects the REQ.
func (r *Request) Accept(qp *transport.QueuePair, p Param) (*Conn, error) {
	return r.accept(qp, qp.QPN(), p)
}

// accept sends the REP for QP qpn, bringing qp up first unless it is nil (an
// application-managed QP, AcceptQPN).
func (r *Request) accept(qp *transport.QueuePair, qpn uint32, p Param) (*Conn, error) {
	if err := p.check(MaxREPPrivateData); err != nil {
		return nil, err
	}
	if r.ud {
		return nil, fmt.Errorf("rdmacm: Accept on a SIDR_REQ (RDMA_PS_UDP: use AcceptUD): %w", ErrParam)
	}
	s, c := r.c.s, r.c
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.ended {
		return nil, c.err
	}
	now := time.Now()
	rep := cm.REP{LocalQPN: qpn, StartingPSN: r.psn,
		ResponderResources: resources(p.ResponderResources, r.req.InitiatorDepth),
		InitiatorDepth:     resources(p.InitiatorDepth, r.req.ResponderResources),
		TargetACKDelay:     CAACKDelay, EndToEndFlowControl: p.FlowControl, RNRRetryCount: cut7(p.RNRRetryCount), SRQ: p.SRQ}
	copy(rep.PrivateData[:], p.PrivateData)
	qpp := passiveParams(&r.req, &rep, c.sgid)
	var err error
	switch {
	case qp == nil:
	case qp.Type() != transport.QPT_RC:
		err = fmt.Errorf("rdmacm: QP 0x%x is %v; RDMA_PS_TCP connects RC QPs: %w", qp.QPN(), qp.Type(), ErrParam)
	default:
		if err = qpp.bringUp(qp); err == nil {
			c.qp = qp
		}
	}
	if err == nil {
		c.params = &qpp
		err = s.mgr.Accept(now, c.id, rep)
	}
	if err != nil {
		c.closeLocked(now, err)
		s.settle(now)
		return nil, err
	}
	s.settle(now)
	s.kick()
	return c, nil
}

// Reject refuses the REQ with a REJ of reason Consumer Reject carrying
// privateData (rdma_reject), at most MaxREJPrivateData bytes.
func (r *Request) Reject(privateData []byte) error {
	if r.ud { // a SIDR_REP with status Rejected carries it (cma_send_sidr_rep)
		rep := cm.SIDRREP{Status: cm.SIDRRejected}
		if len(privateData) > len(rep.PrivateData) {
			return fmt.Errorf("rdmacm: %d bytes of private data, at most %d: %w", len(privateData), len(rep.PrivateData), ErrParam)
		}
		copy(rep.PrivateData[:], privateData)
		return r.answerSIDR(rep, fmt.Errorf("rdmacm: request from %v rejected by this side: %w", r.c.remote, ErrClosed))
	}
	if len(privateData) > MaxREJPrivateData {
		return fmt.Errorf("rdmacm: %d bytes of REJ private data, at most %d: %w", len(privateData), MaxREJPrivateData, ErrParam)
	}
	s, c := r.c.s, r.c
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.ended {
		return c.err
	}
	err := s.mgr.Reject(c.id, cm.RejConsumerReject, nil, privateData)
	s.forget(c)
	c.end(fmt.Errorf("rdmacm: request from %v rejected by this side: %w", c.remote, ErrClosed))
	s.settle(time.Now())
	return err
}
