package transport

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xroce/xroce/roce"
)

// QueuePair is a Reliable Connected queue pair. Its methods may be called from any
// goroutine; the protocol state is the engine's, under the device lock, and posting
// goes through the pending lists under postMu (post.go).
type QueuePair struct {
	dev      *Device
	pd       *ProtectionDomain
	init     QPInitAttr
	qpn      uint32
	state    QPState       // the engine's view, under the device lock
	pubState atomic.Uint32 // state as posters and State read it
	attr     QPAttr

	tmpl  roce.Packet // Ethernet/IP/UDP/BTH template of this QP's packets
	peer  netip.Addr
	local netip.Addr // the address (SGID) the peer sends to: RC and UC packets to another are dropped
	pmtu  int

	// transport service (unreliable.go), set at creation
	svc     roce.Opcode // roce.ServiceRC, ServiceUC or ServiceUD: the opcodes it sends and accepts
	udMTU   int         // UD: the largest message, the port's MTU in bytes
	udSport uint16      // UD: the UDP source port of every packet

	retryLeft, rnrRetryLeft uint8

	sq       ring[*sendWQE] // the engine's send queue
	rq       ring[*recvWQE] // the engine's receive queue
	sqDone   []*sendWQE     // completed WQEs, back to sqPool at the next take-in
	rqDone   []*recvWQE
	req      requester
	resp     responder
	rp       dcqcn      // DCQCN's reaction point: the QP's rate (dcqcn.go)
	lastCNP  time.Time  // when the notification point last sent this QP's peer a CNP (cnp.go)
	counters qpCounters // the engine's, under the device lock (Counters copies them)

	// scheduling (sched.go), under the device lock
	ready     bool      // on the device's ready list
	heapAt    time.Time // time of this QP's live timer-heap entry; zero when none
	destroyed bool
	fatal     bool // lost a receive completion to a CQ overrun: to ERR at the end of the pass
	draining  bool // moved from RTS to SQD, IBV_EVENT_SQ_DRAINED not raised yet (drained)

	// posting (post.go)
	postMu sync.Mutex // guards pendSQ, pendRQ, the pools and the MR caches
	pendSQ []*sendWQE // posted, not yet taken in by the engine
	pendRQ []*recvWQE
	sendMR mrCache // the regions of the last send and receive WRs' SGEs
	recvMR mrCache
	sqPool []*sendWQE
	rqPool []*recvWQE
	// The send queue's fill (max_send_wr) is sqPosted − sqCompleted: posters count
	// under postMu with no locked instruction, the engine adds what it completed
	// (releaseSQ), one atomic add per ACK rather than one per WQE.
	sqPosted    int64        // send WQEs ever posted; under postMu
	sqCompleted atomic.Int64 // send WQEs ever completed (or dropped by a reset)
	sqFreed     int64        // completed, not yet added to sqCompleted; engine only
	rqUsed      atomic.Int32 // receive WQEs posted and not completed (max_recv_wr)
	queued      atomic.Bool  // on the device's posted list
}

// sendWQE is a posted send work request as the requester tracks it.
type sendWQE struct {
	wr       SendWR
	sg       sgList
	inline   []byte
	length   int
	signaled bool
	status   WCStatus // a local error found at post time, else WC_SUCCESS

	assigned bool      // PSNs assigned (first transmission happened)
	firstPSN uint32    // PSN of the first request packet (READ: of the first response)
	npkts    int       // PSNs the message uses
	sent     int       // request packets sent in the current pass (atomic: 0 or 1; READ: segments looked at, readseg.go)
	rcvd     int       // READ response packets received in order from the first
	segs     []readSeg // READ: the requests it is split into (readseg.go)
	done     bool
	result   uint64 // atomic original value
}

// recvWQE is a posted receive work request.
type recvWQE struct {
	wrid uint64
	sg   sgList
}

// Counters returns a copy of the QP's counters as they are between two engine
// passes (it waits for the device lock). The device's counters (Device.Counters)
// count the same events for all its QPs, and the link's.
func (qp *QueuePair) Counters() *Counters {
	qp.dev.mu.Lock()
	defer qp.dev.mu.Unlock()
	c := newCounters()
	for i, v := range qp.counters {
		c.v[i].Store(v)
	}
	return c
}

// completeHead pops the oldest send WQE and reports it when it is signaled or failed.
func (qp *QueuePair) completeHead(status WCStatus) {
	w := *qp.sq.at(0)
	qp.sq.popFront()
	qp.sqFreed++ // added to sqCompleted by releaseSQ, at the latest before a completion is pushed
	if qp.req.next > 0 {
		qp.req.next--
	}
	if w.wr.Opcode == WR_SEND || w.wr.Opcode == WR_SEND_WITH_IMM {
		qp.count(CntRdmaSends)
	}
	qp.drained()
	if w.signaled || status != WC_SUCCESS {
		wc := WorkCompletion{WRID: w.wr.WRID, Status: status, Opcode: w.wr.Opcode.wcOpcode(), QPN: qp.qpn}
		if status == WC_SUCCESS {
			// rdma_rxe reports the work request's length for every send-side
			// completion (rxe_comp.c make_send_cqe: byte_len = wqe->dma.length), not
			// only for READ and atomics as the spec requires; do as it does.
			wc.ByteLen = uint32(w.length) // an atomic's too: its local buffer, 8 bytes or more
			// Both rdma_rxe and mlx5 flag a *_WITH_IMM request's completion
			// IBV_WC_WITH_IMM; its imm_data is undefined (rxe until 6.x leaves 0,
			// later rxe copies the request's): report the request's.
			if w.wr.Opcode == WR_SEND_WITH_IMM || w.wr.Opcode == WR_RDMA_WRITE_WITH_IMM {
				wc.HasImm, wc.ImmData = true, w.wr.ImmData
			}
		}
		qp.releaseSQ()          // the slots are free when the completion is polled
		qp.init.SendCQ.push(wc) // lost to an overrun: the QP goes on, as rxe's (rxe_comp.c do_complete)
	}
	qp.sqDone = append(qp.sqDone, w)
}

// releaseSQ frees the send queue slots of the WQEs completed since it last ran:
// one atomic add for all of them, not one each (an ACK completes several WQEs, and a
// locked add waits for the store buffer and for the line a poster on another CPU
// may hold). The engine calls it before it
// pushes a send completion and after each pass over a QP's ACKs, sends or flush, so
// the slots of unsignaled WQEs are free soon after they complete, as rxe frees
// them (rxe_comp.c do_complete advances the queue for every WQE).
func (qp *QueuePair) releaseSQ() {
	if qp.sqFreed != 0 {
		qp.sqCompleted.Add(qp.sqFreed)
		qp.sqFreed = 0
	}
}

// drained raises IBV_EVENT_SQ_DRAINED once, for a QP moved from RTS to SQD, when
// no request it sent is outstanding: at the transition when nothing was, or when
// the last one completes. A message under way at the transition finishes first;
// SQD starts no other. rdma_rxe raises it the same way, whether or not
// en_sqd_async_notify was set (req_next_wqe in rxe_req.c, complete_ack in
// rxe_comp.c). The device lock is held.
func (qp *QueuePair) drained() {
	if !qp.draining || qp.state != QPS_SQD || qp.req.hasOutstanding(qp) {
		return
	}
	qp.draining = false
	qp.dev.raise(AsyncEvent{Type: EVENT_SQ_DRAINED, QPN: qp.qpn})
}

// completeRecv pops the oldest receive WQE and reports it.
func (qp *QueuePair) completeRecv(wc WorkCompletion) {
	r := *qp.rq.at(0)
	qp.rq.popFront()
	wc.WRID = r.wrid
	wc.QPN = qp.qpn
	if wc.Status == WC_SUCCESS {
		qp.count(CntRdmaRecvs)
	}
	qp.recvDone(r) // before the completion is seen: the slot is free when it is polled
	if !qp.init.RecvCQ.push(wc) && qp.state != QPS_ERR && !qp.fatal {
		// Lost to an overrun: the QP moves to ERR at the end of the engine pass, as
		// rxe's responder (RESPST_ERR_CQ_OVERFLOW), and does not acknowledge it.
		qp.fatal = true
		qp.dev.fatal = append(qp.dev.fatal, qp)
	}
}

// recvDone returns a receive WQE the QP is done with to where it was posted: the
// QP's own pool, or its SRQ's.
func (qp *QueuePair) recvDone(r *recvWQE) {
	if s := qp.init.SRQ; s != nil {
		s.finished(r)
		return
	}
	qp.rqUsed.Add(-1)
	qp.rqDone = append(qp.rqDone, r)
}

// recvReady reports whether a receive WQE waits for a new message at the head of
// the QP's receive queue: one posted to the QP (taking in those posted since the
// pass began), or one lent by its SRQ. The device lock is held.
func (qp *QueuePair) recvReady() bool {
	if qp.rq.len() > 0 {
		return true
	}
	if s := qp.init.SRQ; s != nil {
		return s.lend(qp)
	}
	if qp.rqUsed.Load() > 0 {
		qp.takeIn()
	}
	return qp.rq.len() > 0
}

// toError moves the QP to ERR and flushes both queues (IBTA Vol 1 §10.3.1.4).
func (qp *QueuePair) toError() {
	qp.setState(QPS_ERR)
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
	qp.releaseSQ()
	qp.req.next = 0
	for qp.rq.len() > 0 {
		qp.completeRecv(WorkCompletion{Status: WC_WR_FLUSH_ERR, Opcode: WC_RECV, solicited: true})
	}
}

// fail completes the head WR with status, flushes the rest and moves to ERR.
func (qp *QueuePair) fail(status WCStatus) {
	if qp.sq.len() > 0 {
		qp.completeHead(status)
	}
	qp.toError()
}

// reset returns the QP to RESET: queues emptied without completions, pending
// posts included.
func (qp *QueuePair) reset() {
	qp.setState(QPS_RESET)
	qp.takeIn()
	for qp.sq.len() > 0 {
		qp.sqDone = append(qp.sqDone, *qp.sq.at(0))
		qp.sq.popFront()
	}
	for qp.rq.len() > 0 {
		r := *qp.rq.at(0)
		qp.rq.popFront()
		if s := qp.init.SRQ; s != nil {
			s.giveBack(r) // a message had taken it: the SRQ's again, for another QP
		} else {
			qp.rqDone = append(qp.rqDone, r)
		}
	}
	qp.postMu.Lock() // takeIn above moved every pending WQE: the queue is empty
	qp.sqCompleted.Store(qp.sqPosted)
	qp.postMu.Unlock()
	qp.sqFreed = 0
	qp.rqUsed.Store(0)
	qp.req = requester{}
	qp.resp = responder{}
	qp.rp = dcqcn{}
	qp.lastCNP = time.Time{}
}

// setState sets the state for the engine and for posters.
func (qp *QueuePair) setState(s QPState) {
	qp.state = s
	qp.pubState.Store(uint32(s))
}
