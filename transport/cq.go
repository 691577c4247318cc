package transport

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
)

// WCStatus is a work completion's status (enum ibv_wc_status).
type WCStatus uint8

// Work-completion statuses, with ibv_wc_status's names and values.
const (
	WC_SUCCESS           WCStatus = 0
	WC_LOC_LEN_ERR       WCStatus = 1
	WC_LOC_QP_OP_ERR     WCStatus = 2
	WC_LOC_EEC_OP_ERR    WCStatus = 3
	WC_LOC_PROT_ERR      WCStatus = 4
	WC_WR_FLUSH_ERR      WCStatus = 5
	WC_MW_BIND_ERR       WCStatus = 6
	WC_BAD_RESP_ERR      WCStatus = 7
	WC_LOC_ACCESS_ERR    WCStatus = 8
	WC_REM_INV_REQ_ERR   WCStatus = 9
	WC_REM_ACCESS_ERR    WCStatus = 10
	WC_REM_OP_ERR        WCStatus = 11
	WC_RETRY_EXC_ERR     WCStatus = 12
	WC_RNR_RETRY_EXC_ERR WCStatus = 13
	WC_FATAL_ERR         WCStatus = 19
	WC_RESP_TIMEOUT_ERR  WCStatus = 20
	WC_GENERAL_ERR       WCStatus = 21
)

var wcStatusNames = map[WCStatus]string{
	WC_SUCCESS: "IBV_WC_SUCCESS", WC_LOC_LEN_ERR: "IBV_WC_LOC_LEN_ERR", WC_LOC_QP_OP_ERR: "IBV_WC_LOC_QP_OP_ERR",
	WC_LOC_EEC_OP_ERR: "IBV_WC_LOC_EEC_OP_ERR", WC_LOC_PROT_ERR: "IBV_WC_LOC_PROT_ERR",
	WC_WR_FLUSH_ERR: "IBV_WC_WR_FLUSH_ERR", WC_MW_BIND_ERR: "IBV_WC_MW_BIND_ERR", WC_BAD_RESP_ERR: "IBV_WC_BAD_RESP_ERR",
	WC_LOC_ACCESS_ERR: "IBV_WC_LOC_ACCESS_ERR", WC_REM_INV_REQ_ERR: "IBV_WC_REM_INV_REQ_ERR",
	WC_REM_ACCESS_ERR: "IBV_WC_REM_ACCESS_ERR", WC_REM_OP_ERR: "IBV_WC_REM_OP_ERR",
	WC_RETRY_EXC_ERR: "IBV_WC_RETRY_EXC_ERR", WC_RNR_RETRY_EXC_ERR: "IBV_WC_RNR_RETRY_EXC_ERR",
	WC_FATAL_ERR: "IBV_WC_FATAL_ERR", WC_RESP_TIMEOUT_ERR: "IBV_WC_RESP_TIMEOUT_ERR", WC_GENERAL_ERR: "IBV_WC_GENERAL_ERR",
}

// String returns the ibv_wc_status name, e.g. "IBV_WC_RETRY_EXC_ERR".
func (s WCStatus) String() string {
	if n, ok := wcStatusNames[s]; ok {
		return n
	}
	return "IBV_WC_STATUS(" + strconv.Itoa(int(s)) + ")"
}

// WCOpcode is a work completion's opcode (enum ibv_wc_opcode).
type WCOpcode uint8

// Work-completion opcodes, with ibv_wc_opcode's names and values.
const (
	WC_SEND               WCOpcode = 0
	WC_RDMA_WRITE         WCOpcode = 1
	WC_RDMA_READ          WCOpcode = 2
	WC_COMP_SWAP          WCOpcode = 3
	WC_FETCH_ADD          WCOpcode = 4
	WC_RECV               WCOpcode = 128
	WC_RECV_RDMA_WITH_IMM WCOpcode = 129
)

// String returns the ibv_wc_opcode name, e.g. "IBV_WC_RDMA_WRITE".
func (o WCOpcode) String() string {
	switch o {
	case WC_SEND:
		return "IBV_WC_SEND"
	case WC_RDMA_WRITE:
		return "IBV_WC_RDMA_WRITE"
	case WC_RDMA_READ:
		return "IBV_WC_RDMA_READ"
	case WC_COMP_SWAP:
		return "IBV_WC_COMP_SWAP"
	case WC_FETCH_ADD:
		return "IBV_WC_FETCH_ADD"
	case WC_RECV:
		return "IBV_WC_RECV"
	case WC_RECV_RDMA_WITH_IMM:
		return "IBV_WC_RECV_RDMA_WITH_IMM"
	}
	return "IBV_WC_OPCODE(" + strconv.Itoa(int(o)) + ")"
}

// WorkCompletion reports the end of a work request (struct ibv_wc).
type WorkCompletion struct {
	WRID    uint64
	Status  WCStatus
	Opcode  WCOpcode
	ByteLen uint32 // receive completions: bytes received; send completions: the request's length (atomics: 8), as rdma_rxe reports
	ImmData uint32 // immediate data, valid when HasImm
	HasImm  bool   // IBV_WC_WITH_IMM
	QPN     uint32 // the local QP
	SrcQP   uint32 // UD receive completions: the sender's QPN (src_qp)
	GRH     bool   // IBV_WC_GRH: UD receive completions; the first 40 bytes received are the GRH area

	// solicited: a receive completion of a message whose last packet had the BTH
	// SE bit, or a flushed receive: what wakes a CQ armed for solicited
	// completions only (Arm; rxe_cq_post's solicited argument, rxe_resp.c).
	solicited bool
}

// CompletionQueue collects work completions. Poll and Wait may be called from any
// goroutine.
type CompletionQueue struct {
	dev    *Device
	mu     sync.Mutex
	cqes   []WorkCompletion // FIFO; head at index head
	head   int
	notify chan struct{}
	depth  int
	err    error  // ErrCQOverrun once a completion found the CQ full
	sink   CQSink // when set, completions go there instead of cqes
	arm    armKind
	events chan struct{} // a completion matched the arm (Arm, Events)
}

// armKind is what a CQ is armed for: ibv_req_notify_cq's solicited_only, or nothing.
type armKind uint8

const (
	armNone      armKind = iota
	armSolicited         // IB_CQ_SOLICITED: the next solicited completion
	armNext              // IB_CQ_NEXT_COMP: the next completion of any kind
)

// A CQSink takes a completion queue's completions instead of the queue itself: the
// verbs daemon writes them straight into a CQ ring shared with the application
// (cmd/xroce/daemon). Push is called with the engine lock held, once per
// completion, and must not block or call back into the Device.
type CQSink interface {
	// Push stores wc and reports whether there was room: false overruns the CQ
	// (ErrCQOverrun, IBV_EVENT_CQ_ERR) and wc is lost, as on a full CQ.
	Push(wc WorkCompletion) bool
	// Len is how many pushed completions the consumer has not taken yet.
	Len() int
}

// ErrCQOverrun is the error of a completion queue that overran: a completion arrived
// while it held its full depth of unpolled completions. As rdma_rxe's (rxe_cq.c
// rxe_cq_post), that completion is lost and raises IBV_EVENT_CQ_ERR, each time;
// the CQ goes on taking completions once there is room. A receive completion lost
// so moves its QP to ERR (rxe_resp.c: RESPST_ERR_CQ_OVERFLOW, then rxe_qp_error,
// with no event of its own); a send completion's QP goes on (rxe_comp.c
// do_complete ignores the failure). Err keeps the error once it happened.
var ErrCQOverrun = errors.New("transport: completion queue overrun (IBV_EVENT_CQ_ERR)")

// CreateCQ returns a completion queue holding up to depth completions (default 1024
// when depth ≤ 0). If more accumulate before Poll, the CQ overruns (ErrCQOverrun).
func (d *Device) CreateCQ(depth int) *CompletionQueue {
	if depth <= 0 {
		depth = 1024
	}
	return &CompletionQueue{dev: d, notify: make(chan struct{}, 1), events: make(chan struct{}, 1), depth: depth}
}

// CreateCQWithSink returns a completion queue whose completions go to sink: Poll
// returns none, Len and Wait follow sink.Len, and the CQ overruns when Push
// refuses one. depth is what Depth reports.
func (d *Device) CreateCQWithSink(depth int, sink CQSink) *CompletionQueue {
	cq := d.CreateCQ(depth)
	cq.sink = sink
	return cq
}

// Depth returns how many completions the CQ holds before it overruns.
func (cq *CompletionQueue) Depth() int { return cq.depth }

// push appends wc and reports whether the CQ took it: false when the CQ is full,
// which loses wc and raises IBV_EVENT_CQ_ERR (ErrCQOverrun).
func (cq *CompletionQueue) push(wc WorkCompletion) bool {
	cq.mu.Lock()
	var ok bool
	if cq.sink != nil {
		ok = cq.sink.Push(wc)
	} else {
		ok = len(cq.cqes)-cq.head < cq.depth
	}
	raise := false
	if ok && cq.sink == nil {
		if cq.head > 0 && len(cq.cqes) == cap(cq.cqes) {
			n := copy(cq.cqes, cq.cqes[cq.head:])
			cq.cqes = cq.cqes[:n]
			cq.head = 0
		}
		cq.cqes = append(cq.cqes, wc)
	}
	if ok && (cq.arm == armNext || cq.arm == armSolicited && wc.solicited) {
		cq.arm = armNone
		select {
		case cq.events <- struct{}{}:
		default:
		}
	}
	if !ok {
		if cq.err == nil {
			cq.err = fmt.Errorf("%w: more than %d completions were left unpolled, and the next were lost; poll more often or create a larger CQ",
				ErrCQOverrun, cq.depth)
		}
		raise = true
	}
	cq.mu.Unlock()
	if raise {
		cq.dev.raise(AsyncEvent{Type: EVENT_CQ_ERR, CQ: cq})
	}
	select {
	case cq.notify <- struct{}{}:
	default:
	}
	return ok
}

// Poll moves up to len(wcs) completions into wcs, oldest first, and returns how many.
// After an overrun it goes on returning what the CQ took; Err tells that some were
// lost.
func (cq *CompletionQueue) Poll(wcs []WorkCompletion) int {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	n := copy(wcs, cq.cqes[cq.head:])
	cq.head += n
	if cq.head == len(cq.cqes) {
		cq.cqes = cq.cqes[:0]
		cq.head = 0
	}
	return n
}

// Len returns how many completions wait to be polled.
func (cq *CompletionQueue) Len() int {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	return cq.pending()
}

// pending is Len with cq.mu held.
func (cq *CompletionQueue) pending() int {
	if cq.sink != nil {
		return cq.sink.Len()
	}
	return len(cq.cqes) - cq.head
}

// Err returns nil, or an error wrapping ErrCQOverrun once the CQ has overrun (lost
// a completion).
func (cq *CompletionQueue) Err() error {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	return cq.err
}

// Arm asks for one completion event (Events) on the next completion the CQ takes,
// or with solicitedOnly on the next solicited one: a receive completion of a
// message sent with IBV_SEND_SOLICITED (BTH SE), or a flushed receive. Completions
// already queued raise none, a CQ armed for any completion stays so when armed
// again for solicited ones, and a completion lost to an overrun raises none (the
// CQ's IBV_EVENT_CQ_ERR tells of it). This is ibv_req_notify_cq as rdma_rxe
// implements it (rxe_req_notify_cq in rxe_verbs.c, rxe_cq_post in rxe_cq.c).
func (cq *CompletionQueue) Arm(solicitedOnly bool) {
	cq.mu.Lock()
	defer cq.mu.Unlock()
	if cq.arm == armNext {
		return
	}
	cq.arm = armNext
	if solicitedOnly {
		cq.arm = armSolicited
	}
}

// Events returns the channel that receives a value when a completion matches the
// CQ's arm (Arm); the arm is then spent. Values do not accumulate beyond one.
func (cq *CompletionQueue) Events() <-chan struct{} { return cq.events }

// Wait blocks until at least one completion can be polled, the CQ has overrun and
// has nothing left to poll (its Err: a completion waited for may be lost), or ctx
// ends (ctx.Err()).
func (cq *CompletionQueue) Wait(ctx context.Context) error {
	for {
		cq.mu.Lock()
		n, err := cq.pending(), cq.err
		cq.mu.Unlock()
		if n > 0 {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-cq.notify:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
