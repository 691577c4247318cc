package transport

import (
	"slices"
	"time"
)

// The scheduler visits only queue pairs with something to do. A QP enters the ready
// list when work is posted to it, when a frame arrives for it, when one of its timers
// fires and when Modify lets it send; it leaves the list after a visit in which it
// sent nothing. Timers live in a min-heap keyed by deadline, so an engine pass and
// NextDeadline cost nothing per idle QP (rdma_rxe schedules its requester and
// responder tasks per QP in the same spirit: rxe_sched_task, rxe_task.c).

// schedule puts qp on the ready list unless it is already there.
func (d *Device) schedule(qp *QueuePair) {
	if qp.ready || qp.destroyed {
		return
	}
	qp.ready = true
	d.ready = append(d.ready, qp)
}

// runReady lets each ready QP's READ responder and requester send within the pass's
// transmit budget. A QP that sent something, or that stopped only because the budget
// ran out, stays ready; the others leave the list until an event schedules them.
// When the budget runs out, the QPs not visited go first in the next pass, ahead of
// those that sent in this one (round robin): a QP with no PSN window to stop it (UC,
// UD) and a full send queue would otherwise take every pass's budget, as the first
// on the list, until its queue drained.
func (d *Device) runReady() bool {
	cur := d.ready
	d.ready = d.readySpare[:0]
	did := false
	for i, qp := range cur {
		if d.txq.len() >= txBudget {
			visited := len(d.ready)
			d.ready = append(d.ready, cur[i:]...)
			rotate(d.ready, visited)
			break
		}
		qp.ready = false
		sent := qp.resp.readStep(qp, txBudget-d.txq.len())
		if qp.req.step(qp, txBudget-d.txq.len()) {
			sent = true
		}
		qp.releaseSQ() // UC and UD complete as they send
		if sent {
			did = true
		}
		if sent || d.txq.len() >= txBudget {
			d.schedule(qp)
		}
	}
	clear(cur)
	d.readySpare = cur[:0]
	return did
}

// rotate moves the first k elements of s to its end, keeping the order of both parts.
func rotate(s []*QueuePair, k int) {
	slices.Reverse(s[:k])
	slices.Reverse(s[k:])
	slices.Reverse(s)
}

// timerEntry is a QP's deadline in the timer heap. Entries are not removed when a
// timer is re-armed later or stopped: an entry whose time is no longer its QP's
// heapAt is stale and is dropped when it reaches the top.
type timerEntry struct {
	at time.Time
	qp *QueuePair
}

// timerHeap is a binary min-heap of timer entries by time.
type timerHeap []timerEntry

func (h *timerHeap) push(e timerEntry) {
	*h = append(*h, e)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s[i].at.Before(s[p].at) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *timerHeap) pop() timerEntry {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s[last] = timerEntry{}
	s = s[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(s) && s[l].at.Before(s[m].at) {
			m = l
		}
		if r < len(s) && s[r].at.Before(s[m].at) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}

// armed records that qp needs the engine at t. Re-arming a timer later, the common
// case (every ACK restarts the retransmit timer), costs nothing here: the earlier
// entry is found to be early when it comes due and is pushed again.
func (d *Device) armed(qp *QueuePair, t time.Time) {
	if t.IsZero() || (!qp.heapAt.IsZero() && !t.Before(qp.heapAt)) {
		return
	}
	qp.heapAt = t
	d.timers.push(timerEntry{at: t, qp: qp})
}

// nextTimer returns the earliest live timer, or the zero time. Entries at the top of
// the heap that are stale, or early because their timer was re-armed later or
// stopped, are settled first, so the answer is exact; the work is paid once per
// re-arm, not per call.
func (d *Device) nextTimer() time.Time {
	for len(d.timers) > 0 {
		top := d.timers[0]
		qp := top.qp
		if !qp.heapAt.Equal(top.at) || qp.destroyed {
			d.timers.pop()
			continue
		}
		dl := qp.deadline()
		if dl.Equal(top.at) {
			return top.at
		}
		if !dl.IsZero() && dl.Before(top.at) { // cannot happen: arming pushes earlier times
			return dl
		}
		d.timers.pop()
		qp.heapAt = time.Time{}
		d.armed(qp, dl)
	}
	return time.Time{}
}

// deadline returns the earliest of qp's timers (retransmit, end of an RNR wait,
// DCQCN's), or the zero time.
func (qp *QueuePair) deadline() time.Time {
	return earliest(earliest(qp.req.timer, qp.req.rnrUntil), qp.rp.deadline(&qp.dev.dcqcn))
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// runTimers handles every heap entry due at d.now: a QP whose retransmit timer
// expired retries or fails (QueuePair.timers), and a QP whose RNR wait ended becomes
// ready to send again.
func (d *Device) runTimers() bool {
	did := false
	for len(d.timers) > 0 && !d.timers[0].at.After(d.now) {
		e := d.timers.pop()
		qp := e.qp
		if !qp.heapAt.Equal(e.at) || qp.destroyed {
			continue // stale: a later entry, or none, stands for this QP
		}
		qp.heapAt = time.Time{}
		dl := qp.deadline()
		if dl.IsZero() {
			continue
		}
		if dl.After(d.now) {
			d.armed(qp, dl)
			continue
		}
		qp.ccTimers(d.now)
		if qp.timers(d.now) {
			did = true
		}
		d.schedule(qp)
		if next := qp.deadline(); next.After(d.now) {
			d.armed(qp, next)
		}
	}
	return did
}

// timerHorizon is how near a timer must be for Run to poll through to it rather
// than sleep: a ppoll timeout ends up to the thread's timer slack (50 µs by
// default, prctl(2) PR_SET_TIMERSLACK) late, plus a wake-up, which is a large part
// of a lossy QP's probe and RTO (hundreds of µs, transport/rtt.go). A QP on a clean
// link waits its local ACK timeout (milliseconds at least), so it still sleeps.
const timerHorizon = time.Millisecond

// timerNear reports whether a timer is due within timerHorizon.
func (d *Device) timerNear() bool {
	t := d.NextDeadline()
	return !t.IsZero() && time.Until(t) < timerHorizon
}
