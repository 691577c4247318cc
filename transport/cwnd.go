package transport

import (
	"time"

	"github.com/xroce/xroce/roce"
)

// The RC requester's congestion window (docs/congestion.md). The requester stays an
// ordinary go-back-N requester on the wire: the window only decides how far past
// the oldest unacknowledged PSN it may send (snd_una + cwnd, RFC 5681's FlightSize
// in PSNs), and how often it asks for an acknowledgement. READ responses count as
// outstanding PSNs like request packets, so a READ request goes out only while the
// PSNs already outstanding leave room in the window; a large READ goes out as
// segments of half the window (readseg.go), each admitted like a READ request.
//
// The window is AIMD in packets (RFC 5681's structure, with other constants):
//   - it starts at MaxUnackedPSN, the fixed window the requester always had, so a QP
//     on a clean link behaves exactly as before: the window only matters once a loss
//     has been seen;
//   - a NAK PSN sequence error or an implied NAK (a READ/atomic response gap) cuts it
//     to 0.7 of itself (ssthresh = cwnd = max(0.7 cwnd, 2); RFC 9438's β), once per
//     window of data (NewReno's recover point, RFC 6582): the packets behind a loss
//     that go-back-N sends again are not a second signal;
//   - a retransmission timeout (the adaptive RTO or the local ACK timeout) cuts it the
//     same way; a second timeout with nothing acknowledged in between means the ACK
//     clock is lost, and the window drops to one packet (RFC 5681's loss window),
//     keeping ssthresh;
//   - below ssthresh every PSN newly acknowledged adds one packet (slow start, counted
//     in PSNs as RFC 3465 counts bytes, since the responder coalesces ACKs); above it
//     every window's worth of PSNs acknowledged adds alpha = 4 packets (congestion
//     avoidance). The window grows only when it limited the requester since the last
//     increase (RFC 7661), and never above MaxUnackedPSN;
//   - after an idle period longer than the RTO, the window of a lossy QP (a loss less
//     than lossMemory ago, rtt.go) restarts at the restart window (RFC 5681 §4.1; mlx5
//     counts roce_slow_restart), with ssthresh at least 3/4 of the window it had (RFC
//     7661), so slow start climbs back quickly. A QP whose last loss is older gets
//     the fixed window back, and one that never saw a loss keeps it: neither learnt
//     anything that still holds.
//
// Why not Reno's 1/2 and 1: go-back-N pays a whole window for every loss, and on a
// lossy Ethernet most losses are random, not a queue overflowing. AIMD(α, β) settles
// where the window regains between two losses (1/p packets apart) what a cut takes:
// W ≈ sqrt(α / (p (1-β))). Reno sits at about 5 packets under 5 % random loss, a
// third of the bandwidth-delay product of a veth path at this engine's rate; α = 4
// and β = 0.7 sit near 16 (docs/congestion.md has the simulation and the numbers).
//
// AckReq: the requester asks for an ACK at least every ceil(cwnd/2) packets (and at
// least every maxPktsPerAck, at the end of a message and on an RNR probe, as before),
// so every window carries an AckReq whose ACK opens it again; at the full window that
// is every 64 packets, as before.
type window struct {
	cwnd       int    // PSNs that may be outstanding (sent, not acknowledged)
	ssthresh   int    // slow start threshold
	acked      int    // PSNs acknowledged towards the next increase in congestion avoidance
	una        uint32 // the oldest unacknowledged PSN when growth was last counted
	recover    uint32 // one past the highest PSN sent when the window was last cut
	inRecovery bool   // the PSNs before recover are not all acknowledged: no further cut
	cut        bool   // a loss has cut the window since the QP reached RTS
	limited    bool   // the window stopped the requester since the last increase
	timeouts   int    // retransmission timeouts since the last acknowledgement
}

// The window's parameters (docs/congestion.md).
const (
	minCwnd     = 2  // the smallest window a loss leaves (RFC 5681's 2 SMSS)
	betaPercent = 70 // multiplicative decrease: cwnd × 0.7 (RFC 9438's β)
	alpha       = 4  // additive increase: packets per window acknowledged
)

func (w *window) init(psn uint32) {
	*w = window{cwnd: MaxUnackedPSN, ssthresh: MaxUnackedPSN, una: psn, recover: psn}
}

// full reports whether a packet at psn would be outside the window that starts at
// the oldest unacknowledged PSN una, and notes that the window limited the requester.
func (w *window) full(psn, una uint32) bool {
	if roce.PSNDiff(psn, una) < int32(w.cwnd) {
		return false
	}
	w.limited = true
	return true
}

// fills reports whether a packet at psn takes the window's last place, the oldest
// unacknowledged PSN being una.
func (w *window) fills(psn, una uint32) bool {
	return roce.PSNDiff(psn, una) == int32(w.cwnd)-1
}

// ackEvery is how many packets may go without AckReq.
func (w *window) ackEvery() int {
	return min(maxPktsPerAck, max(1, (w.cwnd+1)/2))
}

// acked counts the PSNs acknowledged since the last call (una moved to compPSN) and
// grows the window for them.
func (w *window) ack(compPSN uint32) {
	n := int(roce.PSNDiff(compPSN, w.una))
	if n <= 0 {
		return
	}
	w.una = compPSN
	w.timeouts = 0
	if w.inRecovery && roce.PSNDiff(compPSN, w.recover) >= 0 {
		w.inRecovery = false
	}
	if !w.limited {
		return
	}
	w.limited = false
	if w.cwnd < w.ssthresh {
		inc := min(n, w.ssthresh-w.cwnd)
		w.cwnd += inc
		n -= inc
	}
	if n > 0 && w.cwnd < MaxUnackedPSN {
		w.acked += n
		for w.acked*alpha >= w.cwnd && w.cwnd < MaxUnackedPSN {
			w.acked -= (w.cwnd + alpha - 1) / alpha
			w.cwnd++
		}
	}
	if w.cwnd >= MaxUnackedPSN {
		w.cwnd, w.acked = MaxUnackedPSN, 0
	}
}

// halve is the multiplicative decrease.
func (w *window) halve(sentPSN uint32) {
	w.ssthresh = max(w.cwnd*betaPercent/100, minCwnd)
	w.cwnd = w.ssthresh
	w.acked = 0
	w.recover, w.inRecovery, w.cut = sentPSN, true, true
}

// loss handles a NAK PSN sequence error or an implied NAK: the window halves unless
// the loss belongs to a window already cut.
func (w *window) loss(sentPSN, compPSN uint32) {
	w.ack(compPSN)
	if !w.inRecovery {
		w.halve(sentPSN)
	}
}

// timeout handles a retransmission timeout. The first since an acknowledgement cuts
// the window as a loss does: the retransmission itself, or every answer, was lost.
// A second with nothing acknowledged in between means the ACK clock is lost: the
// window drops to one packet (RFC 5681's loss window), keeping ssthresh.
func (w *window) timeout(sentPSN, compPSN uint32) {
	w.ack(compPSN)
	if w.timeouts == 0 {
		w.halve(sentPSN)
	} else {
		w.cwnd, w.acked = 1, 0
	}
	w.timeouts++
}

// restartWindow is the window after an idle period, in packets of pmtu bytes: RFC
// 3390's initial window, min(4 MSS, max(2 MSS, 4380 bytes)) — 4 packets at path MTU
// 256 to 1024, 2 at 2048 and 4096.
func restartWindow(pmtu int) int {
	return min(4, max(2, 4380/max(pmtu, 1)))
}

// idle restarts a cut window after an idle period (RFC 5681 §4.1); it reports
// whether the window shrank.
func (w *window) idle(pmtu int) bool {
	rw := restartWindow(pmtu)
	if !w.cut || w.cwnd <= rw {
		return false
	}
	w.ssthresh = max(w.ssthresh, 3*w.cwnd/4)
	w.cwnd, w.acked = rw, 0
	return true
}

// CongestionState is a snapshot of an RC QP's send window and retransmission timer
// (docs/congestion.md).
type CongestionState struct {
	Cwnd     int // PSNs the requester may have outstanding
	Ssthresh int // slow start threshold, in PSNs
	// SRTT and RTTVar are the smoothed round-trip time and its variation (RFC 6298);
	// zero before the first sample.
	SRTT, RTTVar time.Duration
	// RTO is the adaptive retransmission timeout, backoff included: at most the
	// local ACK timeout (0 when the QP's timeout is 0, infinite).
	RTO time.Duration
	// Lossy is true while a loss signal of the QP's own came less than a second
	// ago; PathLossy while one of any of the device's RC QPs to the same peer,
	// this one included, did (peerpath.go). The adaptive timer and the tail probe
	// run while PathLossy holds; the window rules of a loss follow Lossy only.
	Lossy, PathLossy bool
	// RateLimited is true while DCQCN paces the QP (dcqcn.go): a CNP came and the
	// rate has not recovered to the line rate. Rate and TargetRate are then its
	// current and target rate in bits/s, and Alpha its alpha in 1/1024 as of its
	// last CNP.
	RateLimited      bool
	Rate, TargetRate int64
	Alpha            int
}

// CongestionState returns the QP's window and timer state.
func (qp *QueuePair) CongestionState() CongestionState {
	d := qp.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	r := &qp.req
	return CongestionState{Cwnd: r.win.cwnd, Ssthresh: r.win.ssthresh, SRTT: r.rtt.srtt, RTTVar: r.rtt.rttvar,
		RTO: r.rtt.rto(timeoutDuration(qp.attr.Timeout)), Lossy: r.lossy(d.now), PathLossy: r.pathLossy(d.now),
		RateLimited: qp.rp.active, Rate: qp.rp.rc, TargetRate: qp.rp.rt, Alpha: qp.rp.alpha}
}
