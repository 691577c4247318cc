package transport

import "github.com/xroce/xroce/roce"

// Posting hands work requests to the engine without waiting for it: PostSend and
// PostRecv check and resolve a request, append it to the QP's pending list under the
// QP's own post lock, put the QP on the device's posted list and wake the loop. The
// engine takes pending requests into its send and receive queues at the start of a
// pass, and whenever a SEND finds the receive queue empty. Neither side holds a lock
// for longer than a few appends, so a post never waits for an engine pass (rdma_rxe's
// user-space SQ and RQ rings play this part: rxe_post_send, rxe_queue.h).

// PostSend posts send work requests in order. It returns the index of the first WR
// it could not post and an error: ErrQPState before RTS (in ERR the WRs are accepted
// and flushed), ErrQueueFull, ErrTooManySGE, ErrInline, ErrMsgSize or ErrBadWR
// (unknown opcode, or an atomic whose local buffer is under 8 bytes). A local key,
// access or bounds problem is not an error here: the WR completes with an error and
// the QP moves to ERR, with rdma_rxe's status (sourceFault; a READ's or atomic's
// local buffer: IBV_WC_LOC_PROT_ERR).
func (qp *QueuePair) PostSend(wrs ...SendWR) (int, error) {
	qp.postMu.Lock()
	posted, err := 0, error(nil)
	for i := range wrs {
		if err = qp.postSend(&wrs[i]); err != nil {
			break
		}
		posted++
	}
	qp.postMu.Unlock()
	if posted > 0 {
		qp.dev.notePosted(qp)
	}
	return posted, err
}

// postSend checks one WR and appends it to the pending send list; qp.postMu is held.
func (qp *QueuePair) postSend(wr *SendWR) error {
	switch qp.State() {
	case QPS_RTS, QPS_SQD, QPS_ERR:
	default:
		return ErrQPState
	}
	if qp.sqPosted-qp.sqCompleted.Load() >= int64(qp.init.Cap.MaxSendWR) {
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
	if wr.Opcode.isAtomic() && total < 8 { // rxe's validate_send_wr: at least 8; the original value fills the first 8
		return ErrBadWR
	}
	if qp.svc != roce.ServiceRC {
		if err := qp.checkUnreliable(wr, total); err != nil {
			return err
		}
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
	} else if !qp.dev.resolveCached(wr.SGList, qp.pd, need, &w.sg, &qp.sendMR) {
		w.status = WC_LOC_PROT_ERR // READ or atomic: rxe_comp.c do_read/do_atomic, whatever the cause
		if need == 0 {
			w.status = qp.dev.sourceFault(wr.SGList, qp.pd)
		}
	}
	qp.pendSQ = append(qp.pendSQ, w)
	qp.sqPosted++
	return nil
}

// PostRecv posts receive work requests. Errors: ErrHasSRQ on a QP created with an
// SRQ, ErrQPState in RESET, ErrQueueFull, ErrTooManySGE. A bad local key, or a
// buffer outside its region, completes the WR with IBV_WC_LOC_QP_OP_ERR when a SEND
// arrives for it, as rdma_rxe's responder (RESPST_ERR_MALFORMED_WQE).
func (qp *QueuePair) PostRecv(wrs ...RecvWR) (int, error) {
	qp.postMu.Lock()
	posted, err := 0, error(nil)
	for _, wr := range wrs {
		if qp.init.SRQ != nil {
			err = ErrHasSRQ
			break
		}
		if qp.State() == QPS_RESET {
			err = ErrQPState
			break
		}
		if int(qp.rqUsed.Load()) >= qp.init.Cap.MaxRecvWR {
			err = ErrQueueFull
			break
		}
		if len(wr.SGList) > qp.init.Cap.MaxRecvSGE {
			err = ErrTooManySGE
			break
		}
		r := qp.newRecvWQE()
		r.wrid = wr.WRID
		if !qp.dev.resolveCached(wr.SGList, qp.pd, AccessLocalWrite, &r.sg, &qp.recvMR) {
			r.sg.total = -1 // marks a protection error, reported when used
		}
		qp.pendRQ = append(qp.pendRQ, r)
		qp.rqUsed.Add(1)
		posted++
	}
	qp.postMu.Unlock()
	if posted > 0 {
		qp.dev.notePosted(qp)
	}
	return posted, err
}

// newSendWQE returns a cleared send WQE from the pool; qp.postMu is held.
func (qp *QueuePair) newSendWQE() *sendWQE {
	if k := len(qp.sqPool); k > 0 {
		w := qp.sqPool[k-1]
		qp.sqPool = qp.sqPool[:k-1]
		segs, inl, rsegs := w.sg.segs[:0], w.inline[:0], w.segs[:0]
		*w = sendWQE{}
		w.sg.segs, w.inline, w.segs = segs, inl, rsegs
		return w
	}
	return &sendWQE{}
}

// newRecvWQE returns a cleared receive WQE from the pool; qp.postMu is held.
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

// notePosted puts qp on the device's posted list, once until the engine takes it, and
// wakes the loop.
func (d *Device) notePosted(qp *QueuePair) {
	// A plain load first: while the QP is already listed (a stream of posts between
	// two engine passes) no locked instruction is needed, and each drains the store
	// buffer of the WR just written.
	if !qp.queued.Load() && qp.queued.CompareAndSwap(false, true) {
		d.postMu.Lock()
		d.postedQPs = append(d.postedQPs, qp)
		d.postMu.Unlock()
		d.anyPosted.Store(true)
	}
	d.wakeLoop()
}

// takePosted takes in the pending work of every QP on the posted list and reports
// whether there was any. The engine lock is held.
func (d *Device) takePosted() bool {
	if !d.anyPosted.Swap(false) { // an idle pass takes no lock
		return false
	}
	d.postMu.Lock()
	qps := d.postedQPs
	d.postedQPs = d.postSpare[:0]
	d.postMu.Unlock()
	for _, qp := range qps {
		qp.queued.Store(false)
		if !qp.destroyed {
			qp.takeIn()
		}
	}
	clear(qps)
	d.postSpare = qps[:0]
	return len(qps) > 0
}

// takeIn moves qp's pending WQEs into its engine queues and returns the WQEs the
// engine has finished with to the posting pools. In ERR everything taken in is
// flushed at once. The engine lock is held.
func (qp *QueuePair) takeIn() {
	qp.postMu.Lock()
	if len(qp.pendSQ) > 0 {
		qp.req.idleEnds(qp.dev.now)
	}
	for _, w := range qp.pendSQ {
		qp.sq.push(w)
	}
	for _, r := range qp.pendRQ {
		qp.rq.push(r)
	}
	clear(qp.pendSQ)
	clear(qp.pendRQ)
	qp.pendSQ, qp.pendRQ = qp.pendSQ[:0], qp.pendRQ[:0]
	qp.sqPool = append(qp.sqPool, qp.sqDone...)
	qp.rqPool = append(qp.rqPool, qp.rqDone...)
	qp.postMu.Unlock()
	clear(qp.sqDone)
	clear(qp.rqDone)
	qp.sqDone, qp.rqDone = qp.sqDone[:0], qp.rqDone[:0]
	if qp.state == QPS_ERR {
		qp.flush()
	}
	qp.dev.schedule(qp)
}
