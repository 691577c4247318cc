package transport

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"

	"github.com/xroce/xroce/roce"
)

// responder is the receive side of an RC QP (IBTA Vol 1 §9.7.5.1; rdma_rxe
// rxe_resp.c): PSN checking, execution of SEND, WRITE, READ and atomics, ACK
// coalescing and the MSN.
type responder struct {
	epsn    uint32 // expected PSN
	msn     uint32 // messages completed, 24 bits
	nakSent bool   // a NAK PSN sequence error was sent for epsn

	inSend  bool   // inside a multi-packet SEND
	recvOff int    // bytes placed in the current receive WQE
	inWrite bool   // inside a multi-packet WRITE
	wbuf    []byte // the WRITE's target bytes
	woff    int    // bytes written so far
	dropMsg bool   // UC: dropping packets until the next FIRST or ONLY (unreliable.go)

	ackPending bool
	ackPSN     uint32

	// out holds responses waiting behind READ responses, in PSN order: a response
	// must never overtake the READ responses for earlier PSNs (§9.7.5.1.7).
	out     ring[response]
	history ring[rdRecord] // recent READ and atomic requests, for duplicates
}

// response is a queued response: an RDMA READ being answered (npkts > 0) or one
// ACKNOWLEDGE or ATOMIC_ACKNOWLEDGE packet.
type response struct {
	psn    uint32 // PSN of the (first) packet
	msn    uint32
	data   []byte // READ: the bytes to return
	npkts  int    // READ: response packets; 0 for a single ACK packet
	idx    int    // READ: next packet to send
	syn    roce.Syndrome
	atomic bool // ATOMIC_ACKNOWLEDGE with orig
	orig   uint64
}

// rdRecord remembers an executed READ or atomic request (rxe's responder resources).
type rdRecord struct {
	psn    uint32
	npkts  int
	msn    uint32
	atomic bool
	orig   uint64
}

func (r *responder) init(psn uint32) { *r = responder{epsn: psn} }

// request handles a request packet for qp.
func (r *responder) request(qp *QueuePair, p *roce.Packet) {
	psn := p.BTH.PSN
	switch diff := roce.PSNDiff(psn, r.epsn); {
	case diff > 0:
		qp.count(CntOutOfSeqRequest)
		if !r.nakSent {
			r.nakSent = true
			r.sendNAK(qp, roce.SyndromeNAKPSNSequenceError, r.epsn)
		}
		return
	case diff < 0:
		qp.count(CntDuplicateRequest)
		r.duplicate(qp, p)
		return
	}
	r.nakSent = false
	op := p.BTH.Opcode
	pos := op.Position()
	isSend, isWrite := op.Is(roce.ClassSend), op.Is(roce.ClassWrite)
	cont := pos == roce.PosMiddle || pos == roce.PosLast
	// Opcode sequence (§9.7.5.1.5): a message continues only what it belongs to.
	if (r.inSend && !(isSend && cont)) || (r.inWrite && !(isWrite && cont)) || (!r.inSend && !r.inWrite && cont) {
		r.invalid(qp, psn)
		return
	}
	// Payload length (§9.7.5.1.4 "Length"): FIRST and MIDDLE carry exactly one PMTU.
	pl := len(p.Payload)
	if pl > qp.pmtu { // the requester's path MTU is larger than ours
		qp.count(CntRcvdOversize)
	}
	switch pos {
	case roce.PosFirst, roce.PosMiddle:
		if pl < qp.pmtu { // the requester's path MTU is smaller than ours
			qp.count(CntRcvdUndersize)
		}
		if pl != qp.pmtu {
			r.invalid(qp, psn)
			return
		}
	default:
		if pl > qp.pmtu || (pos == roce.PosLast && pl == 0) {
			r.invalid(qp, psn)
			return
		}
	}
	switch {
	case isSend:
		if !r.send(qp, p) {
			return
		}
	case isWrite:
		if !r.write(qp, p) {
			return
		}
	case op.Is(roce.ClassRead):
		r.read(qp, p)
		return
	case op.Is(roce.ClassAtomic):
		r.atomic(qp, p)
		return
	default:
		r.invalid(qp, psn)
		return
	}
	if qp.fatal { // its completion was lost to a CQ overrun: no ACK; the QP fails
		return
	}
	r.epsn = roce.PSNNext(psn)
	if p.BTH.AckReq {
		r.scheduleAck(qp, psn)
	}
}

// hasRecv reports whether a receive WQE is posted; if not it sends an RNR NAK
// carrying min_rnr_timer (§9.7.5.1.6) and reports false.
func (r *responder) hasRecv(qp *QueuePair, psn uint32) bool {
	if qp.recvReady() {
		return true
	}
	qp.count(CntSendRNRErr)
	r.sendNAK(qp, roce.RNRNAKSyndrome(qp.attr.MinRNRTimer), psn)
	return false
}

// send places a SEND packet's payload into the current receive WQE.
func (r *responder) send(qp *QueuePair, p *roce.Packet) bool {
	psn := p.BTH.PSN
	pos := p.BTH.Opcode.Position()
	if pos == roce.PosFirst || pos == roce.PosOnly {
		if !r.hasRecv(qp, psn) {
			return false
		}
		r.recvOff = 0
	}
	rw := *qp.rq.at(0)
	if rw.sg.total < 0 { // the receive WR's local key was bad
		r.sendNAK(qp, roce.NAKSyndrome(roce.NAKRemoteOperationalError), psn)
		qp.completeRecv(WorkCompletion{Status: WC_LOC_QP_OP_ERR, Opcode: WC_RECV, solicited: p.BTH.SE})
		qp.toError()
		return false
	}
	if r.recvOff+len(p.Payload) > rw.sg.total {
		r.sendNAK(qp, roce.SyndromeNAKInvalidRequest, psn)
		qp.completeRecv(WorkCompletion{Status: WC_LOC_LEN_ERR, Opcode: WC_RECV, solicited: p.BTH.SE})
		qp.toError()
		return false
	}
	rw.sg.copyIn(p.Payload, r.recvOff)
	r.recvOff += len(p.Payload)
	r.inSend = pos == roce.PosFirst || pos == roce.PosMiddle
	if !r.inSend {
		wc := WorkCompletion{Status: WC_SUCCESS, Opcode: WC_RECV, ByteLen: uint32(r.recvOff), solicited: p.BTH.SE}
		if p.Headers&roce.HdrImmDt != 0 {
			wc.HasImm, wc.ImmData = true, uint32(p.ImmDt)
		}
		qp.completeRecv(wc)
		r.msn = (r.msn + 1) & roce.PSNMask
	}
	return true
}

// write places an RDMA WRITE packet's payload, checking the R_Key, access and bounds
// at the first packet (§9.7.5.1.3, §10.6.3).
func (r *responder) write(qp *QueuePair, p *roce.Packet) bool {
	psn := p.BTH.PSN
	pos := p.BTH.Opcode.Position()
	imm := p.Headers&roce.HdrImmDt != 0
	if qp.attr.AccessFlags&AccessRemoteWrite == 0 {
		// A QP that does not take RDMA WRITEs answers them as an opcode it does not
		// support, whatever their length: NAK Invalid Request (rxe_resp.c
		// check_op_valid, before any receive WQE is taken).
		r.invalid(qp, psn)
		return false
	}
	if imm && !r.hasRecv(qp, psn) {
		return false
	}
	if pos == roce.PosFirst || pos == roce.PosOnly {
		n := uint64(p.RETH.DMALen)
		if pos == roce.PosOnly && n != uint64(len(p.Payload)) || pos == roce.PosFirst && n <= uint64(qp.pmtu) {
			r.writeFailed(qp, p, roce.SyndromeNAKInvalidRequest, WC_REM_INV_REQ_ERR)
			return false
		}
		r.wbuf, r.woff = nil, 0
		if n > 0 {
			r.wbuf = qp.dev.mrs.remote(p.RETH.RKey, qp.pd, p.RETH.VA, n, AccessRemoteWrite)
			if r.wbuf == nil {
				r.writeFailed(qp, p, roce.SyndromeNAKRemoteAccessError, WC_REM_ACCESS_ERR)
				return false
			}
		}
	}
	if r.woff+len(p.Payload) > len(r.wbuf) {
		r.writeFailed(qp, p, roce.SyndromeNAKInvalidRequest, WC_REM_INV_REQ_ERR)
		return false
	}
	copy(r.wbuf[r.woff:], p.Payload)
	r.woff += len(p.Payload)
	r.inWrite = pos == roce.PosFirst || pos == roce.PosMiddle
	if !r.inWrite {
		if r.woff != len(r.wbuf) {
			r.writeFailed(qp, p, roce.SyndromeNAKInvalidRequest, WC_REM_INV_REQ_ERR)
			return false
		}
		if imm {
			qp.completeRecv(WorkCompletion{Status: WC_SUCCESS, Opcode: WC_RECV_RDMA_WITH_IMM,
				ByteLen: uint32(r.woff), HasImm: true, ImmData: uint32(p.ImmDt), solicited: p.BTH.SE})
		}
		r.msn = (r.msn + 1) & roce.PSNMask
		qp.count(CntRxWriteRequests)
		r.wbuf = nil
	}
	return true
}

// writeFailed ends an RDMA WRITE in error (a class C error, IBTA Vol 1 §9.9.3.1.3):
// the NAK with syn, and the QP to ERR. The packet that carries a WRITE's immediate
// data has taken a receive WQE before its checks, and that WQE completes with
// status; the rest are flushed (rxe_resp.c: check_resource before check_rkey,
// do_class_ac_error, do_complete).
func (r *responder) writeFailed(qp *QueuePair, p *roce.Packet, syn roce.Syndrome, status WCStatus) {
	r.sendNAK(qp, syn, p.BTH.PSN)
	if p.Headers&roce.HdrImmDt != 0 {
		qp.completeRecv(WorkCompletion{Status: status, Opcode: WC_RECV_RDMA_WITH_IMM, solicited: p.BTH.SE})
	}
	qp.toError()
}

// read accepts an RDMA READ request: the responses go out from Progress.
func (r *responder) read(qp *QueuePair, p *roce.Packet) {
	psn := p.BTH.PSN
	if qp.attr.AccessFlags&AccessRemoteRead == 0 {
		r.invalid(qp, psn) // check_op_valid, as for a WRITE
		return
	}
	if r.readsQueued() >= max(1, int(qp.attr.MaxDestRdAtomic)) {
		r.invalid(qp, psn) // more outstanding READs than max_dest_rd_atomic
		return
	}
	data, ok := r.readTarget(qp, p)
	if !ok {
		r.accessError(qp, psn)
		return
	}
	n := max(1, (len(data)+qp.pmtu-1)/qp.pmtu)
	r.msn = (r.msn + 1) & roce.PSNMask
	r.out.push(response{psn: psn, data: data, npkts: n, msn: r.msn})
	r.remember(qp, rdRecord{psn: psn, npkts: n, msn: r.msn})
	r.epsn = roce.PSNAdd(psn, n)
	qp.count(CntRxReadRequests)
}

func (r *responder) readTarget(qp *QueuePair, p *roce.Packet) ([]byte, bool) {
	n := uint64(p.RETH.DMALen)
	if n == 0 {
		return nil, true
	}
	b := qp.dev.mrs.remote(p.RETH.RKey, qp.pd, p.RETH.VA, n, AccessRemoteRead)
	return b, b != nil
}

// atomic executes COMPARE_SWAP or FETCH_ADD on 8 aligned bytes of host-order memory,
// atomically with respect to other users of that memory, and answers with the
// original value (§9.4.5).
func (r *responder) atomic(qp *QueuePair, p *roce.Packet) {
	psn := p.BTH.PSN
	at := &p.AtomicETH
	// rdma_rxe's order: the QP's access flags (NAK Invalid Request), the R_Key and
	// bounds (Remote Access Error), then the alignment (Invalid Request):
	// check_op_valid, check_rkey, atomic_reply in rxe_resp.c.
	if qp.attr.AccessFlags&AccessRemoteAtomic == 0 {
		r.invalid(qp, psn)
		return
	}
	b := qp.dev.mrs.remote(at.RKey, qp.pd, at.VA, 8, AccessRemoteAtomic)
	if b == nil {
		r.accessError(qp, psn)
		return
	}
	if at.VA&7 != 0 {
		r.invalid(qp, psn)
		return
	}
	orig := atomicOp(b, p.BTH.Opcode == roce.RC_FETCH_ADD, at.SwapAdd, at.Compare)
	r.msn = (r.msn + 1) & roce.PSNMask
	r.remember(qp, rdRecord{psn: psn, npkts: 1, msn: r.msn, atomic: true, orig: orig})
	r.epsn = roce.PSNNext(psn)
	qp.count(CntRxAtomicRequests)
	r.sendAtomicAck(qp, psn, r.msn, orig)
}

// remember keeps the last max_dest_rd_atomic READ/atomic requests.
func (r *responder) remember(qp *QueuePair, rec rdRecord) {
	for r.history.len() >= max(1, int(qp.attr.MaxDestRdAtomic)) {
		r.history.popFront()
	}
	r.history.push(rec)
}

// duplicate answers a request whose PSN was already executed (§9.7.5.1.2): SEND and
// WRITE are re-acknowledged, a READ is executed again from its PSN, and an atomic gets
// its saved result (it is never executed twice).
func (r *responder) duplicate(qp *QueuePair, p *roce.Packet) {
	psn := p.BTH.PSN
	var rec *rdRecord
	for i := r.history.len() - 1; i >= 0; i-- {
		h := r.history.at(i)
		if d := roce.PSNDiff(psn, h.psn); d >= 0 && int(d) < h.npkts {
			rec = h
			break
		}
	}
	switch p.BTH.Opcode {
	case roce.RC_RDMA_READ_REQUEST:
		data, ok := r.readTarget(qp, p)
		if !ok || rec == nil || rec.atomic {
			return // nothing we can answer; the requester's timer will notice
		}
		// The requester asks again from psn: drop what is queued of the READ that
		// holds psn (the rest of its answer), then answer after the READs queued
		// behind it, as rdma_rxe does (it answers requests in the order they
		// arrive). A go-back-N requester asks for those again too, each dropping
		// its queued answer in turn; one that splits a READ (readseg.go) keeps
		// them.
		for k := r.out.len() - 1; k >= 0; k-- {
			s := r.out.at(k)
			if d := roce.PSNDiff(psn, s.psn); s.npkts > 0 && d >= 0 && int(d) < s.npkts {
				r.dropOut(k)
			}
		}
		n := max(1, (len(data)+qp.pmtu-1)/qp.pmtu)
		r.out.push(response{psn: psn, data: data, npkts: n, msn: rec.msn})
	case roce.RC_COMPARE_SWAP, roce.RC_FETCH_ADD:
		if rec != nil && rec.atomic && rec.psn == psn {
			r.sendAtomicAck(qp, psn, rec.msn, rec.orig)
		}
	default:
		r.scheduleAck(qp, roce.PSNAdd(r.epsn, -1))
	}
}

// dropOut removes the queued response at index k, keeping the order of the others.
func (r *responder) dropOut(k int) {
	for i := k; i > 0; i-- {
		*r.out.at(i) = *r.out.at(i - 1)
	}
	r.out.popFront()
}

// readsQueued counts the READs being answered.
func (r *responder) readsQueued() int {
	n := 0
	for i := 0; i < r.out.len(); i++ {
		if r.out.at(i).npkts > 0 {
			n++
		}
	}
	return n
}

// respond sends a single-packet response now, or queues it behind READ responses.
func (r *responder) respond(qp *QueuePair, rs response) {
	if r.out.len() > 0 {
		r.out.push(rs)
		return
	}
	r.emit(qp, &rs)
}

// emit sends one ACKNOWLEDGE or ATOMIC_ACKNOWLEDGE.
func (r *responder) emit(qp *QueuePair, rs *response) {
	op := roce.RC_ACKNOWLEDGE
	if rs.atomic {
		op = roce.RC_ATOMIC_ACKNOWLEDGE
	}
	p := qp.dev.start(qp, op, rs.psn)
	p.AETH = roce.AETH{Syndrome: rs.syn, MSN: rs.msn}
	p.AtomicAckETH = roce.AtomicAckETH{OrigRemData: rs.orig}
	qp.dev.emit(qp)
}

// scheduleAck arranges one ACK at the end of the receive batch; ACKs for several
// packets of one batch coalesce into the last.
func (r *responder) scheduleAck(qp *QueuePair, psn uint32) {
	if r.ackPending {
		qp.count(CntAckDeferred)
	} else {
		qp.dev.acks = append(qp.dev.acks, qp)
	}
	r.ackPending, r.ackPSN = true, psn
}

// sendAck sends the coalesced ACK (or queues it behind READ responses).
func (r *responder) sendAck(qp *QueuePair) {
	if !r.ackPending || qp.state == QPS_ERR {
		r.ackPending = false
		return
	}
	r.ackPending = false
	r.respond(qp, response{psn: r.ackPSN, msn: r.msn, syn: roce.SyndromeACK})
}

// sendNAK sends an ACKNOWLEDGE with a NAK or RNR NAK syndrome, after any pending ACK.
func (r *responder) sendNAK(qp *QueuePair, syn roce.Syndrome, psn uint32) {
	r.sendAck(qp)
	r.respond(qp, response{psn: psn, msn: r.msn, syn: syn})
}

func (r *responder) sendAtomicAck(qp *QueuePair, psn, msn uint32, orig uint64) {
	r.sendAck(qp)
	r.respond(qp, response{psn: psn, msn: msn, syn: roce.SyndromeACK, atomic: true, orig: orig})
}

// invalid NAKs an invalid request and moves the QP to ERR (class C error, §9.9.3.1).
func (r *responder) invalid(qp *QueuePair, psn uint32) {
	r.sendNAK(qp, roce.SyndromeNAKInvalidRequest, psn)
	qp.toError()
}

// accessError NAKs a remote access error and moves the QP to ERR (§9.9.3.1.3).
func (r *responder) accessError(qp *QueuePair, psn uint32) {
	r.sendNAK(qp, roce.SyndromeNAKRemoteAccessError, psn)
	qp.toError()
}

// readStep sends up to budget queued response packets, READ responses and the
// responses queued behind them, in order.
func (r *responder) readStep(qp *QueuePair, budget int) bool {
	if qp.state == QPS_ERR || qp.state < QPS_RTR {
		return false
	}
	did := false
	for budget > 0 && r.out.len() > 0 {
		s := r.out.at(0)
		if s.npkts == 0 {
			r.emit(qp, s)
			r.out.popFront()
			budget--
			did = true
			continue
		}
		if !qp.paced() {
			break // DCQCN's pacer: the QP's timer wakes it
		}
		op, _ := roce.ReadResponseOpcode(s.idx, s.npkts) // s.idx < s.npkts
		p := qp.dev.start(qp, op, roce.PSNAdd(s.psn, s.idx))
		off := s.idx * qp.pmtu
		p.Payload = s.data[off:min(off+qp.pmtu, len(s.data))]
		p.AETH = roce.AETH{Syndrome: roce.SyndromeACK, MSN: s.msn}
		qp.charge(qp.dev.emit(qp))
		s.idx++
		if s.idx == s.npkts {
			r.out.popFront()
		}
		budget--
		did = true
	}
	return did
}

// atomicOp applies FETCH_ADD (add) or COMPARE_SWAP (swap if equal to cmp) to the
// host-order uint64 in b[0:8] and returns the original value. Aligned memory is
// updated with CPU atomics; a region registered at an IOVA that misaligns it (replays
// only) is updated by the engine loop alone.
func atomicOp(b []byte, fetchAdd bool, v, cmp uint64) uint64 {
	if uintptr(unsafe.Pointer(&b[0]))&7 != 0 {
		orig := binary.NativeEndian.Uint64(b)
		switch {
		case fetchAdd:
			binary.NativeEndian.PutUint64(b, orig+v)
		case orig == cmp:
			binary.NativeEndian.PutUint64(b, v)
		}
		return orig
	}
	ptr := (*uint64)(unsafe.Pointer(&b[0]))
	if fetchAdd {
		return atomic.AddUint64(ptr, v) - v
	}
	for {
		orig := atomic.LoadUint64(ptr)
		if orig != cmp || atomic.CompareAndSwapUint64(ptr, orig, v) {
			return orig
		}
	}
}
