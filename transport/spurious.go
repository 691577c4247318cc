package transport

import (
	"time"

	"github.com/xroce/xroce/roce"
)

// Spurious adaptive retransmission timeouts (after RFC 5682's F-RTO and RFC 4015's
// Eifel response; docs/congestion.md, "Many QPs after a loss").
//
// The adaptive RTO (rtt.go) fires on silence from the responder. Behind a queue that
// other QPs keep standing, a lossy QP's RTT samples are few (Karn's rule drops those
// of PSNs sent again) and low, and the RTO fires while its packets are only queued:
// the timeout then cut its window, marked it lossy again and sent its window again,
// so it went on timing out, window after window, while its siblings held the path.
//
// So after an adaptive RTO the requester goes back to the oldest unacknowledged PSN
// and sends that packet alone, with AckReq, until an answer comes (F-RTO's first
// step; requester.frto). The first answer tells which it was. The responder
// acknowledges a PSN only once it has every PSN before it, and drops what comes
// after a gap (IBTA Vol 1 §9.7.5.1.1). So when the first answer covers every PSN
// sent before the RTO, and the request it answers last left before the RTO (or the
// answer came back sooner after the copy left than the smallest RTT the QP ever
// measured, so it cannot answer the copy), every original arrived. An answer that
// covers only some of them says nothing about the rest: a flight whose packet with
// AckReq was lost draws, for the oldest packet sent again, an ACK of the packets
// before the lost one. The RTO was spurious when every original arrived: the
// requester takes back what it did to the window and to the QP's loss state, counts
// roce_adp_retrans_spurious, raises its RTT estimate to the late answer's RTT (SRTT
// at least that sample, RTTVAR at least half of it, so the RTO becomes about three
// times the delay that fooled it, as RFC 4015 adapts the RTO), and goes on from the
// first PSN not acknowledged (skipAcked) rather than sending the acknowledged ones
// again. Any other answer, a NAK, or a go-back of another cause leaves the cut in
// place; a second RTO before any answer keeps the first one's state to restore. The
// local ACK timeout, which spends retry_cnt, is never undone.

// rtoUndo is what an adaptive RTO changed, kept until the first answer after it.
type rtoUndo struct {
	at     int64  // when the RTO fired, in Unix nanoseconds; 0: nothing to undo
	una    uint32 // the oldest unacknowledged PSN then
	sent   uint32 // one past the highest PSN sent then
	win    window
	lossAt time.Time
}

// adaptiveTimeout goes back after an adaptive RTO (timeout) and keeps what the
// window and loss state were before it, unless an earlier RTO's are still kept
// (no answer came in between: the first RTO's state is the one to restore).
func (r *requester) adaptiveTimeout(qp *QueuePair) {
	u := r.undo
	if u.at == 0 {
		u = rtoUndo{at: qp.dev.now.UnixNano(), una: r.compPSN, sent: r.sentPSN, win: r.win, lossAt: r.lossAt}
	}
	r.timeout(qp) // rewinds, which forgets any kept state
	r.undo = u
	r.frto = true
}

// undoSpurious is called when an answer acknowledges PSNs up to psn: if it covers
// every PSN sent before the kept RTO and answers a request sent before it, or came
// back sooner after the request's copy than the smallest RTT ever measured, the RTO
// was spurious and its cut is taken back. Either way the first answer decides:
// nothing stays kept.
func (r *requester) undoSpurious(qp *QueuePair, psn uint32) {
	u := r.undo
	if u.at == 0 {
		return
	}
	r.undo.at = 0
	if roce.PSNDiff(psn, roce.PSNAdd(u.sent, -1)) < 0 {
		return // some PSNs sent before the RTO are not acknowledged: they may be lost
	}
	e, ok := r.requestOf(psn, u.una)
	now := qp.dev.now.UnixNano()
	if !ok || (e.at >= u.at && time.Duration(now-e.at) >= r.rtt.min) {
		return
	}
	qp.count(CntRoceAdpRetransSpurious)
	r.win = u.win
	r.lossAt = u.lossAt
	rt := time.Duration(now - e.at)
	r.rtt.srtt = max(r.rtt.srtt, rt)
	r.rtt.rttvar = max(r.rtt.rttvar, rt/2)
}

// requestOf returns the departure of the request that psn answers: psn's own (a SEND
// or WRITE packet, an atomic), or the nearest before it down to from (a READ
// request, kept under its first response PSN).
func (r *requester) requestOf(psn, from uint32) (departure, bool) {
	for k := psn; roce.PSNDiff(k, from) >= 0 && roce.PSNDiff(psn, k) < MaxUnackedPSN; k = roce.PSNAdd(k, -1) {
		if e := r.rtt.sent[k%MaxUnackedPSN]; e.psn == k && e.at != 0 {
			return e, true
		}
	}
	return departure{}, false
}
