package transport

import (
	"time"
)

// Queueing delay as a congestion signal, while a QP is lossy (docs/congestion.md,
// "Rate mismatch").
//
// Behind a bottleneck with a shallow queue (a tbf at a tenth of the sender's rate,
// a switch port), the loss-driven window overfills the queue: the round trip grows
// from tens of microseconds to the queue's depth (2.4 ms for 28 frames at 100
// Mbit/s), the queue drops, and go-back-N sends again every frame queued behind the
// drop — bottleneck time spent twice. Random loss never builds a queue. So, like
// Swift (Kumar et al., SIGCOMM 2020) and TCP Vegas before it, every RTT sample above
// a target delay shrinks the window in proportion to the excess, at most once per
// window of data (the loss cut's recover point), before the queue drops:
//
//	cwnd = max(cwnd × (1 − queueBeta × (rtt − target) / rtt), cwnd × (1 − queueMaxMDF), minCwnd)
//
// The target is the smallest RTT seen on the QP plus queueTarget: larger than the
// round trip's noise on a host whose CPUs are shared (samples of 50 to 800 µs on one
// path on the development VM), small enough that a queue that deep drains no
// faster than it fills. The signal counts as a loss signal for lossMemory (the QP
// stays lossy while the queue keeps building). A QP that never lost a packet never
// uses it: a clean link sends exactly what it sent before.

// The queueing signal's parameters.
const (
	queueTarget = 500 * time.Microsecond // queueing delay above the smallest RTT that counts as congestion
	queueBeta   = 0.8                    // Swift's β: the share of the excess that the window gives up
	queueMaxMDF = 0.5                    // Swift's max_mdf: the largest cut of one sample
)

// queueing shrinks the window for an RTT sample rtt above target and reports
// whether it did; sentPSN is one past the highest PSN sent (the recover point).
func (w *window) queueing(rtt, target time.Duration, sentPSN uint32) bool {
	if rtt <= target || w.inRecovery {
		return false
	}
	f := max(1-queueBeta*float64(rtt-target)/float64(rtt), 1-queueMaxMDF)
	w.ssthresh = max(int(float64(w.cwnd)*f), minCwnd)
	w.cwnd = w.ssthresh
	w.acked = 0
	w.recover, w.inRecovery, w.cut = sentPSN, true, true
	return true
}

// queueSignal applies an RTT sample rt to the window of a lossy QP.
func (r *requester) queueSignal(qp *QueuePair, rt time.Duration) {
	now := qp.dev.now
	if !r.lossy(now) {
		return
	}
	if r.win.queueing(rt, r.rtt.min+queueTarget, r.sentPSN) {
		r.lossAt = now
	}
}
