package transport

import (
	"sort"

	"github.com/xroce/xroce/roce"
)

// Bounded READ retransmission (docs/congestion.md). The requester splits a large
// RDMA READ work request into several READ requests, segments, each asking for a
// contiguous part of the WR's response PSNs: a READ request consumes one PSN per
// response packet (IBTA Vol 1 §9.7.2, §9.4.3), so segment k's request carries the
// PSN of its first response packet, RETH VA advanced and DMA length reduced, as a
// READ asked again from the middle does (§9.7.5.2.7). The responder sees only
// ordinary READ requests. Each segment is one outstanding READ against
// max_rd_atomic, and the window (cwnd.go) admits a segment when its first PSN fits.
//
// A segment is as large as the window at the moment it goes out allows: half the
// window, or the whole window when max_rd_atomic is 1 (segPackets). On a clean link
// the window is 128 PSNs, so a READ of up to 64 packets (64 KiB at path MTU 1024)
// is one request, byte for byte what it was; after a loss the window, and with it
// the segments, shrink.
//
// Within a split WR the segments are answered independently: a gap inside segment
// k asks again from the gap to the end of segment k only, and the answers to the
// WR's other segments, already on their way, are kept. Across WRs retransmission
// stays go-back-N (requester.rewind): a gap while a later WR has requests out, a
// READ response gap in a WR of one segment, and timeouts, go back as before.

// readSeg is one READ request of a READ WR.
type readSeg struct {
	start, end int    // the WR's response packets [start, end) it asks for
	got        int    // how many of them arrived in order from start
	from       int    // got when its outstanding request went out: that answer starts at start+from
	seq        uint32 // requester.reqSeq then: the responder answers requests in this order
	nakAt      int    // got when it was last asked again after a gap in its answer; -1: never
	asked      bool   // a request for [start+got, end) is outstanding
}

func (s *readSeg) complete() bool { return s.start+s.got == s.end }

// segPackets is the size of the next segment in packets: half the window, so that
// one segment can be recovering while the next one streams, or the whole window
// when max_rd_atomic allows one READ at a time (half would leave half the window
// unused). At the full window of 128 that is 64 packets, as often as the requester
// asks for an ACK on a WRITE (cwnd.go ackEvery).
func (r *requester) segPackets(qp *QueuePair) int {
	k := min(max(1, int(qp.attr.MaxRdAtomic)), 2)
	return max(1, (r.win.cwnd+k-1)/k)
}

// segAt returns the index of the segment holding packet off of w, or -1.
func (w *sendWQE) segAt(off int) int {
	j := sort.Search(len(w.segs), func(j int) bool { return w.segs[j].end > off })
	if j == len(w.segs) || w.segs[j].start > off {
		return -1
	}
	return j
}

// split reports whether w is a READ asked for in more than one request.
func (w *sendWQE) split() bool {
	return len(w.segs) > 1 || (len(w.segs) == 1 && w.segs[0].end < w.npkts)
}

// mayAsk reports whether a READ request whose first response is packet pkt of w may
// go out now: max_rd_atomic and the window allow it.
func (r *requester) mayAsk(w *sendWQE, pkt, maxRd int) bool {
	return r.rdInflight < maxRd && !r.win.full(roce.PSNAdd(w.firstPSN, pkt), r.compPSN)
}

// stepRead sends up to budget READ requests of w: the segments not yet asked for, in
// order, each from its first missing packet, and new segments after them. It
// reports how many it sent and whether every segment of w is asked for or complete.
func (r *requester) stepRead(qp *QueuePair, w *sendWQE, budget, maxRd int) (n int, all bool) {
	for n < budget {
		if w.sent == len(w.segs) {
			start := 0
			if len(w.segs) > 0 {
				start = w.segs[len(w.segs)-1].end
			}
			if start == w.npkts {
				return n, true
			}
			if !r.mayAsk(w, start, maxRd) {
				return n, false
			}
			w.segs = append(w.segs, readSeg{start: start, end: min(w.npkts, start+r.segPackets(qp)), nakAt: -1})
		}
		s := &w.segs[w.sent]
		if !s.asked && !s.complete() {
			if !r.mayAsk(w, s.start+s.got, maxRd) {
				return n, false
			}
			r.askSeg(qp, w, w.sent)
			n++
		}
		w.sent++
	}
	return n, false
}

// askSeg sends the READ request for segment j of w from its first missing packet to
// its end. A segment asked again keeps its place in max_rd_atomic.
func (r *requester) askSeg(qp *QueuePair, w *sendWQE, j int) {
	s := &w.segs[j]
	if !s.asked {
		r.rdInflight++
	}
	s.asked, s.from, s.seq = true, s.got, r.reqSeq
	r.reqSeq++
	d := qp.dev
	done := (s.start + s.got) * qp.pmtu
	p := d.start(qp, roce.RC_RDMA_READ_REQUEST, roce.PSNAdd(w.firstPSN, s.start+s.got))
	p.RETH = roce.RETH{VA: w.wr.RemoteAddr + uint64(done), RKey: w.wr.RKey,
		DMALen: uint32(max(0, min(w.length, s.end*qp.pmtu)-done))}
	p.BTH.AckReq = true
	r.emit(qp, p.BTH.PSN)
	r.sentUpTo(roce.PSNAdd(w.firstPSN, s.end))
}

// unask forgets w's outstanding requests (go-back-N asks for them again).
func (r *requester) unask(w *sendWQE) {
	for j := range w.segs {
		if w.segs[j].asked {
			w.segs[j].asked = false
			r.rdInflight--
		}
	}
}

// segGap handles a READ response beyond the first missing packet of segment j of w,
// the oldest WR (§9.7.5.2.7 implied NAK). In a split WR with no later WR's requests
// out, it asks
// again for that segment only, once per gap: the rest of the old answer is still on
// its way and shows the same gap (unless psn, the packet showing it, lies below
// where that stream had reached: then the new answer lost a packet too). Otherwise it goes back as before (impliedNak).
func (r *requester) segGap(qp *QueuePair, w *sendWQE, j int, psn uint32) {
	s := &w.segs[j]
	renewed := r.readGap && roce.PSNDiff(psn, r.staleHigh) <= 0 // below the old answers: a new one
	if r.goBack(qp, w) || (s.asked && s.nakAt == s.got && !renewed) {
		return // the rest of the old answer
	}
	r.reask(qp, w, j)
}

// goBack goes back to w's first missing packet, as for an unsplit READ
// (impliedNak), and reports true, when w, the oldest WR, is not split or a later WR
// has requests out: the responder sends the answers to those after w's.
func (r *requester) goBack(qp *QueuePair, w *sendWQE) bool {
	if w.split() && (qp.sq.len() < 2 || !(*qp.sq.at(1)).assigned) {
		return false
	}
	r.impliedNak(qp, roce.PSNAdd(w.firstPSN, w.rcvd))
	return true
}

// reask asks again for segment j of w from its first missing packet after a loss.
func (r *requester) reask(qp *QueuePair, w *sendWQE, j int) {
	qp.count(CntImpliedNak)
	r.win.loss(r.sentPSN, r.compPSN)
	r.lost(qp)
	s := &w.segs[j]
	s.nakAt = s.got
	r.askSeg(qp, w, j)
	r.staleGap(qp.dev.now, roce.PSNAdd(w.firstPSN, s.start+s.got))
}

// answered handles the first response to a request of w, the oldest WR, sent with
// sequence seq:
// the responder answers READ requests in the order they arrive, so every segment
// of w asked for before it should be complete; one that is not lost the end of its
// answer (no later packet of its own showed the gap) and is asked again.
func (r *requester) answered(qp *QueuePair, w *sendWQE, seq uint32) {
	if r.retrying { // after a go-back the old answers still come: no inference
		return
	}
	for j := max(0, w.segAt(w.rcvd)); j < len(w.segs); j++ {
		s := &w.segs[j]
		if s.asked && !s.complete() && int32(s.seq-seq) < 0 {
			if r.goBack(qp, w) {
				return
			}
			r.reask(qp, w, j)
		}
	}
}

// placeRead checks READ response packet p, the next packet of segment s of w, and
// copies its payload into w's buffer; it fails the QP when p is malformed.
func (r *requester) placeRead(qp *QueuePair, w *sendWQE, s *readSeg, p *roce.Packet) bool {
	// PSN and length decide where the bytes go. The packet must end the segment's
	// answer exactly when it is the segment's last one; whether another packet says
	// FIRST or MIDDLE depends on whether it answers the original request or one
	// asked again from the middle, and reordering can deliver either, so both are
	// accepted.
	pos := p.BTH.Opcode.Position()
	k := s.start + s.got
	endsMsg := pos == roce.PosLast || pos == roce.PosOnly
	off := k * qp.pmtu
	if endsMsg != (k == s.end-1) || len(p.Payload) != min(qp.pmtu, w.length-off) {
		qp.fail(WC_BAD_RESP_ERR)
		return false
	}
	w.sg.copyIn(p.Payload, off)
	s.got++
	if s.complete() && s.asked {
		s.asked = false
		r.rdInflight--
	}
	return true
}

// advance moves w.rcvd over the packets now received in order and reports whether
// it moved.
func (w *sendWQE) advance() bool {
	old := w.rcvd
	for j := w.segAt(w.rcvd); j >= 0 && j < len(w.segs) && w.segs[j].start <= w.rcvd; j++ {
		w.rcvd = w.segs[j].start + w.segs[j].got
		if !w.segs[j].complete() {
			break
		}
	}
	return w.rcvd != old
}
