package transport

import (
	"time"

	"github.com/xroce/xroce/roce"
)

// The RC requester's retransmission timers (docs/congestion.md).
//
// Two deadlines run while PSNs are in flight (requester.awaiting), and the timer
// heap holds the earlier (requester.timer):
//
//   - the adaptive retransmission timeout (rtoAt): the RTO of RFC 6298, from the
//     smoothed round-trip time SRTT and its variation RTTVAR, at least MinRTO and at
//     most the local ACK timeout, doubled on each expiry (backoff) until a new
//     sample or an answer that moves the requester on (an ACK of new data, a NAK
//     PSN sequence error: the path works again). Karn's rule takes no sample from
//     PSNs sent again, so under steady random loss a QP that goes back often samples
//     rarely, and a backoff kept until the next sample grew across unrelated losses
//     (waits of 3.5-16 ms at 5 % loss on a 60-90 µs round trip, most of a WRITE
//     run's time). On expiry the requester goes back to the oldest unacknowledged PSN
//     (counted as roce_adp_retrans, mlx5's name) without spending retry_cnt;
//   - the local ACK timeout (ackBy, 4.096 µs × 2^timeout, IBTA Vol 1 §11.2.4.2): it
//     decides, exactly as before, when retry_cnt is spent (local_ack_timeout_err) and
//     when the QP fails with IBV_WC_RETRY_EXC_ERR. Adaptive retransmissions do not
//     restart it.
//
// Both start when a request packet leaves (is handed to the link), not when it is
// queued, and restart on every response while they run: they measure silence from
// the responder, as rdma_rxe's completer does (rxe_comp.c). Before the first sample
// the RTO is the local ACK timeout.
//
// The adaptive timer runs only while the QP is lossy: a loss signal (NAK PSN
// sequence error, implied NAK, local ACK timeout) came less than lossMemory ago,
// at this QP or at another of the device's QPs to the same peer (peerpath.go). A
// QP on a clean link never retransmits before the local ACK timeout, exactly as
// before: on a host whose CPUs are shared (the development VM), a responder's engine
// can be descheduled for milliseconds, far beyond an RTO from microsecond samples,
// and a retransmission then would only be a spurious duplicate on a link that loses
// nothing. The samples are taken all the time, so the RTO is known when the first
// loss comes.
//
// RTT samples: every answer to a packet that asked for one gives a sample, as TCP's
// timestamps do (RFC 7323), from the packet's departure to the answer's arrival: an
// ACK of new data whose PSN is a packet sent with AckReq, a READ's first response, an
// atomic's response, and a NAK PSN sequence error, which the responder sends as soon
// as the packet after the gap arrives (timed from that packet). An ACK for a PSN that
// did not ask for one (coalesced, or a duplicate's) gives none. Karn's rule: no sample
// comes from a PSN sent before the requester last went back, since the answer may be
// to the retransmission — except the very first sample (sampleRTT). Departures are
// kept for the last MaxUnackedPSN PSNs.
//
// After an implied NAK the responder is still sending the READ responses asked
// before (rdma_rxe sends the rest of the READ, and the READs after it, before it
// answers the request asked again): the adaptive timer waits until the last PSN of
// that stream has arrived, or for silence of at least four of the stream's mean
// packet spacings after its last packet (requester.rto), and before the stream's
// first packet only the local ACK timeout runs. A requester that asked again on
// every RTO would only queue more copies behind them.

// MinRTO is the smallest adaptive retransmission timeout. RTT samples include the
// queueing of the window ahead of the timed packet, so the RTO tracks the path; the
// floor covers engine passes and scheduling delays that samples rarely see.
const MinRTO = 200 * time.Microsecond

// rtoGranularity is RFC 6298's G: the engine's timer resolution (a pass).
const rtoGranularity = 10 * time.Microsecond

// staleSpacings is how many of a streaming responder's mean packet spacings of
// silence end the wait for the rest of its stream (requester.rto).
const staleSpacings = 4

// lossMemory is how long after its last loss signal a QP stays lossy: its adaptive
// timer runs and its window restarts small after idle.
const lossMemory = time.Second

// rttEstimator is RFC 6298's state, and the departure times samples are taken from.
type rttEstimator struct {
	srtt, rttvar time.Duration
	min          time.Duration // the smallest sample: the round trip without a queue (queueing.go)
	sampled      bool
	backoff      uint   // RTO doublings since the last sample or answer that moved the requester on
	karnFrom     uint32 // PSNs before it may have left more than once: no samples from them
	sent         [MaxUnackedPSN]departure
}

// departure is when a request packet left: its PSN (a READ request's: the first
// response PSN it asks for), the time in Unix nanoseconds (0: none), and whether it
// asked for an ACK.
type departure struct {
	psn    uint32
	ackReq bool
	at     int64
}

// rto returns the retransmission timeout, backoff included, at most ackTimeout.
func (e *rttEstimator) rto(ackTimeout time.Duration) time.Duration {
	if ackTimeout == 0 {
		return 0
	}
	if !e.sampled {
		return ackTimeout
	}
	t := max(e.srtt+max(rtoGranularity, 4*e.rttvar), MinRTO)
	for i := uint(0); i < e.backoff && t < ackTimeout; i++ {
		t *= 2
	}
	return min(t, ackTimeout)
}

// sample takes one RTT measurement (RFC 6298 §2.2-2.3) and ends any backoff.
func (e *rttEstimator) sample(r time.Duration) {
	if !e.sampled || r < e.min {
		e.min = r
	}
	if !e.sampled {
		e.srtt, e.rttvar, e.sampled = r, r/2, true
	} else {
		d := e.srtt - r
		if d < 0 {
			d = -d
		}
		e.rttvar = (3*e.rttvar + d) / 4
		e.srtt = (7*e.srtt + r) / 8
	}
	e.backoff = 0
}

// txInfo says what a queued frame is, for the departure hook: a requester's packet
// names its QP.
type txInfo struct {
	qp     *QueuePair // nil: not a request packet
	psn    uint32
	ackReq bool
	lent   bool // the frame is in the link's memory (TxLender), not in Device.bufs
}

// departed is called when the link accepts a frame the requester built: its
// departure time is kept, and the timers start if they are not running (RFC 6298
// §5.1).
func (r *requester) departed(qp *QueuePair, m *txInfo) {
	if qp.destroyed || (qp.state != QPS_RTS && qp.state != QPS_SQD) {
		return
	}
	now := qp.dev.now
	r.rtt.sent[m.psn%MaxUnackedPSN] = departure{psn: m.psn, ackReq: m.ackReq, at: now.UnixNano()}
	r.startTimers(qp)
}

// adaptive reports whether the adaptive timer may run: while the QP or its path is
// lossy (peerpath.go), and not while the responder is still sending the responses
// asked before an implied NAK.
func (r *requester) adaptive(now time.Time) bool {
	return r.pathLossy(now) && (!r.readGap || r.staleDone || r.staleN > 0)
}

// rto is the adaptive timeout (rttEstimator.rto). While the responder still streams
// the responses asked before an implied NAK it is at least staleSpacings times that
// stream's mean packet spacing so far: silence that long after its last packet
// means the stream's tail or the request asked again was lost, and a responder
// that is merely slow (rdma_rxe under TCG, milliseconds a packet) is not asked
// again while it streams.
func (r *requester) rto(to time.Duration) time.Duration {
	t := r.rtt.rto(to)
	if r.readGap && !r.staleDone && r.staleN > 0 {
		t = min(max(t, staleSpacings*r.staleAt.Sub(r.staleFrom)/time.Duration(r.staleN)), to)
	}
	return t
}

// lossy reports whether a loss signal came less than lossMemory ago.
func (r *requester) lossy(now time.Time) bool {
	return !r.lossAt.IsZero() && now.Sub(r.lossAt) < lossMemory
}

// lost records a loss signal of qp, the QP's and its path's (peerpath.go).
func (r *requester) lost(qp *QueuePair) {
	now := qp.dev.now
	r.lossAt = now
	if p := r.path; p != nil {
		was := p.lossy(now)
		p.lossAt = now
		if !was {
			qp.dev.armPath(qp)
		}
	}
}

// pathLossy reports whether the QP or another QP to its peer saw a loss signal
// less than lossMemory ago: the adaptive timer and the tail probe may run.
func (r *requester) pathLossy(now time.Time) bool {
	return r.lossy(now) || r.path.lossy(now)
}

// startTimers starts the timers that are not running, while PSNs are in flight.
func (r *requester) startTimers(qp *QueuePair) {
	to := timeoutDuration(qp.attr.Timeout)
	if to == 0 || !r.awaiting(qp) {
		return
	}
	now := qp.dev.now
	if !r.ackBy.IsZero() && r.rtoAt.IsZero() && r.probeAt.IsZero() && r.timer.Equal(r.ackBy) && !r.pathLossy(now) {
		// The local ACK timeout runs and the path is not lossy: the adaptive timer
		// and the tail probe stay off (adaptive), so nothing would change. Every
		// departure comes here.
		return
	}
	if r.ackBy.IsZero() {
		r.ackBy = now.Add(to)
	}
	if r.rtoAt.IsZero() && r.adaptive(now) {
		r.rtoAt = now.Add(r.rto(to))
	}
	r.armProbe(now, to)
	r.setTimer(qp)
}

// restartTimers restarts the timers from now: the responder answered.
func (r *requester) restartTimers(qp *QueuePair) {
	r.rtoAt, r.ackBy, r.probeAt = timeZero, timeZero, timeZero
	r.startTimers(qp)
}

func (r *requester) stopTimers() {
	r.rtoAt, r.ackBy, r.probeAt, r.timer = timeZero, timeZero, timeZero, timeZero
}

// setTimer puts the earliest deadline in the timer heap.
func (r *requester) setTimer(qp *QueuePair) {
	r.timer = earliest(earliest(r.rtoAt, r.ackBy), r.probeAt)
	qp.dev.armed(qp, r.timer)
}

// acked takes the RTT sample of the newest PSN acknowledged (compPSN has just moved
// past it) when it asked for the answer, and grows the window for the PSNs
// acknowledged.
func (r *requester) acked(qp *QueuePair) {
	r.undoSpurious(qp, roce.PSNAdd(r.compPSN, -1))
	r.sampleRTT(qp, roce.PSNAdd(r.compPSN, -1), true)
	r.win.ack(r.compPSN)
}

// sampleRTT takes an RTT sample from the departure of psn, if it is known, was sent
// after the last go-back, and (with ackReq) asked for an answer. With no sample yet,
// a PSN sent again is timed from its last departure: without it a QP that met its
// first loss before its first sample would wait the local ACK timeout at every
// timeout until a fresh packet got through unanswered by a loss, and the answer to
// the copy sent after a timeout is most likely to that copy.
func (r *requester) sampleRTT(qp *QueuePair, psn uint32, ackReq bool) {
	e := r.rtt.sent[psn%MaxUnackedPSN]
	if e.psn != psn || e.at == 0 || (ackReq && !e.ackReq) || (r.rtt.sampled && roce.PSNDiff(psn, r.rtt.karnFrom) < 0) {
		return
	}
	rt := time.Duration(qp.dev.now.UnixNano() - e.at)
	r.rtt.sample(rt)
	r.queueSignal(qp, rt)
}

// idleRestart runs before new work goes out with nothing outstanding. A QP no longer
// lossy gets the fixed window back (a cut window learnt nothing that still holds); a
// lossy one that had nothing to send for longer than the RTO restarts small (slow
// restart after idle). Idle is the time from the answer that left it nothing to send
// (all acknowledged, no WQE left) to the work posted after it (idleEnds): a QP whose
// send queue held work while it waited for its turn among the device's ready QPs was
// not idle, however long ago its last packet left (RFC 5681 §4.1 times idle from the
// last send; on this engine a busy device's turns can be longer than the RTO).
func (r *requester) idleRestart(qp *QueuePair) {
	if !r.lossy(qp.dev.now) {
		if r.win.cut {
			r.win.init(r.compPSN)
		}
		return
	}
	idle := r.idleFor
	r.idleFor = 0
	rto := r.rtt.rto(timeoutDuration(qp.attr.Timeout))
	if rto == 0 || idle <= rto {
		return
	}
	if r.win.idle(qp.pmtu) {
		qp.count(CntRoceSlowRestart)
	}
}

// idleStarts notes when the requester is left with nothing to send and nothing
// outstanding.
func (r *requester) idleStarts(qp *QueuePair) {
	if !r.hasOutstanding(qp) && r.next >= qp.sq.len() && r.idleFrom.IsZero() {
		r.idleFrom = qp.dev.now
	}
}

// idleEnds notes that work was posted: the idle period, if one ran, ends now.
func (r *requester) idleEnds(now time.Time) {
	if !r.idleFrom.IsZero() {
		r.idleFor = now.Sub(r.idleFrom)
		r.idleFrom = timeZero
	}
}
