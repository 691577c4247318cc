package rdmacm

import (
	"fmt"
	"net/netip"

	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport"
)

// Application-managed QPs (librdmacm's rdma_init_qp_attr and rdma_establish; rping
// -q): the connection names a QP by its number only and never modifies it. The
// application asks for each state's attributes (Conn.QPAttrs) and moves its QP
// itself; the active side then sends the RTU with Conn.Establish.

// attrs returns p's attributes for moving a QP to state, with the mask Linux's
// ib_cm_init_qp_attr sets (drivers/infiniband/core/cm.c cm_init_qp_init_attr,
// cm_init_qp_rtr_attr, cm_init_qp_rts_attr): INIT the access flags (P_Key index 0,
// port 1); RTR the path, MTU, the peer's QPN, this side's Starting PSN as the
// receive PSN (rdma_init_qp_attr in cma.c), the responder resources and the RNR
// timer 0; RTS the send PSN, the timers and the initiator depth.
func (p *qpParams) attrs(state transport.QPState) (transport.QPAttr, transport.QPAttrMask) {
	a := transport.QPAttr{State: state}
	switch state {
	case transport.QPS_INIT:
		a.AccessFlags = p.access()
		return a, transport.QP_STATE | transport.QP_ACCESS_FLAGS | transport.QP_PKEY_INDEX | transport.QP_PORT
	case transport.QPS_RTR:
		a.AH, a.PathMTU, a.DestQPN, a.RQPSN, a.MaxDestRdAtomic = p.ah, p.mtu, p.destQPN, p.rqPSN, p.respRes
		return a, transport.QP_STATE | transport.QP_AV | transport.QP_PATH_MTU | transport.QP_DEST_QPN | transport.QP_RQ_PSN |
			transport.QP_MAX_DEST_RD_ATOMIC | transport.QP_MIN_RNR_TIMER
	}
	a.SQPSN, a.Timeout, a.RetryCnt, a.RNRRetry, a.MaxRdAtomic = p.sqPSN, p.timeout, p.retry, p.rnrRetry, p.initDepth
	return a, transport.QP_STATE | transport.QP_TIMEOUT | transport.QP_RETRY_CNT | transport.QP_RNR_RETRY | transport.QP_SQ_PSN |
		transport.QP_MAX_QP_RD_ATOMIC
}

// QPAttrs returns the attributes and mask for moving the connection's QP to state
// (INIT, RTR or RTS; rdma_init_qp_attr): on the passive side from the connection
// request on, with the REQ's path and PSN, this side's own PSN (which the REP will
// carry) and the resources the REQ offered; on the active side INIT's from the REQ
// on, RTR's and RTS's once the REP came (EventConnectResponse). ErrParam for
// another state, ErrQPState for RTR or RTS before the REP.
func (c *Conn) QPAttrs(state transport.QPState) (transport.QPAttr, transport.QPAttrMask, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	switch {
	case state != transport.QPS_INIT && state != transport.QPS_RTR && state != transport.QPS_RTS:
		return transport.QPAttr{}, 0, fmt.Errorf("rdmacm: QP attributes are given for INIT, RTR and RTS, not %v: %w", state, ErrParam)
	case c.params == nil && state == transport.QPS_INIT: // ib_cm answers INIT in REQ_SENT too
		p := qpParams{respRes: c.id.REQ().ResponderResources}
		a, m := p.attrs(state)
		return a, m, nil
	case c.params == nil:
		return transport.QPAttr{}, 0, fmt.Errorf("rdmacm: no QP attributes before the peer's REP (RDMA_CM_EVENT_CONNECT_RESPONSE): %w", transport.ErrQPState)
	}
	a, m := c.params.attrs(state)
	return a, m, nil
}

// QPAttrs is Conn.QPAttrs for the request's connection, before the accept.
func (r *Request) QPAttrs(state transport.QPState) (transport.QPAttr, transport.QPAttrMask, error) {
	return r.c.QPAttrs(state)
}

// ConnectQPN is Connect for an application-managed QP: the REQ names QP qpn, which
// the connection never modifies. When the REP comes, EventConnectResponse
// follows (not EventEstablished, and no RTU): the application moves its QP with
// QPAttrs, then calls Establish.
func (s *Service) ConnectQPN(qpn uint32, dst netip.AddrPort, p Param, o DialOptions) (*Conn, error) {
	if qpn == 0 || qpn > 0xFFFFFF {
		return nil, fmt.Errorf("rdmacm: QP number 0x%x: an RC QP's is 1..0xffffff: %w", qpn, ErrParam)
	}
	return s.connect(nil, qpn, dst, p, o)
}

// Establish sends the RTU of an application-managed QP's connection once the REP
// came (rdma_establish), and the connection is established (no event: the
// application knows). ErrQPState before the REP, or when the connection has a QP
// of the Service's own.
func (c *Conn) Establish() error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	switch {
	case c.ended:
		return c.err
	case c.qp != nil || c.id.Passive() || !c.responded || c.isEstab:
		return fmt.Errorf("rdmacm: Establish is for the active side of an application-managed QP, once, after the REP: %w", transport.ErrQPState)
	}
	if err := c.s.mgr.RTU(c.id, nil); err != nil {
		c.end(err)
		return err
	}
	c.markEstablished()
	c.s.kick()
	return nil
}

// respond takes the REP of an application-managed QP's connection: its attributes
// are kept for QPAttrs and EventConnectResponse tells the application; s.mu is
// held.
func (c *Conn) respond(qpp qpParams, rep *cm.REP) {
	c.params = &qpp
	c.responded = true
	c.peer = repParam(rep)
	c.s.emit(Event{Type: EventConnectResponse, Conn: c})
}

// AcceptQPN is Accept for an application-managed QP: the REP names QP qpn and the
// PSN QPAttrs gave for RTR; the QP is never modified here (the application moved
// it to RTS first, as rping -q does). The connection is established at the RTU.
func (r *Request) AcceptQPN(qpn uint32, p Param) (*Conn, error) {
	if qpn == 0 || qpn > 0xFFFFFF {
		return nil, fmt.Errorf("rdmacm: QP number 0x%x: an RC QP's is 1..0xffffff: %w", qpn, ErrParam)
	}
	return r.accept(nil, qpn, p)
}
