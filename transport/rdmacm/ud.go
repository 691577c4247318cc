package rdmacm

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport/ibcm"
)

// RDMA_PS_UDP: a UD QP's "connection" is a Service ID Resolution (IBTA Vol 1
// §12.11): the client's SIDR_REQ carries the IP CM header and its private data,
// the server's SIDR_REP the QPN and Q_Key of its UD QP (Linux cma.c
// cma_resolve_ib_udp, cma_sidr_rep_handler, cma_send_sidr_rep).

// UDPQKey is the Q_Key rdma_cm gives the UD QPs of RDMA_PS_UDP (RDMA_UDP_QKEY,
// <rdma/rdma_cma.h>).
const UDPQKey = 0x01234567

// MaxSIDRPrivateData is the consumer's part of a SIDR_REQ's private data.
const MaxSIDRPrivateData = cm.SIDRREQPrivateDataLen - cm.IPCMHeaderLen

// sidrTimeout is how long rdma_cm waits for a SIDR_REP before it sends the
// SIDR_REQ again (cma.c: 1 << (CMA_CM_RESPONSE_TIMEOUT - 8) ms).
const sidrTimeout = (1 << (CMResponseTimeout - 8)) * time.Millisecond

// UDInfo is a UD peer as its SIDR_REP names it: its QP and Q_Key.
type UDInfo struct {
	QPN  uint32
	QKey uint32
}

// ConnectUD asks the listener at dst (RDMA_PS_UDP) for its UD QP, as rdma_connect
// on a UDP id does: a SIDR_REQ with the IP CM header and privateData, sent again
// every 4.1 s up to 15 times. The answer comes as EventEstablished (Conn.UD, the
// SIDR_REP's private data in PeerParam), a SIDR_REP refusing as EventUnreachable
// (its status in the error), silence as EventUnreachable after the retries;
// Conn.WaitEstablished returns the same outcome.
func (s *Service) ConnectUD(dst netip.AddrPort, privateData []byte, o DialOptions) (*Conn, error) {
	if len(privateData) > MaxSIDRPrivateData {
		return nil, fmt.Errorf("rdmacm: %d bytes of private data, at most %d: %w", len(privateData), MaxSIDRPrivateData, ErrParam)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sgid, local, err := s.localEnd(cm.PortSpaceUDP, o.Src, dst.Addr())
	if err != nil {
		return nil, err
	}
	req := cm.SIDRREQ{PKey: 0xFFFF, ServiceID: cm.IPServiceID(cm.PortSpaceUDP, dst.Port())}
	h := cm.NewIPCMHeader(local, dst.Addr())
	h.Put(req.PrivateData[:])
	copy(req.PrivateData[cm.IPCMHeaderLen:], privateData)
	now := time.Now()
	id, err := s.mgr.ResolveSIDR(now, dst.Addr(), req, sidrTimeout, s.opts.MaxCMRetries)
	if err != nil {
		delete(s.ports, cm.IPServiceID(cm.PortSpaceUDP, local.Port()))
		return nil, err
	}
	c := newConn(s, id, nil, local, dst)
	c.sgid, c.ps = sgid, cm.PortSpaceUDP
	s.settle(now)
	s.kick()
	return c, nil
}

// SIDRError is a SIDR_REP that refused (RDMA_CM_EVENT_UNREACHABLE with the
// status, as cma_sidr_rep_handler reports it).
type SIDRError struct {
	Peer   netip.AddrPort
	Status cm.SIDRStatus
}

func (e *SIDRError) Error() string {
	hint := ""
	if e.Status == cm.SIDRServiceIDNotSupported {
		hint = fmt.Sprintf(" (nothing listens on UDP port space port %d there: start the server first)", e.Peer.Port())
	}
	return fmt.Sprintf("rdmacm: %v answered the SIDR_REQ with status %d (%v)%s", e.Peer, uint8(e.Status), e.Status, hint)
}

// Unwrap makes errors.Is(err, ErrUnreachable) hold.
func (e *SIDRError) Unwrap() error { return ErrUnreachable }

// UD returns what the SIDR_REP said of the peer's UD QP, once established.
func (c *Conn) UD() UDInfo { return c.ud }

// onSIDRREP ends the client's resolution; s.mu is held.
func (c *Conn) onSIDRREP(rep *cm.SIDRREP) {
	if rep.Status != cm.SIDRValid {
		err := &SIDRError{Peer: c.remote, Status: rep.Status}
		c.report(EventUnreachable, err)
		c.end(err)
		return
	}
	c.ud = UDInfo{QPN: rep.QPN, QKey: rep.QKey}
	c.peer = Param{PrivateData: append([]byte(nil), rep.PrivateData[:]...)}
	c.setEstablished()
}

// onSIDRREQ makes a Request of a SIDR_REQ for a listened port; s.mu is held.
func (s *Service) onSIDRREQ(id *ibcm.Conn, req *cm.SIDRREQ) {
	_, port, _ := cm.ParseIPServiceID(req.ServiceID)
	h, err := cm.DecodeIPCMHeader(req.PrivateData[:])
	l := s.listenerFor(req.ServiceID, h.DestinationIP)
	if l == nil || err != nil {
		_ = s.mgr.SIDRReply(id, cm.SIDRREP{Status: cm.SIDRRejected})
		return
	}
	r := &Request{ud: true, Local: netip.AddrPortFrom(h.DestinationIP, port), Remote: netip.AddrPortFrom(h.SourceIP, h.SourcePort),
		Param: Param{PrivateData: append([]byte(nil), req.PrivateData[cm.IPCMHeaderLen:]...)}}
	r.c = newConn(s, id, nil, r.Local, r.Remote)
	r.c.ps, r.c.peer = cm.PortSpaceUDP, r.Param
	if sgid, _, err := sgidFor(s.g.dev.GIDTable(), h.DestinationIP, h.DestinationIP); err == nil {
		r.c.sgid = sgid
	}
	s.deliver(l, r)
}

// AcceptUD answers a SIDR_REQ (Request.UD) with the server's UD QP and Q_Key
// (UDPQKey for rdma_cm's QPs) and privateData, at most cm.SIDRREPPrivateDataLen
// bytes, as rdma_accept on a UDP id does; the exchange is then over.
func (r *Request) AcceptUD(qpn, qkey uint32, privateData []byte) error {
	if !r.ud {
		return fmt.Errorf("rdmacm: AcceptUD on a connection request (use Accept): %w", ErrParam)
	}
	if len(privateData) > cm.SIDRREPPrivateDataLen {
		return fmt.Errorf("rdmacm: %d bytes of private data, at most %d: %w", len(privateData), cm.SIDRREPPrivateDataLen, ErrParam)
	}
	rep := cm.SIDRREP{Status: cm.SIDRValid, QPN: qpn, QKey: qkey}
	copy(rep.PrivateData[:], privateData)
	return r.answerSIDR(rep, nil)
}

// answerSIDR sends the SIDR_REP and ends the request's exchange.
func (r *Request) answerSIDR(rep cm.SIDRREP, end error) error {
	s, c := r.c.s, r.c
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.ended {
		return c.err
	}
	err := s.mgr.SIDRReply(c.id, rep)
	s.forget(c)
	c.end(end)
	s.settle(time.Now())
	return err
}

// UD says whether the request is a SIDR_REQ of RDMA_PS_UDP (answer with AcceptUD).
func (r *Request) UD() bool { return r.ud }
