package rdmacm

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport"
)

// DialOptions choose the local side of Dial.
type DialOptions struct {
	// Src is the local address (rdma_resolve_addr's src_addr); invalid picks the
	// device's first address of dst's IP version.
	Src netip.Addr
	// TrafficClass is the path's IPv4 TOS / IPv6 traffic class (rdma_set_option
	// RDMA_OPTION_ID_TOS).
	TrafficClass uint8
}

// Dial connects qp, an RC QP in RESET or INIT of this Service's device, to the
// listener at dst, as rdma_resolve_addr, rdma_resolve_route and rdma_connect do:
// it sends a REQ (Service ID of dst's port in RDMA_PS_TCP, the IP CM header and
// p.PrivateData, a random starting PSN, path MTU the device's, rdma_cm's timeouts
// and retry counts), and when the REP comes brings qp through INIT, RTR and RTS and
// sends the RTU. It returns the established connection; the peer's REJ
// (*RejectError, ErrRejected), no answer through every retry (ErrUnreachable, about
// a minute and a half with rdma_cm's timeouts), a bad parameter (ErrParam) or ctx's
// end (the REQ is then withdrawn with a REJ) return an error.
func (s *Service) Dial(ctx context.Context, qp *transport.QueuePair, dst netip.AddrPort, p Param, o DialOptions) (*Conn, error) {
	c, err := s.Connect(qp, dst, p, o)
	if err != nil {
		return nil, err
	}
	if err := c.WaitEstablished(ctx); err != nil {
		if ctx.Err() != nil {
			s.mu.Lock()
			now := time.Now()
			c.closeLocked(now, err)
			s.settle(now)
			s.mu.Unlock()
			return nil, fmt.Errorf("rdmacm: connecting to %v: %w", dst, err)
		}
		return nil, err
	}
	return c, nil
}

// Connect is Dial without waiting: it sends the REQ and returns the connection,
// which Conn.WaitEstablished or Options.OnEvent follow (rdma_connect).
func (s *Service) Connect(qp *transport.QueuePair, dst netip.AddrPort, p Param, o DialOptions) (*Conn, error) {
	if qp.Type() != transport.QPT_RC {
		return nil, fmt.Errorf("rdmacm: QP 0x%x is %v; RDMA_PS_TCP connects RC QPs: %w", qp.QPN(), qp.Type(), ErrParam)
	}
	if st := qp.State(); st != transport.QPS_RESET && st != transport.QPS_INIT {
		return nil, fmt.Errorf("rdmacm: QP 0x%x is in %v; connect a QP in RESET or INIT: %w", qp.QPN(), st, transport.ErrQPState)
	}
	return s.connect(qp, qp.QPN(), dst, p, o)
}

// connect sends the REQ for QP qpn, which is qp's unless qp is nil (an
// application-managed QP, ConnectQPN).
func (s *Service) connect(qp *transport.QueuePair, qpn uint32, dst netip.AddrPort, p Param, o DialOptions) (*Conn, error) {
	if err := p.check(MaxREQPrivateData); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sgid, local, err := s.localEnd(cm.PortSpaceTCP, o.Src, dst.Addr())
	if err != nil {
		return nil, err
	}
	req := s.buildREQ(qpn, local, dst, &p, o.TrafficClass)
	now := time.Now()
	id, err := s.mgr.Connect(now, dst.Addr(), req)
	if err != nil {
		delete(s.ports, cm.IPServiceID(cm.PortSpaceTCP, local.Port()))
		return nil, err
	}
	c := newConn(s, id, qp, local, dst)
	c.sgid = sgid
	s.settle(now)
	s.kick()
	return c, nil
}

// localEnd picks an active connection's local address (src, or the device's
// first of dst's IP version) with its GID index, and binds it a free port of ps;
// s.mu is held.
func (s *Service) localEnd(ps cm.PortSpace, src, dst netip.Addr) (int, netip.AddrPort, error) {
	if s.closed {
		return 0, netip.AddrPort{}, ErrClosed
	}
	sgid, laddr, err := sgidFor(s.g.dev.GIDTable(), src, dst)
	if err != nil {
		return 0, netip.AddrPort{}, err
	}
	sport, err := s.allocPort(ps)
	if err != nil {
		return 0, netip.AddrPort{}, err
	}
	return sgid, netip.AddrPortFrom(laddr, sport), nil
}

// buildREQ fills a REQ as Linux's cma_connect_ib and cm_format_req do on RoCEv2
// (values confirmed by testdata/rxe/ib_write_bw_rdmacm.pcap): LIDs permissive, the
// GIDs of the two addresses, rdma_cm's flow label from the ports, hop limit 64,
// CM Response Timeouts 20, Max CM Retries 15, P_Key 0xFFFF, the Local ACK Timeout of
// the packet lifetime and rdma_rxe's ACK delay.
func (s *Service) buildREQ(qpn uint32, local, dst netip.AddrPort, p *Param, tclass uint8) cm.REQ {
	req := cm.REQ{
		ServiceID:               cm.IPServiceID(cm.PortSpaceTCP, dst.Port()),
		LocalQPN:                qpn,
		ResponderResources:      resources(p.ResponderResources, transport.MaxQPRdAtom),
		InitiatorDepth:          resources(p.InitiatorDepth, transport.MaxQPRdAtom),
		RemoteCMResponseTimeout: s.opts.CMResponseTimeout,
		TransportServiceType:    cm.TransportRC,
		EndToEndFlowControl:     p.FlowControl,
		StartingPSN:             psn(),
		LocalCMResponseTimeout:  s.opts.CMResponseTimeout,
		RetryCount:              cut7(p.RetryCount),
		PKey:                    0xFFFF,
		PathMTU:                 s.dev.MaxPathMTU(),
		RNRRetryCount:           cut7(p.RNRRetryCount),
		MaxCMRetries:            s.opts.MaxCMRetries,
		SRQ:                     p.SRQ,
		Primary: cm.Path{
			LocalPortLID: 0xFFFF, RemotePortLID: 0xFFFF,
			LocalPortGID: roce.GIDFromAddr(local.Addr()), RemotePortGID: roce.GIDFromAddr(dst.Addr()),
			FlowLabel: cm.RoCEFlowLabel(local.Port(), dst.Port()), TrafficClass: tclass, HopLimit: HopLimit,
			LocalACKTimeout: LocalACKTimeout(CAACKDelay, s.opts.PacketLifeTime),
		},
	}
	h := cm.NewIPCMHeader(local, dst.Addr())
	h.Put(req.PrivateData[:])
	copy(req.PrivateData[cm.IPCMHeaderLen:], p.PrivateData)
	return req
}

// onREP brings the active side's QP up with the REP's values and sends the RTU, or
// rejects the REP when the QP cannot take them (librdmacm ucma_process_conn_resp);
// an application-managed QP's connection only reports the REP. s.mu is held.
func (c *Conn) onREP(now time.Time, rep *cm.REP) {
	req := c.id.REQ()
	qpp := activeParams(&req, rep, c.sgid)
	c.remoteQPN = rep.LocalQPN
	if c.qp == nil {
		c.respond(qpp, rep)
		return
	}
	if err := qpp.bringUp(c.qp); err != nil {
		_ = c.s.mgr.Reject(c.id, cm.RejConsumerReject, nil, nil)
		c.s.forget(c)
		err = fmt.Errorf("rdmacm: the REP of %v did not fit QP 0x%x: %w", c.remote, c.qp.QPN(), err)
		c.report(EventConnectError, err)
		c.end(err)
		return
	}
	c.peer = repParam(rep)
	if err := c.s.mgr.RTU(c.id, nil); err != nil {
		c.end(err)
		return
	}
	c.setEstablished()
}

// repParam is a REP seen from the active side (Conn.PeerParam).
func repParam(rep *cm.REP) Param {
	return Param{PrivateData: append([]byte(nil), rep.PrivateData[:]...),
		ResponderResources: rep.InitiatorDepth, InitiatorDepth: rep.ResponderResources,
		FlowControl: rep.EndToEndFlowControl, RNRRetryCount: rep.RNRRetryCount, SRQ: rep.SRQ}
}

// ResolveAddr returns the local address a connection to dst leaves from (src when
// valid, which must be this device's) after resolving the path to dst: its next
// hop's link address, which may wait for ARP or neighbour discovery
// (rdma_resolve_addr). An unreachable dst is an error wrapping ErrAddress, and
// the link's error (transport.ErrNoRoute where no route leads to dst).
func (s *Service) ResolveAddr(src, dst netip.Addr) (netip.Addr, error) {
	s.mu.Lock()
	sgid, laddr, err := sgidFor(s.g.dev.GIDTable(), src, dst)
	pd := s.g.pd
	s.mu.Unlock()
	if err != nil {
		return netip.Addr{}, err
	}
	// The address handle resolves the next hop now; the CM's own, made when the
	// REQ goes out, finds it in the neighbour table.
	if _, err := pd.CreateAH(transport.AddressHandle{DGID: roce.GIDFromAddr(dst), SGIDIndex: sgid, HopLimit: HopLimit}); err != nil {
		return netip.Addr{}, fmt.Errorf("rdmacm: %v cannot reach %v: %w (%w)", laddr, dst, err, ErrAddress)
	}
	return laddr, nil
}

// Unreachable ends every connection this side is still trying to make to dst
// (REQ or SIDR_REQ sent, no answer yet) with EventUnreachable and err, which should
// wrap ErrUnreachable and say why (the daemon passes the ICMP errors the kernel
// received for our REQs: cmd/xroce/icmp); rdma_cm on rdma_rxe would wait through
// every retry instead. It returns how many it ended.
func (s *Service) Unreachable(dst netip.Addr, err error) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	now, n := time.Now(), 0
	for _, c := range s.conns {
		if c.ended || c.isEstab || c.id.Passive() || c.remote.Addr().Unmap() != dst.Unmap() {
			continue
		}
		c.report(EventUnreachable, err)
		c.closeLocked(now, err)
		n++
	}
	if n > 0 {
		s.settle(now)
		s.kick()
	}
	return n
}
