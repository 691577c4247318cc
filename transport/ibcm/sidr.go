package ibcm

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/xroce/xroce/roce/cm"
)

// Service ID Resolution (IBTA Vol 1 §12.11): a UD client asks which QP and Q_Key
// serve a Service ID, with one SIDR_REQ answered by one SIDR_REP; rdma_cm's
// RDMA_PS_UDP "connections" are this exchange (Linux cm.c ib_send_cm_sidr_req,
// cm_sidr_req_handler, ib_send_cm_sidr_rep). A SIDR exchange is a Conn in state
// SIDR REQ Sent (ours, until the SIDR_REP or the last retry) or SIDR REQ Rcvd (the
// peer's, until SIDRReply); its Request ID is the active side's local
// Communication ID.

type sidrKey struct {
	peer netip.Addr
	id   uint32
}

// ResolveSIDR sends a SIDR_REQ for req (the Manager sets its Request ID) to peer,
// again every timeout up to retries times; EventSIDRREP brings the answer,
// EventTimeout the end of the retries.
func (m *Manager) ResolveSIDR(now time.Time, peer netip.Addr, req cm.SIDRREQ, timeout time.Duration, retries uint8) (*Conn, error) {
	if !peer.IsValid() {
		return nil, fmt.Errorf("ibcm: ResolveSIDR: no peer address")
	}
	c := m.newConn(false, peer)
	req.RequestID = c.localID
	c.sidr = req
	c.tid = m.tidFor(c)
	c.state = StateSIDRReqSent
	m.sendWithRetry(now, c, encode(c.tid, &c.sidr), timeout, retries)
	return c, nil
}

// onSIDRREQ takes a peer's SIDR_REQ: a new request for a listened Service ID
// (EventSIDRREQ), a duplicate of one not yet answered (dropped), or a SIDR_REP with
// status Service ID Not Supported.
func (m *Manager) onSIDRREQ(from netip.Addr, h cm.Header, req *cm.SIDRREQ) {
	key := sidrKey{from, req.RequestID}
	if m.sidrIn[key] != nil {
		m.stats.Duplicates++
		return
	}
	if !m.listening[req.ServiceID] {
		m.stats.Unlistened++
		rep := cm.SIDRREP{RequestID: req.RequestID, Status: cm.SIDRServiceIDNotSupported, ServiceID: req.ServiceID}
		m.send(from, encode(h.TransactionID, &rep))
		return
	}
	c := m.newConn(true, from)
	c.sidr = *req
	c.remoteID = req.RequestID
	c.tid = h.TransactionID
	c.state = StateSIDRReqRcvd
	m.sidrIn[key] = c
	r := c.sidr
	m.event(Event{Type: EventSIDRREQ, Conn: c, SIDRREQ: &r})
}

// SIDRReply answers a peer's SIDR_REQ (EventSIDRREQ) with rep (the Manager sets
// its Request ID and Service ID) and ends the exchange.
func (m *Manager) SIDRReply(c *Conn, rep cm.SIDRREP) error {
	if c.state != StateSIDRReqRcvd {
		return stateError("SIDRReply", c)
	}
	rep.RequestID, rep.ServiceID = c.remoteID, c.sidr.ServiceID
	m.send(c.peer, encode(c.tid, &rep))
	m.drop(c)
	return nil
}

// onSIDRREP takes the answer to one of our SIDR_REQs.
func (m *Manager) onSIDRREP(rep *cm.SIDRREP) {
	c := m.conns[rep.RequestID]
	if c == nil || c.state != StateSIDRReqSent {
		m.stats.Dropped++
		return
	}
	r := *rep
	m.drop(c)
	m.event(Event{Type: EventSIDRREP, Conn: c, SIDRREP: &r})
}

// SIDR returns the SIDR_REQ of a SIDR exchange, as sent or received.
func (c *Conn) SIDR() cm.SIDRREQ { return c.sidr }
