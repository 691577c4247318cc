package ibcm

import (
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/xroce/xroce/roce/cm"
)

// Receive takes a MAD that arrived on QP1 from the address from. MADs that do not
// decode as CM messages (another class or class version), that are not Sends, or
// that this state machine does not handle (LAP, APR, SIDR) are dropped and counted.
func (m *Manager) Receive(now time.Time, from netip.Addr, mad []byte) {
	h, msg, err := cm.Decode(mad)
	if err != nil || h.Method != cm.MethodSend {
		m.stats.Dropped++
		return
	}
	switch msg := msg.(type) {
	case *cm.REQ:
		m.onREQ(from, h, msg)
	case *cm.REP:
		m.onREP(msg)
	case *cm.RTU:
		m.onRTU(msg)
	case *cm.MRA:
		m.onMRA(now, msg)
	case *cm.REJ:
		m.onREJ(now, msg)
	case *cm.DREQ:
		m.onDREQ(now, from, h, msg)
	case *cm.DREP:
		m.onDREP(now, msg)
	case *cm.SIDRREQ:
		m.onSIDRREQ(from, h, msg)
	case *cm.SIDRREP:
		m.onSIDRREP(msg)
	default:
		m.stats.Dropped++
	}
}

// onREJ takes a REJ: before establishment it ends the connection (a Stale
// Connection REJ through TimeWait); after it, the connection goes to TimeWait
// (Linux cm_rej_handler).
func (m *Manager) onREJ(now time.Time, rej *cm.REJ) {
	c := m.conns[rej.RemoteCommID]
	if c == nil {
		c = m.withdrawn(rej)
	}
	if c == nil || (c.remoteID != 0 && rej.LocalCommID != 0 && rej.LocalCommID != c.remoteID) {
		m.stats.Dropped++
		return
	}
	r := *rej
	switch c.state {
	case StateREQSent, StateMRAREQRcvd, StateREQRcvd, StateMRAREQSent, StateREPSent, StateMRAREPRcvd:
		m.event(Event{Type: EventRejected, Conn: c, REJ: &r})
		if rej.Reason == cm.RejStaleConnection {
			m.enterTimeWait(now, c)
		} else {
			m.drop(c)
		}
	case StateREPRcvd, StateMRAREPSent, StateEstablished:
		m.event(Event{Type: EventRejected, Conn: c, REJ: &r})
		m.enterTimeWait(now, c)
	default:
		m.stats.Dropped++
	}
}

// withdrawn finds the connection of a REQ its sender gave up on: a REJ with reason
// Timeout names no Remote Communication ID (the sender never learnt ours) but
// carries its CA GUID as ARI, so the REQ's sender and comm ID find it (Linux cm.c
// cm_acquire_rejected_id).
func (m *Manager) withdrawn(rej *cm.REJ) *Conn {
	if rej.Reason != cm.RejTimeout || rej.RejectedInfoLength < 8 {
		return nil
	}
	return m.byRemote[remoteKey{rej.LocalCommID, binary.BigEndian.Uint64(rej.ARI[:8])}]
}
