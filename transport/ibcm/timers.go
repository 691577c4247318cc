package ibcm

import (
	"cmp"
	"encoding/binary"
	"slices"
	"time"

	"github.com/xroce/xroce/roce/cm"
)

// NextDeadline returns when Advance next has work: a retransmission, a give-up or
// the end of a TimeWait; ok is false when no timer runs.
func (m *Manager) NextDeadline() (t time.Time, ok bool) {
	for _, c := range m.conns {
		if !c.deadline.IsZero() && (!ok || c.deadline.Before(t)) {
			t, ok = c.deadline, true
		}
	}
	return t, ok
}

// Advance runs the timers that expired by now, earliest first: it sends again the
// REQ, REP or DREQ a peer has not answered; gives up after Max CM Retries (a REQ or
// REP: REJ with reason Timeout and EventTimeout; a DREQ: TimeWait); and ends
// TimeWaits (EventTimeWaitExit).
func (m *Manager) Advance(now time.Time) {
	var due []*Conn
	for _, c := range m.conns {
		if !c.deadline.IsZero() && !c.deadline.After(now) {
			due = append(due, c)
		}
	}
	slices.SortFunc(due, func(a, b *Conn) int {
		if d := a.deadline.Compare(b.deadline); d != 0 {
			return d
		}
		return cmp.Compare(a.localID, b.localID)
	})
	for _, c := range due {
		m.expire(now, c)
	}
}

func (m *Manager) expire(now time.Time, c *Conn) {
	switch {
	case c.state == StateTimeWait:
		m.drop(c)
		m.event(Event{Type: EventTimeWaitExit, Conn: c})
	case c.pending == nil:
		c.deadline = time.Time{}
	case c.retries > 0:
		c.retries--
		m.stats.Retransmits++
		c.deadline = now.Add(c.timeout)
		m.send(c.peer, c.pending)
	default:
		m.giveUp(now, c)
	}
}

// giveUp ends a connection whose REQ, REP or DREQ went unanswered. The REJ
// carries the spec's Timeout reason with this side's CA GUID as its ARI.
func (m *Manager) giveUp(now time.Time, c *Conn) {
	var which cm.MessageRef
	switch c.state {
	case StateREQSent, StateMRAREQRcvd:
		which = cm.RefREQ
	case StateREPSent, StateMRAREPRcvd:
		which = cm.RefREP
	case StateSIDRReqSent: // no REJ in SIDR: the requester just stops
		m.event(Event{Type: EventTimeout, Conn: c})
		m.drop(c)
		return
	default: // StateDREQSent
		m.enterTimeWait(now, c)
		return
	}
	ari := binary.BigEndian.AppendUint64(nil, m.cfg.LocalCAGUID)
	m.reject(c.peer, c.tid, c.localID, c.remoteID, which, cm.RejTimeout, ari, nil)
	m.event(Event{Type: EventTimeout, Conn: c})
	m.drop(c)
}
