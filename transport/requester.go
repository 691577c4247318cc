package transport

import (
	"encoding/binary"
	"time"

	"github.com/xroce/xroce/roce"
)

var timeZero time.Time

// requester is the send side of an RC QP and its completer (IBTA Vol 1 §9.7.4 and
// §9.7.5.1-2; rdma_rxe rxe_req.c and rxe_comp.c). Retransmission is go-back-N from
// the oldest unacknowledged PSN, as rdma_rxe and mlx5 do; a congestion window
// (cwnd.go) bounds how far ahead it sends, and retransmission is timed from the
// measured round trip (rtt.go).
type requester struct {
	psn        uint32        // PSN of the next WQE's first packet
	compPSN    uint32        // oldest PSN not yet acknowledged
	next       int           // index in the SQ of the WQE being sent
	rdInflight int           // READ requests (segments, readseg.go) and atomics sent and not complete
	reqSeq     uint32        // READ requests sent so far: their order (readseg.go)
	noack      int           // packets sent since the last AckReq
	timer      time.Time     // earliest of rtoAt, ackBy and probeAt: the QP's retransmit deadline in the timer heap
	rtoAt      time.Time     // adaptive retransmission deadline (rtt.go); zero when not running
	probeAt    time.Time     // tail-loss probe deadline (probe.go); zero when not running
	probed     bool          // the probe went out: none again until the requester moves on
	ackBy      time.Time     // local ACK timeout deadline, which spends retry_cnt; zero when not running
	idleFrom   time.Time     // when the requester was left with nothing to send; zero while it has work
	idleFor    time.Duration // the last idle period, until the next step looks at it (idleRestart)
	rnrUntil   time.Time     // end of an RNR NAK wait; zero when none
	sentPSN    uint32        // one past the highest PSN sent (READ: its last response PSN)
	retryPSN   uint32        // PSN the last retry went back to
	retrying   bool          // a retry is under way and nothing was acknowledged since
	rnrProbe   bool          // after an RNR NAK: send one packet, then wait for its answer
	frto       bool          // after an adaptive RTO: send one packet, then wait for its answer (spurious.go)
	probeSent  bool          // the RNR probe is out
	readGap    bool          // retrying after an implied NAK: the responder still streams older responses
	staleLast  uint32        // the last PSN of that stream
	staleHigh  uint32        // the highest PSN of that stream seen so far
	staleDone  bool          // it has ended: the adaptive timer may run again
	staleFrom  time.Time     // when the implied NAK came
	staleAt    time.Time     // when the stream's newest packet came
	staleN     int           // its packets since the implied NAK: their spacing times the adaptive timer meanwhile
	lossAt     time.Time     // the last loss signal (NAK sequence error, implied NAK, timeout)
	path       *peerPath     // the loss state shared with the device's other QPs to the peer (peerpath.go)
	started    bool          // the first work went out (sharedStart)
	belowUntil time.Time     // until then the QP counts as below its share of the path (queueing.go)
	undo       rtoUndo       // what the last adaptive RTO changed, until the first answer after it (spurious.go)
	win        window
	rtt        rttEstimator
}

func (r *requester) init(psn uint32, path *peerPath) {
	*r = requester{psn: psn, compPSN: psn, sentPSN: psn, path: path}
	r.win.init(psn)
	r.rtt.karnFrom = psn
}

// sentUpTo records that PSNs before end have been sent.
func (r *requester) sentUpTo(end uint32) {
	if roce.PSNDiff(end, r.sentPSN) > 0 {
		r.sentPSN = end
	}
}

// packets returns how many PSNs a WQE's message uses at the path MTU.
func packets(w *sendWQE, pmtu int) int {
	if w.wr.Opcode.isAtomic() {
		return 1
	}
	return max(1, (w.length+pmtu-1)/pmtu)
}

// step sends up to budget request packets and reports whether it sent any.
func (r *requester) step(qp *QueuePair, budget int) bool {
	if qp.state != QPS_RTS && qp.state != QPS_SQD {
		return false
	}
	if qp.svc != roce.ServiceRC {
		return r.stepUnreliable(qp, budget)
	}
	d := qp.dev
	if !r.rnrUntil.IsZero() {
		if d.now.Before(r.rnrUntil) {
			return false
		}
		r.rnrUntil = timeZero
	}
	if r.rnrProbe || r.frto {
		// After an RNR NAK only the NAKed message's first packet goes out, with
		// AckReq, until the responder answers it: a responder still out of receives
		// costs one packet per RNR period, not the whole window each time. After an
		// adaptive RTO the oldest unacknowledged packet goes out alone the same way
		// (spurious.go).
		if r.probeSent {
			return false
		}
		budget = min(budget, 1)
	}
	if !r.started && r.next < qp.sq.len() {
		r.started = true
		r.sharedStart(qp)
	}
	if !r.hasOutstanding(qp) && r.next < qp.sq.len() {
		r.idleRestart(qp)
	}
	did := false
	maxRd := max(1, int(qp.attr.MaxRdAtomic))
	for budget > 0 && r.next < qp.sq.len() && qp.paced() {
		w := *qp.sq.at(r.next)
		if w.status != WC_SUCCESS {
			if r.next == 0 { // a local error completes in order, then the QP fails
				qp.fail(w.status)
				return true
			}
			break
		}
		rdAt := w.wr.Opcode.isReadOrAtomic()
		if !d.ownDst(qp.local) && (w.assigned || qp.state == QPS_RTS) {
			// The QP's source address left the interface: rdma_rxe cannot route
			// from it (rxe_req.c: rxe_prepare finds no route, or rxe_xmit_packet
			// fails) and completes the WQE it was sending, or sending again after a
			// timeout, with IBV_WC_LOC_QP_OP_ERR, the QP going to the error state.
			w.status = WC_LOC_QP_OP_ERR
			continue
		}
		if !w.assigned {
			if qp.state != QPS_RTS || r.win.full(r.psn, r.compPSN) || (rdAt && r.rdInflight >= maxRd) {
				break
			}
			w.assigned = true
			w.firstPSN = r.psn
			w.npkts = packets(w, qp.pmtu)
			r.psn = roce.PSNAdd(r.psn, w.npkts)
		} else if w.wr.Opcode.isAtomic() && r.win.full(w.firstPSN, r.compPSN) {
			break // an atomic asked again waits for room like a new one
		}
		if w.wr.Opcode == WR_RDMA_READ {
			n, all := r.stepRead(qp, w, budget, maxRd)
			budget -= n
			did = did || n > 0
			if !all {
				break // out of budget, window or max_rd_atomic: an answer schedules the QP
			}
			r.next++
			continue
		}
		if rdAt {
			r.sendAtomic(qp, w)
			r.sentUpTo(roce.PSNAdd(w.firstPSN, w.npkts))
			r.rdInflight++
			w.sent = 1
			r.next++
			budget--
			did = true
		} else {
			for budget > 0 && w.sent < w.npkts {
				psn := roce.PSNAdd(w.firstPSN, w.sent)
				if r.win.full(psn, r.compPSN) || !qp.paced() {
					break
				}
				r.sendData(qp, w, w.sent, budget == 1 || r.win.fills(psn, r.compPSN))
				r.sentUpTo(roce.PSNNext(psn))
				w.sent++
				budget--
				did = true
			}
			if w.sent < w.npkts {
				// Out of budget (the QP stays ready) or out of window: an answer
				// schedules the QP again (Device.input), so it need not spin.
				break
			}
			r.next++
		}
	}
	if did && (r.rnrProbe || r.frto) {
		r.probeSent = true
	}
	return did // the timers start when the packets leave (departed)
}

// emit queues the request packet in d.txPkt; psn is its PSN (a READ request's: the
// first response PSN it asks for).
func (r *requester) emit(qp *QueuePair, psn uint32) {
	d := qp.dev
	d.txNext = txInfo{qp: qp, psn: psn, ackReq: d.txPkt.BTH.AckReq}
	qp.charge(d.emit(qp))
}

// dataOpcode returns the opcode of packet i of n of a SEND or WRITE.
func dataOpcode(wop WROpcode, i, n int) roce.Opcode {
	op, _ := roce.NextOpcode(roce.ServiceRC, wop.operation(), i, n) // RC carries every WROpcode
	return op
}

// fillData sets packet i's payload (that segment of the WR's data), its RETH and
// ImmDt where opcode op carries them, and SE on the last packet of a solicited
// WR: what RC, UC and UD data packets share.
func (d *Device) fillData(p *roce.Packet, qp *QueuePair, w *sendWQE, i int, op roce.Opcode) {
	off := i * qp.pmtu
	n := min(qp.pmtu, w.length-off)
	if b, ok := w.sg.contiguous(off, n); ok {
		p.Payload = b
	} else {
		p.Payload = d.scratch[:n]
		w.sg.copyOut(p.Payload, off)
	}
	h := op.Headers()
	if h&roce.HdrRETH != 0 {
		p.RETH = roce.RETH{VA: w.wr.RemoteAddr, RKey: w.wr.RKey, DMALen: uint32(w.length)}
	}
	if h&roce.HdrImmDt != 0 {
		p.ImmDt = roce.ImmDt(w.wr.ImmData)
	}
	p.BTH.SE = i == w.npkts-1 && w.wr.Flags&SendSolicited != 0
}

// sendData builds packet i of a SEND or RDMA WRITE. It asks for an ACK on the last
// packet of the message, every ackEvery packets, on an RNR probe, and when pause
// is set: the pass's transmit budget or the window ends with this packet. The QP's
// next turn may then come only after the other ready QPs have had theirs
// (sched.go), so the packets it sent must not wait for that turn's AckReq to be
// acknowledged: with eight QPs of 64 KiB WRITEs, a QP with a small window left the
// packets after its last AckReq unacknowledged until its next turn, a millisecond
// later, and its adaptive RTO expired first, window after window.
func (r *requester) sendData(qp *QueuePair, w *sendWQE, i int, pause bool) {
	d := qp.dev
	op := dataOpcode(w.wr.Opcode, i, w.npkts)
	p := d.start(qp, op, roce.PSNAdd(w.firstPSN, i))
	d.fillData(p, qp, w, i, op)
	last := i == w.npkts-1
	r.noack++
	if last || pause || r.noack >= r.win.ackEvery() || r.rnrProbe || r.frto {
		p.BTH.AckReq = true
		r.noack = 0
	}
	r.emit(qp, roce.PSNAdd(w.firstPSN, i))
}

// sendAtomic builds the request of an atomic (READ requests: askSeg).
func (r *requester) sendAtomic(qp *QueuePair, w *sendWQE) {
	d := qp.dev
	op := roce.RC_FETCH_ADD
	at := roce.AtomicETH{VA: w.wr.RemoteAddr, RKey: w.wr.RKey, SwapAdd: w.wr.CompareAdd}
	if w.wr.Opcode == WR_ATOMIC_CMP_AND_SWP {
		op = roce.RC_COMPARE_SWAP
		at.SwapAdd, at.Compare = w.wr.Swap, w.wr.CompareAdd
	}
	p := d.start(qp, op, w.firstPSN)
	p.AtomicETH = at
	p.BTH.AckReq = true
	r.emit(qp, w.firstPSN)
}

// find returns the SQ index of the sent WQE whose PSNs include psn, or -1.
func (r *requester) find(qp *QueuePair, psn uint32) int {
	for i := 0; i < qp.sq.len(); i++ {
		w := *qp.sq.at(i)
		if !w.assigned {
			return -1
		}
		if d := roce.PSNDiff(psn, w.firstPSN); d >= 0 && int(d) < w.npkts {
			return i
		}
	}
	return -1
}

// rewind goes back to resend from psn: the WQE holding it and every later one
// (go-back-N, IBTA Vol 1 §9.7.5.1.2).
func (r *requester) rewind(qp *QueuePair, psn uint32) {
	i := r.find(qp, psn)
	if i < 0 {
		return
	}
	qp.count(CntCompleterRetryErr)
	for j := i; j < qp.sq.len() && j < r.next+1; j++ {
		w := *qp.sq.at(j)
		if !w.assigned {
			break
		}
		if w.wr.Opcode == WR_RDMA_READ {
			r.unask(w)
		} else if w.wr.Opcode.isAtomic() && w.sent == 1 && !w.done {
			r.rdInflight--
		}
		w.sent = 0
	}
	w := *qp.sq.at(i)
	if !w.wr.Opcode.isReadOrAtomic() {
		w.sent = int(roce.PSNDiff(psn, w.firstPSN))
	}
	r.next = i
	r.noack = 0
	r.stopTimers() // they start again when the retransmission leaves
	r.retrying, r.retryPSN = true, psn
	r.probeSent, r.frto = false, false
	r.undo.at = 0              // a loss, an RNR NAK or a timeout: no earlier RTO is undone after this
	r.rtt.karnFrom = r.sentPSN // Karn: an answer for a PSN before it may be to either copy
	r.readGap = false
}

// skipAcked moves the send position of the head WQE, a SEND or WRITE being sent
// again after a go-back, past the PSNs just acknowledged: the responder has every
// PSN before compPSN (it acknowledges none out of order), so sending them again
// would only draw duplicate ACKs. It happens after a spurious RTO, whose first
// answer acknowledges originals sent before the go-back (spurious.go).
func (r *requester) skipAcked(qp *QueuePair) {
	w := *qp.sq.at(0)
	if r.next != 0 || w.wr.Opcode.isReadOrAtomic() {
		return
	}
	if k := int(roce.PSNDiff(r.compPSN, w.firstPSN)); k > w.sent && k <= w.npkts {
		w.sent = k
	}
}

// hasOutstanding reports whether some sent request awaits its response.
func (r *requester) hasOutstanding(qp *QueuePair) bool {
	return qp.sq.len() > 0 && (*qp.sq.at(0)).assigned
}

// awaiting reports whether PSNs are in flight: sent (READ: asked for) and not
// acknowledged. Only then do the retransmit timers run, as rdma_rxe's completer
// re-arms its timer only while req.psn is past comp.psn (rxe_comp.c): a requester
// whose head WQE still has packets to send, all it sent acknowledged, is waiting
// for its turn to send, not for the responder.
func (r *requester) awaiting(qp *QueuePair) bool {
	return r.hasOutstanding(qp) && r.inflight() > 0
}

// progress records forward progress: the retry budgets refill (rxe_comp.c does the
// same), the timed packet gives its RTT sample, the window grows, and the
// retransmit timers restart or stop.
func (r *requester) progress(qp *QueuePair) {
	qp.retryLeft, qp.rnrRetryLeft = qp.attr.RetryCnt, qp.attr.RNRRetry
	r.retrying = false
	r.rnrProbe, r.frto = false, false
	r.readGap = false
	r.probed = false
	r.rtt.backoff = 0
	r.acked(qp)
	r.stopTimers()
	r.startTimers(qp)
	r.idleStarts(qp)
}

// ackUpTo handles an acknowledgement of every PSN up to and including psn. It
// completes the WQEs it covers in order. A READ or atomic it covers without its
// response means the response was lost: it rewinds to that request (an implied NAK)
// and reports true.
func (r *requester) ackUpTo(qp *QueuePair, psn uint32) (rewound bool) {
	moved := false
	for qp.sq.len() > 0 {
		w := *qp.sq.at(0)
		if !w.assigned {
			break
		}
		last := roce.PSNAdd(w.firstPSN, w.npkts-1)
		if w.wr.Opcode.isReadOrAtomic() && !w.done {
			// Acknowledging a PSN not yet received, the responder has sent it.
			if roce.PSNDiff(psn, roce.PSNAdd(w.firstPSN, w.rcvd)) >= 0 {
				r.impliedNak(qp, roce.PSNAdd(w.firstPSN, w.rcvd))
				rewound = true
			}
			break
		}
		if roce.PSNDiff(last, psn) > 0 {
			break // partly acknowledged
		}
		if w.wr.Opcode.isAtomic() { // a READ's segments left max_rd_atomic as they completed
			r.rdInflight--
		}
		qp.completeHead(WC_SUCCESS)
		r.compPSN = roce.PSNNext(last)
		moved = true
	}
	if !rewound && qp.sq.len() > 0 && (*qp.sq.at(0)).assigned {
		next := roce.PSNNext(psn)
		if roce.PSNDiff(next, r.compPSN) > 0 {
			r.compPSN = next
			moved = true
		}
		r.skipAcked(qp)
	}
	if moved {
		r.progress(qp)
	}
	return rewound
}

// complete is the completer: it handles one response packet (IBTA Vol 1 §9.7.5.2).
func (r *requester) complete(qp *QueuePair, p *roce.Packet) {
	psn := p.BTH.PSN
	if roce.PSNDiff(psn, r.sentPSN) >= 0 { // a response for a PSN never sent
		qp.count(CntGhostAck)
		return
	}
	if r.readGap && !r.staleDone && (roce.PSNDiff(psn, r.staleLast) >= 0 || roce.PSNDiff(psn, r.staleHigh) <= 0) {
		// The stream asked before the implied NAK has ended: its last PSN came, or
		// an answer began again below what it had reached (its PSNs only grow; its
		// tail may have been lost).
		r.staleDone = true
	}
	if r.readGap && !r.staleDone && roce.PSNDiff(psn, r.staleHigh) > 0 {
		r.staleAt = qp.dev.now // the stream goes on: its pacing times the adaptive timer
		r.staleN++
	}
	if !r.timer.IsZero() {
		// Any response restarts the running retransmit timers, as rxe_comp.c does
		// (mod_timer on leaving the completer with requests outstanding): they
		// measure silence from the responder. A responder still streaming READ
		// responses from before a retry (the rest of the READ that lost a packet,
		// then later READs' first answers, all discarded here) answers the
		// requests asked again after them; a timeout in the meantime would spend
		// retry_cnt and queue yet another copy of every READ behind them.
		r.restartTimers(qp)
	}
	if roce.PSNDiff(psn, r.compPSN) < 0 || !r.hasOutstanding(qp) {
		qp.count(CntStaleAck)
		return
	}
	switch p.BTH.Opcode {
	case roce.RC_ACKNOWLEDGE:
		r.aeth(qp, psn, p.AETH.Syndrome)
	case roce.RC_ATOMIC_ACKNOWLEDGE:
		r.atomicAck(qp, psn, p.AtomicAckETH.OrigRemData)
	default:
		r.readResponse(qp, p)
	}
	if r.readGap && roce.PSNDiff(psn, r.staleLast) >= 0 {
		r.staleDone = true // the response that showed the gap ended the stream
	}
	if r.readGap && roce.PSNDiff(psn, r.staleHigh) > 0 {
		r.staleHigh = psn
	}
}

// aeth handles an ACKNOWLEDGE: ACK, RNR NAK or NAK (IBTA Vol 1 §9.7.5.2.1-2).
func (r *requester) aeth(qp *QueuePair, psn uint32, syn roce.Syndrome) {
	d := qp.dev
	switch syn.Kind() {
	case roce.KindACK:
		r.ackUpTo(qp, psn)
		return
	case roce.KindRNRNAK:
		qp.count(CntRcvdRNRErr)
		if r.ackUpTo(qp, roce.PSNAdd(psn, -1)) {
			return
		}
		if qp.rnrRetryLeft == 0 {
			qp.count(CntRetryRNRExceededErr)
			qp.fail(WC_RNR_RETRY_EXC_ERR)
			return
		}
		if qp.rnrRetryLeft != 7 { // 7 means retry forever
			qp.rnrRetryLeft--
		}
		r.rewind(qp, psn)
		r.rnrProbe = true
		r.rnrUntil = d.now.Add(roce.RNRTimerDelay(syn.Value()))
		d.armed(qp, r.rnrUntil)
		return
	case roce.KindNAK:
		if r.ackUpTo(qp, roce.PSNAdd(psn, -1)) {
			return
		}
		switch syn.Value() {
		case roce.NAKPSNSequenceError:
			qp.count(CntRcvdSeqErr)
			if r.retrying && r.retryPSN == psn {
				// Already going back to psn (after an RNR NAK, or an earlier NAK
				// for the same sequence): the responder NAKs the packets that were
				// in flight behind it. Like rdma_rxe's completer, do not start
				// another retry, and do not spend retry_cnt on it.
				return
			}
			if qp.retryLeft == 0 {
				qp.count(CntRetryExceededErr)
				qp.fail(WC_RETRY_EXC_ERR)
				return
			}
			qp.retryLeft--
			r.sampleRTT(qp, roce.PSNNext(psn), false) // the NAK answers the packet after the gap
			r.rtt.backoff, r.probed = 0, false        // the responder answers: no backoff (rtt.go), a probe again (probe.go)
			r.win.loss(r.sentPSN, r.compPSN)
			r.lost(qp)
			r.rewind(qp, psn)
		case roce.NAKRemoteAccessError:
			qp.fail(WC_REM_ACCESS_ERR)
		case roce.NAKRemoteOperationalError:
			qp.fail(WC_REM_OP_ERR)
		default:
			qp.fail(WC_REM_INV_REQ_ERR)
		}
	default: // reserved syndrome: ignore the packet
		qp.count(CntRcvdMalformed)
	}
}

// before completes the WQEs ahead of index i, which a response for WQE i implicitly
// acknowledges; it reports false if one of them is a READ or atomic still missing its
// response (then it has rewound to it).
func (r *requester) before(qp *QueuePair, i int) bool {
	for ; i > 0; i-- {
		w := *qp.sq.at(0)
		if w.wr.Opcode.isReadOrAtomic() && !w.done {
			r.impliedNak(qp, roce.PSNAdd(w.firstPSN, w.rcvd))
			return false
		}
		if w.wr.Opcode.isAtomic() {
			r.rdInflight--
		}
		r.compPSN = roce.PSNAdd(w.firstPSN, w.npkts)
		qp.completeHead(WC_SUCCESS)
	}
	return true
}

// atomicAck handles an ATOMIC_ACKNOWLEDGE: the original value goes to the WR's
// 8-byte local buffer in host byte order, as verbs leaves it.
func (r *requester) atomicAck(qp *QueuePair, psn uint32, orig uint64) {
	i := r.find(qp, psn)
	if i < 0 || !(*qp.sq.at(i)).wr.Opcode.isAtomic() || (*qp.sq.at(i)).firstPSN != psn {
		qp.count(CntStaleAck)
		return
	}
	if !r.before(qp, i) {
		return
	}
	w := *qp.sq.at(0)
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], orig)
	w.sg.copyIn(b[:], 0)
	w.result = orig
	w.done = true
	r.ackUpTo(qp, psn)
}

// readResponse handles RDMA READ response packets, in PSN order within each READ
// request; a gap makes the requester ask again from the first missing PSN (IBTA Vol 1
// §9.7.5.2.7 implied NAK): to the end of that segment in a split WR (readseg.go).
func (r *requester) readResponse(qp *QueuePair, p *roce.Packet) {
	psn := p.BTH.PSN
	i := r.find(qp, psn)
	if i < 0 || (*qp.sq.at(i)).wr.Opcode != WR_RDMA_READ {
		qp.count(CntStaleAck)
		return
	}
	w := *qp.sq.at(i)
	off := int(roce.PSNDiff(psn, w.firstPSN))
	j := w.segAt(off)
	if j < 0 || off < w.segs[j].start+w.segs[j].got {
		qp.count(CntStaleAck)
		return
	}
	if !r.before(qp, i) {
		return
	}
	s := &w.segs[j]
	if off > s.start+s.got {
		r.segGap(qp, w, j, psn)
		return
	}
	first := s.asked && s.got == s.from
	if !r.placeRead(qp, w, s, p) {
		return
	}
	if first {
		r.answered(qp, w, s.seq)
	}
	if !w.advance() {
		qp.retryLeft, qp.rnrRetryLeft = qp.attr.RetryCnt, qp.attr.RNRRetry // progress, out of order
		return
	}
	r.compPSN = roce.PSNAdd(w.firstPSN, w.rcvd)
	if w.rcvd == w.npkts {
		w.done = true
		r.ackUpTo(qp, roce.PSNAdd(w.firstPSN, w.npkts-1))
		return
	}
	r.progress(qp)
}

// impliedNak retries from psn, the first READ response or atomic response found
// missing (§9.7.5.2.7). Responses still in flight from before the retry would find
// the same gap again; until progress is made, they are ignored.
func (r *requester) impliedNak(qp *QueuePair, psn uint32) {
	if r.retrying && r.retryPSN == psn {
		return
	}
	qp.count(CntImpliedNak)
	r.win.loss(r.sentPSN, r.compPSN)
	r.lost(qp)
	r.rewind(qp, psn)
	// The responder still sends what was asked before (up to the highest PSN sent)
	// before it answers the request asked again: the adaptive timer waits for it.
	r.staleGap(qp.dev.now, psn)
}

// staleGap notes that the responder is still sending the responses asked before an
// implied NAK for psn, up to the highest PSN sent: the adaptive timer waits for
// them.
func (r *requester) staleGap(now time.Time, psn uint32) {
	r.readGap, r.staleLast, r.staleHigh, r.staleDone = true, roce.PSNAdd(r.sentPSN, -1), psn, false
	r.staleFrom, r.staleN = now, 0
}

// timers runs the QP's retransmit timers (rtt.go). When the local ACK timeout
// passes it retries from the oldest unacknowledged PSN, or fails the WR with
// IBV_WC_RETRY_EXC_ERR when retry_cnt is spent. When the adaptive RTO passes first it
// retries from there too, without spending retry_cnt, and the local ACK timeout keeps
// running.
func (qp *QueuePair) timers(now time.Time) bool {
	r := &qp.req
	if r.timer.IsZero() || now.Before(r.timer) || qp.state == QPS_ERR {
		return false
	}
	if !r.awaiting(qp) {
		r.stopTimers()
		return false
	}
	if !r.ackBy.IsZero() && !now.Before(r.ackBy) {
		r.stopTimers()
		qp.count(CntLocalAckTimeoutErr)
		if qp.retryLeft == 0 {
			qp.count(CntRetryExceededErr)
			qp.fail(WC_RETRY_EXC_ERR)
			return true
		}
		qp.retryLeft--
		r.timeout(qp)
		return true
	}
	if !r.probeAt.IsZero() && !now.Before(r.probeAt) && (r.rtoAt.IsZero() || now.Before(r.rtoAt)) {
		r.tailProbe(qp)
		r.setTimer(qp)
		return true
	}
	if r.rtoAt.IsZero() || now.Before(r.rtoAt) {
		r.setTimer(qp) // cannot happen: timer is the earliest of the three
		return false
	}
	qp.count(CntRoceAdpRetrans)
	ackBy := r.ackBy
	r.adaptiveTimeout(qp)
	r.ackBy = ackBy
	r.setTimer(qp)
	return true
}

// timeout goes back to the oldest unacknowledged PSN after a retransmission timeout:
// the window drops to one packet and the RTO backs off.
func (r *requester) timeout(qp *QueuePair) {
	r.win.timeout(r.sentPSN, r.compPSN)
	r.lost(qp)
	r.rtt.backoff++
	r.rewind(qp, r.compPSN)
}
