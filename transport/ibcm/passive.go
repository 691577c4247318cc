package ibcm

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/xroce/xroce/roce/cm"
)

// onREQ takes a REQ: a new connection for a listened Service ID, a duplicate of
// one already taken, or a REJ.
func (m *Manager) onREQ(from netip.Addr, h cm.Header, req *cm.REQ) {
	if c := m.byRemote[remoteKey{req.LocalCommID, req.LocalCAGUID}]; c != nil {
		m.stats.Duplicates++
		switch c.state {
		case StateMRAREQSent:
			m.send(c.peer, c.lastMRA)
		case StateREPSent, StateMRAREPRcvd: // our REP was lost: the same REP again
			m.send(c.peer, c.pending)
		case StateTimeWait:
			m.reject(c.peer, h.TransactionID, c.localID, req.LocalCommID, cm.RefREQ, cm.RejStaleConnection, nil, nil)
		}
		return
	}
	if !m.listening[req.ServiceID] {
		m.stats.Unlistened++
		m.reject(from, h.TransactionID, 0, req.LocalCommID, cm.RefREQ, cm.RejInvalidServiceID, nil, nil)
		return
	}
	c := m.newConn(true, from)
	c.req = *req
	c.remoteID, c.remoteGUID = req.LocalCommID, req.LocalCAGUID
	c.tid = h.TransactionID
	c.state = StateREQRcvd
	m.byRemote[remoteKey{c.remoteID, c.remoteGUID}] = c
	r := c.req
	m.event(Event{Type: EventREQ, Conn: c, REQ: &r})
}

// Accept answers a REQ (EventREQ) with rep (the Manager sets the Communication IDs
// and the Local CA GUID) and sends it again every 2 × packet lifetime + the
// REQ's Local CM Response Timeout until the RTU comes, up to the REQ's Max CM
// Retries times.
func (m *Manager) Accept(now time.Time, c *Conn, rep cm.REP) error {
	if c.state != StateREQRcvd && c.state != StateMRAREQSent {
		return stateError("Accept", c)
	}
	rep.LocalCommID, rep.RemoteCommID = c.localID, c.remoteID
	rep.LocalCAGUID = m.cfg.LocalCAGUID
	c.rep = rep
	c.state = StateREPSent
	m.sendWithRetry(now, c, encode(c.tid, &c.rep), m.responseTimeout(c.req.LocalCMResponseTimeout), c.req.MaxCMRetries)
	return nil
}

// Reject refuses a REQ (passive side, after EventREQ) or a REP (active side, after
// EventREP) with a REJ and ends the connection. ari is the Additional Rejection
// Information (at most cm.ARILen bytes).
func (m *Manager) Reject(c *Conn, reason cm.RejectReason, ari, privateData []byte) error {
	var which cm.MessageRef
	switch c.state {
	case StateREQRcvd, StateMRAREQSent:
		which = cm.RefREQ
	case StateREPRcvd, StateMRAREPSent:
		which = cm.RefREP
	default:
		return stateError("Reject", c)
	}
	if len(ari) > cm.ARILen || len(privateData) > cm.REJPrivateDataLen {
		return fmt.Errorf("ibcm: Reject: ARI %d bytes (at most %d), private data %d (at most %d)", len(ari), cm.ARILen, len(privateData), cm.REJPrivateDataLen)
	}
	m.reject(c.peer, c.tid, c.localID, c.remoteID, which, reason, ari, privateData)
	m.drop(c)
	return nil
}

// reject sends a REJ.
func (m *Manager) reject(to netip.Addr, tid uint64, local, remote uint32, which cm.MessageRef, reason cm.RejectReason, ari, privateData []byte) {
	rej := cm.REJ{LocalCommID: local, RemoteCommID: remote, MessageRejected: which,
		RejectedInfoLength: uint8(len(ari)), Reason: reason}
	copy(rej.ARI[:], ari)
	copy(rej.PrivateData[:], privateData)
	m.send(to, encode(tid, &rej))
}

// SendMRA tells the peer this side needs up to serviceTimeout (5-bit, 4.096 µs ×
// 2^value) more to answer its REQ (passive) or REP (active); a duplicate of that
// message gets the MRA again.
func (m *Manager) SendMRA(c *Conn, serviceTimeout uint8) error {
	return m.mra(c, serviceTimeout, true)
}

// DelayMRA is SendMRA with Linux's IB_CM_MRA_FLAG_DELAY (drivers/infiniband/core/
// cm.c, ib_send_cm_mra): the MRA is prepared but sent only when the peer sends its
// REQ or REP again, i.e. when the answer is late enough for the peer to retry.
// rdma_cm does this for every REQ it hands to its consumer (cma.c,
// cma_ib_req_handler, CMA_CM_MRA_SETTING: delayed, service timeout 24).
func (m *Manager) DelayMRA(c *Conn, serviceTimeout uint8) error {
	return m.mra(c, serviceTimeout, false)
}

// mra moves c to MRA sent and keeps the MRA for duplicates; send sends it now.
func (m *Manager) mra(c *Conn, serviceTimeout uint8, send bool) error {
	mra := cm.MRA{LocalCommID: c.localID, RemoteCommID: c.remoteID, ServiceTimeout: serviceTimeout}
	switch c.state {
	case StateREQRcvd:
		mra.MessageMRAed, c.state = cm.RefREQ, StateMRAREQSent
	case StateREPRcvd:
		mra.MessageMRAed, c.state = cm.RefREP, StateMRAREPSent
	default:
		return stateError("SendMRA", c)
	}
	c.lastMRA = encode(c.tid, &mra)
	if send {
		m.send(c.peer, c.lastMRA)
	}
	return nil
}

// onRTU takes the RTU to one of our REPs.
func (m *Manager) onRTU(rtu *cm.RTU) {
	c := m.conns[rtu.RemoteCommID]
	if c == nil || !c.passive || rtu.LocalCommID != c.remoteID {
		m.stats.Dropped++
		return
	}
	switch c.state {
	case StateREPSent, StateMRAREPRcvd:
		m.establish(c)
	default:
		m.stats.Duplicates++
	}
}

// NotifyEstablished tells the Manager that the passive side's QP received traffic
// before the RTU (the verbs event "communication established"): the connection is
// established, as if the RTU had come.
func (m *Manager) NotifyEstablished(c *Conn) error {
	switch c.state {
	case StateREPSent, StateMRAREPRcvd:
		m.establish(c)
	case StateEstablished:
	default:
		return stateError("NotifyEstablished", c)
	}
	return nil
}

func (m *Manager) establish(c *Conn) {
	c.stopRetry()
	c.state = StateEstablished
	m.event(Event{Type: EventEstablished, Conn: c})
}
