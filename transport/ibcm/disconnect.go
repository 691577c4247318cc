package ibcm

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/xroce/xroce/roce/cm"
)

// Disconnect sends a DREQ for an established connection, in a transaction of its
// own, again every 2 × packet lifetime + the peer's CM Response Timeout until the
// DREP comes, up to Max CM Retries times; then TimeWait.
func (m *Manager) Disconnect(now time.Time, c *Conn, privateData []byte) error {
	if c.state != StateEstablished {
		return stateError("Disconnect", c)
	}
	dreq := cm.DREQ{LocalCommID: c.localID, RemoteCommID: c.remoteID, RemoteQPNEECN: c.remoteQPN()}
	if len(privateData) > len(dreq.PrivateData) {
		return fmt.Errorf("ibcm: Disconnect: %d bytes of private data, at most %d", len(privateData), len(dreq.PrivateData))
	}
	copy(dreq.PrivateData[:], privateData)
	c.state = StateDREQSent
	m.sendWithRetry(now, c, encode(m.tidFor(c), &dreq), m.responseTimeout(c.peerResponseTimeout()), c.req.MaxCMRetries)
	return nil
}

// DREP answers the peer's DREQ (EventDREQ) and enters TimeWait.
func (m *Manager) DREP(now time.Time, c *Conn, privateData []byte) error {
	if c.state != StateDREQRcvd {
		return stateError("DREP", c)
	}
	if len(privateData) > cm.DREPPrivateDataLen {
		return fmt.Errorf("ibcm: DREP: %d bytes of private data, at most %d", len(privateData), cm.DREPPrivateDataLen)
	}
	c.lastDREP = m.drep(c.peer, c.dreqTID, c.localID, c.remoteID, privateData)
	m.enterTimeWait(now, c)
	return nil
}

// drep sends a DREP and returns its MAD.
func (m *Manager) drep(to netip.Addr, tid uint64, local, remote uint32, privateData []byte) []byte {
	d := cm.DREP{LocalCommID: local, RemoteCommID: remote}
	copy(d.PrivateData[:], privateData)
	mad := encode(tid, &d)
	m.send(to, mad)
	return mad
}

// onDREQ takes a DREQ. One for a connection this side does not know gets a DREP
// anyway (Linux cm_issue_drep); one naming another QP is dropped.
func (m *Manager) onDREQ(now time.Time, from netip.Addr, h cm.Header, dreq *cm.DREQ) {
	c := m.conns[dreq.RemoteCommID]
	if c == nil {
		m.stats.Dropped++
		m.drep(from, h.TransactionID, dreq.RemoteCommID, dreq.LocalCommID, nil)
		return
	}
	if dreq.LocalCommID != c.remoteID || dreq.RemoteQPNEECN != c.localQPN() {
		m.stats.Dropped++
		return
	}
	switch c.state {
	case StateEstablished, StateREPSent, StateMRAREPRcvd:
		c.stopRetry()
		c.state = StateDREQRcvd
		c.dreqTID = h.TransactionID
		d := *dreq
		m.event(Event{Type: EventDREQ, Conn: c, DREQ: &d})
	case StateDREQSent: // the DREQs crossed: answer, and the peer's DREP is not needed
		c.lastDREP = m.drep(c.peer, h.TransactionID, c.localID, c.remoteID, nil)
		m.enterTimeWait(now, c)
	case StateTimeWait: // our DREP was lost, or the DREQs crossed
		m.stats.Duplicates++
		if c.lastDREP != nil && h.TransactionID == c.dreqTID {
			m.send(c.peer, c.lastDREP)
		} else {
			m.drep(c.peer, h.TransactionID, c.localID, c.remoteID, nil)
		}
	default:
		m.stats.Duplicates++
	}
}

// onDREP takes the DREP to our DREQ.
func (m *Manager) onDREP(now time.Time, drep *cm.DREP) {
	c := m.conns[drep.RemoteCommID]
	if c == nil || drep.LocalCommID != c.remoteID {
		m.stats.Dropped++
		return
	}
	if c.state != StateDREQSent {
		m.stats.Duplicates++
		return
	}
	m.enterTimeWait(now, c)
}

// enterTimeWait holds c's IDs for the path's Local ACK Timeout (Linux
// cm_enter_timewait), so that late packets of the old connection find no new one.
func (m *Manager) enterTimeWait(now time.Time, c *Conn) {
	c.stopRetry()
	c.state = StateTimeWait
	wait := cm.Timeout(c.req.Primary.LocalACKTimeout)
	if c.req.Primary.LocalACKTimeout == 0 { // "infinite": use two packet lifetimes
		wait = 2 * cm.Timeout(m.cfg.PacketLifeTime)
	}
	c.deadline = now.Add(wait)
	m.event(Event{Type: EventTimeWait, Conn: c})
}
