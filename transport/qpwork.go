package transport

import (
	"net/netip"

	"github.com/xroce/xroce/roce"
)

// QueuePair is a Reliable Connected queue pair. Its methods may be called from any
// goroutine; the protocol state is the engine's, under the device lock.
type QueuePair struct {
	dev   *Device
	pd    *ProtectionDomain
	init  QPInitAttr
	qpn   uint32
	state QPState
	attr  QPAttr

	tmpl roce.Packet // Ethernet/IP/UDP/BTH template of this QP's packets
	peer netip.Addr
	pmtu int

	retryLeft, rnrRetryLeft uint8

	sq       ring[*sendWQE]
	rq       ring[*recvWQE]
	sqPool   []*sendWQE
	rqPool   []*recvWQE
	req      requester
	resp     responder
	counters *Counters
}

// sendWQE is a posted send work request as the requester tracks it.
type sendWQE struct {
	wr       SendWR
	sg       sgList
	inline   []byte
	length   int
	signaled bool
	status   WCStatus // a local error found at post time, else WC_SUCCESS

	assigned bool   // PSNs assigned (first transmission happened)
	firstPSN uint32 // PSN of the first request packet (READ: of the first response)
	npkts    int    // PSNs the message uses
	sent     int    // request packets sent in the current pass (READ, atomic: 0 or 1)
	rcvd     int    // READ response packets received
	done     bool
	result   uint64 // atomic original value
}

// recvWQE is a posted receive work request.
type recvWQE struct {
	wrid uint64
	sg   sgList
}

// Counters returns the QP's counters.
func (qp *QueuePair) Counters() *Counters { return qp.counters }

// PostSend posts send work requests in order. It returns the index of the first WR
// it could not post and an error: ErrQPState before RTS (in ERR the WRs are accepted
// and flushed), ErrQueueFull, ErrTooManySGE, ErrInline, ErrMsgSize or ErrBadWR
// (unknown opcode, or an atomic whose local buffer is not 8 bytes). A local key,
// access or bounds problem is not an error here: the WR completes with
// IBV_WC_LOC_PROT_ERR and the QP moves to ERR, as with an HCA.
func (qp *QueuePair) PostSend(wrs ...SendWR) (int, error) {
	d := qp.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range wrs {
		if err := qp.postSend(&wrs[i]); err != nil {
			return i, err
		}
	}
	d.wakeLoop()
	return len(wrs), nil
}

func (qp *QueuePair) postSend(wr *SendWR) error {
	switch qp.state {
	case QPS_RTS, QPS_SQD, QPS_ERR:
	default:
		return ErrQPState
	}
	if qp.sq.len() >= qp.init.Cap.MaxSendWR {
		return ErrQueueFull
	}
	if len(wr.SGList) > qp.init.Cap.MaxSendSGE {
		return ErrTooManySGE
	}
	if wr.Opcode > WR_ATOMIC_FETCH_AND_ADD {
		return ErrBadWR
	}
	var total uint64
	for _, e := range wr.SGList {
		total += uint64(e.Length)
	}
	if total > MaxMsgSize {
		return ErrMsgSize
	}
	if wr.Opcode.isAtomic() && total != 8 {
		return ErrBadWR
	}
	inline := wr.Flags&SendInline != 0 && (wr.Opcode == WR_SEND || wr.Opcode == WR_SEND_WITH_IMM ||
		wr.Opcode == WR_RDMA_WRITE || wr.Opcode == WR_RDMA_WRITE_WITH_IMM)
	if inline && int(total) > qp.init.Cap.MaxInlineData {
		return ErrInline
	}
	w := qp.newSendWQE()
	w.wr = *wr
	w.wr.SGList = nil
	w.length = int(total)
	w.signaled = qp.init.SigAll || wr.Flags&SendSignaled != 0
	need := Access(0)
	if wr.Opcode.isReadOrAtomic() {
		need = AccessLocalWrite
	}
	if inline {
		w.inline = w.inline[:0]
		for _, e := range wr.SGList {
			// Inline data is read straight from memory, as ibv_post_send does with the
			// SGE's address; here the address must lie in a region of this PD.
			var one sgList
			if !qp.dev.resolve([]SGE{e}, qp.pd, 0, &one) {
				w.status = WC_LOC_PROT_ERR
				break
			}
			for _, s := range one.segs {
				w.inline = append(w.inline, s...)
			}
		}
		w.sg.segs = append(w.sg.segs[:0], w.inline)
		w.sg.total = len(w.inline)
	} else if !qp.dev.resolve(wr.SGList, qp.pd, need, &w.sg) {
		w.status = WC_LOC_PROT_ERR
	}
	qp.sq.push(w)
	if qp.state == QPS_ERR {
		qp.flush()
	}
	return nil
}

// PostRecv posts receive work requests. Errors: ErrQPState in RESET, ErrQueueFull,
// ErrTooManySGE. A bad local key completes the WR with IBV_WC_LOC_PROT_ERR when a
// SEND arrives for it.
func (qp *QueuePair) PostRecv(wrs ...RecvWR) (int, error) {
	d := qp.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, wr := range wrs {
		if qp.state == QPS_RESET {
			return i, ErrQPState
		}
		if qp.rq.len() >= qp.init.Cap.MaxRecvWR {
			return i, ErrQueueFull
		}
		if len(wr.SGList) > qp.init.Cap.MaxRecvSGE {
			return i, ErrTooManySGE
		}
		r := qp.newRecvWQE()
		r.wrid = wr.WRID
		if !d.resolve(wr.SGList, qp.pd, AccessLocalWrite, &r.sg) {
			r.sg.total = -1 // marks a protection error, reported when used
		}
		qp.rq.push(r)
	}
	if qp.state == QPS_ERR {
		qp.flush()
	}
	d.wakeLoop()
	return len(wrs), nil
}

func (qp *QueuePair) newSendWQE() *sendWQE {
	if k := len(qp.sqPool); k > 0 {
		w := qp.sqPool[k-1]
		qp.sqPool = qp.sqPool[:k-1]
		segs, inl := w.sg.segs[:0], w.inline[:0]
		*w = sendWQE{}
		w.sg.segs, w.inline = segs, inl
		return w
	}
	return &sendWQE{}
}

func (qp *QueuePair) newRecvWQE() *recvWQE {
	if k := len(qp.rqPool); k > 0 {
		r := qp.rqPool[k-1]
		qp.rqPool = qp.rqPool[:k-1]
		r.sg.segs = r.sg.segs[:0]
		r.sg.total = 0
		return r
	}
	return &recvWQE{}
}

// completeHead pops the oldest send WQE and reports it when it is signaled or failed.
func (qp *QueuePair) completeHead(status WCStatus) {
	w := *qp.sq.at(0)
	qp.sq.popFront()
	if qp.req.next > 0 {
		qp.req.next--
	}
	if w.signaled || status != WC_SUCCESS {
		wc := WorkCompletion{WRID: w.wr.WRID, Status: status, Opcode: w.wr.Opcode.wcOpcode(), QPN: qp.qpn}
		if status == WC_SUCCESS {
			// rdma_rxe reports the work request's length for every send-side
			// completion (rxe_comp.c make_send_cqe: byte_len = wqe->dma.length), not
			// only for READ and atomics as the spec requires; do as it does.
			wc.ByteLen = uint32(w.length)
			if w.wr.Opcode.isAtomic() {
				wc.ByteLen = 8
			}
			// Both rdma_rxe and mlx5 flag a *_WITH_IMM request's completion
			// IBV_WC_WITH_IMM; its imm_data is undefined (rxe until 6.x leaves 0,
			// later rxe copies the request's): report the request's.
			if w.wr.Opcode == WR_SEND_WITH_IMM || w.wr.Opcode == WR_RDMA_WRITE_WITH_IMM {
				wc.HasImm, wc.ImmData = true, w.wr.ImmData
			}
		}
		qp.init.SendCQ.push(wc)
	}
	qp.sqPool = append(qp.sqPool, w)
}

// completeRecv pops the oldest receive WQE and reports it.
func (qp *QueuePair) completeRecv(wc WorkCompletion) {
	r := *qp.rq.at(0)
	qp.rq.popFront()
	wc.WRID = r.wrid
	wc.QPN = qp.qpn
	qp.init.RecvCQ.push(wc)
	qp.rqPool = append(qp.rqPool, r)
}

// toError moves the QP to ERR and flushes both queues (IBTA Vol 1 §10.3.1.4).
func (qp *QueuePair) toError() {
	qp.state = QPS_ERR
	qp.req.timer = timeZero
	qp.req.rnrUntil = timeZero
	qp.resp.out.clear()
	qp.flush()
}

// flush completes every outstanding WR with IBV_WC_WR_FLUSH_ERR.
func (qp *QueuePair) flush() {
	for qp.sq.len() > 0 {
		qp.completeHead(WC_WR_FLUSH_ERR)
	}
	qp.req.next = 0
	for qp.rq.len() > 0 {
		qp.completeRecv(WorkCompletion{Status: WC_WR_FLUSH_ERR, Opcode: WC_RECV})
	}
}

// fail completes the head WR with status, flushes the rest and moves to ERR.
func (qp *QueuePair) fail(status WCStatus) {
	if qp.sq.len() > 0 {
		qp.completeHead(status)
	}
	qp.toError()
}

// reset returns the QP to RESET: queues emptied without completions.
func (qp *QueuePair) reset() {
	qp.state = QPS_RESET
	for qp.sq.len() > 0 {
		qp.sqPool = append(qp.sqPool, *qp.sq.at(0))
		qp.sq.popFront()
	}
	for qp.rq.len() > 0 {
		qp.rqPool = append(qp.rqPool, *qp.rq.at(0))
		qp.rq.popFront()
	}
	qp.req = requester{}
	qp.resp = responder{}
}
