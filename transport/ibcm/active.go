package ibcm

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/xroce/xroce/roce/cm"
)

// Connect starts a connection to peer with req (the Manager sets its Local
// Communication ID and Local CA GUID) and sends the REQ, again every
// 2 × packet lifetime + Remote CM Response Timeout until answered, up to Max CM
// Retries times.
func (m *Manager) Connect(now time.Time, peer netip.Addr, req cm.REQ) (*Conn, error) {
	if !peer.IsValid() {
		return nil, fmt.Errorf("ibcm: Connect: no peer address")
	}
	c := m.newConn(false, peer)
	req.LocalCommID = c.localID
	req.LocalCAGUID = m.cfg.LocalCAGUID
	c.req = req
	c.tid = m.tidFor(c)
	c.state = StateREQSent
	m.sendWithRetry(now, c, encode(c.tid, &c.req), m.responseTimeout(req.RemoteCMResponseTimeout), req.MaxCMRetries)
	return c, nil
}

// onREP takes the REP to one of our REQs.
func (m *Manager) onREP(rep *cm.REP) {
	c := m.conns[rep.RemoteCommID]
	if c == nil || c.passive {
		m.stats.Dropped++
		return
	}
	switch c.state {
	case StateREQSent, StateMRAREQRcvd:
		c.stopRetry()
		c.rep = *rep
		c.remoteID, c.remoteGUID = rep.LocalCommID, rep.LocalCAGUID
		c.state = StateREPRcvd
		r := c.rep
		m.event(Event{Type: EventREP, Conn: c, REP: &r})
	case StateEstablished: // our RTU was lost: the same RTU again
		m.stats.Duplicates++
		if c.lastRTU != nil && rep.LocalCommID == c.remoteID {
			m.send(c.peer, c.lastRTU)
		}
	case StateMRAREPSent:
		m.stats.Duplicates++
		m.send(c.peer, c.lastMRA)
	default:
		m.stats.Duplicates++
	}
}

// RTU completes the active side's establishment after EventREP, once the QP is in
// RTS: it sends the RTU (no retransmission: a duplicate REP gets it again).
func (m *Manager) RTU(c *Conn, privateData []byte) error {
	if c.passive || (c.state != StateREPRcvd && c.state != StateMRAREPSent) {
		return stateError("RTU", c)
	}
	rtu := cm.RTU{LocalCommID: c.localID, RemoteCommID: c.remoteID}
	if len(privateData) > len(rtu.PrivateData) {
		return fmt.Errorf("ibcm: RTU: %d bytes of private data, at most %d", len(privateData), len(rtu.PrivateData))
	}
	copy(rtu.PrivateData[:], privateData)
	c.lastRTU = encode(c.tid, &rtu)
	m.send(c.peer, c.lastRTU)
	c.state = StateEstablished
	return nil
}

// onMRA takes an MRA: the peer needs up to Service Timeout more to answer our REQ
// or REP, so the next retransmission waits that long (Linux cm_mra_handler).
func (m *Manager) onMRA(now time.Time, mra *cm.MRA) {
	c := m.conns[mra.RemoteCommID]
	if c == nil {
		m.stats.Dropped++
		return
	}
	switch {
	case mra.MessageMRAed == cm.RefREQ && c.state == StateREQSent:
		c.state = StateMRAREQRcvd
	case mra.MessageMRAed == cm.RefREP && c.state == StateREPSent:
		c.state = StateMRAREPRcvd
	default:
		m.stats.Duplicates++
		return
	}
	c.deadline = now.Add(cm.Timeout(mra.ServiceTimeout) + 2*cm.Timeout(m.cfg.PacketLifeTime))
}
