package transport

import (
	"time"

	"github.com/xroce/xroce/roce"
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
//
// A queue is shared: every QP of the device towards the same peer waits in it. A QP
// with fewer packets in flight than the mean of its siblings on that path (the RC QPs
// to the same peer address with packets in flight) did not build it, and cutting it
// would not drain it: its siblings, which may never have lost a packet and so never
// react to delay, keep the queue standing, and the cut QP would shrink window after
// window to a few packets while they send the rest (eight QPs of 64 KiB READs, one
// of which met a loss: docs/congestion.md, "Many QPs after a loss"). So a sample
// cuts only a QP with at least its siblings' mean in flight. Alone on its path, a
// QP always has: the single-QP bottleneck behaves as before. Among equal QPs behind
// one bottleneck, those above the mean are cut first, which also moves them towards
// equal shares.

// The queueing signal's parameters.
const (
	queueTarget = 500 * time.Microsecond // queueing delay above the smallest RTT that counts as congestion
	queueBeta   = 0.8                    // Swift's β: the share of the excess that the window gives up
	queueMaxMDF = 0.5                    // Swift's max_mdf: the largest cut of one sample
)

// queueing shrinks the window for an RTT sample rtt above target; sentPSN is one
// past the highest PSN sent (the recover point).
func (w *window) queueing(rtt, target time.Duration, sentPSN uint32) {
	f := max(1-queueBeta*float64(rtt-target)/float64(rtt), 1-queueMaxMDF)
	w.ssthresh = max(int(float64(w.cwnd)*f), minCwnd)
	w.cwnd = w.ssthresh
	w.acked = 0
	w.recover, w.inRecovery, w.cut = sentPSN, true, true
}

// queueSignal applies an RTT sample rt to the window of a lossy QP: a sample above
// the target cuts it, once per window of data, unless the QP is below its share of
// the path.
func (r *requester) queueSignal(qp *QueuePair, rt time.Duration) {
	now := qp.dev.now
	target := r.rtt.min + queueTarget
	if !r.lossy(now) || rt <= target || r.win.inRecovery || r.belowShare(qp) {
		return
	}
	r.win.queueing(rt, target, r.sentPSN)
	r.lossAt = now
}

// inflight returns how many PSNs the requester has sent and not seen acknowledged
// (READ responses included).
func (r *requester) inflight() int {
	return max(0, int(roce.PSNDiff(r.sentPSN, r.compPSN)))
}

// belowShare reports whether qp has fewer PSNs in flight than the mean of the other
// RC QPs with PSNs in flight to the same peer address. The answer "below" holds for
// queueTarget before the QP asks again, so a QP kept below its share by a standing
// queue walks the device's QPs at most once per queueTarget.
func (r *requester) belowShare(qp *QueuePair) bool {
	now := qp.dev.now
	if now.Before(r.belowUntil) {
		return true
	}
	sum, n := qp.dev.pathLoad(qp)
	if n > 0 && r.inflight()*n < sum {
		r.belowUntil = now.Add(queueTarget)
		return true
	}
	return false
}

// pathLoad returns the PSNs in flight and how many RC QPs have any, over qp's
// siblings (peerpath.go).
func (d *Device) pathLoad(qp *QueuePair) (sum, n int) {
	for o := range d.siblings(qp) {
		if k := o.req.inflight(); k > 0 {
			sum += k
			n++
		}
	}
	return sum, n
}
