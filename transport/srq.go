package transport

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// SharedReceiveQueue is a receive queue that several QPs of a PD take their
// receive WQEs from (ibv_create_srq; IBTA Vol 1 §10.2.9). A QP created with one
// takes no receives of its own: a SEND's first packet (or a WRITE with immediate)
// takes the oldest WQE of the SRQ, which then belongs to that QP until its
// message completes, in success or in error. Posting goes to a pending list under
// the SRQ's own lock, as a QP's does (post.go); the engine takes the list in when
// its queue runs dry. The limit (srq_limit), when armed, raises
// IBV_EVENT_SRQ_LIMIT_REACHED once when fewer WQEs than it remain, and disarms, as
// rdma_rxe's rxe_resp.c get_srq_wqe does.
type SharedReceiveQueue struct {
	dev    *Device
	pd     *ProtectionDomain
	maxSGE int

	// engine side, under the device lock
	rq   ring[*recvWQE]
	qps  int // QPs created with it: it cannot be destroyed while any is
	gone bool

	mu     sync.Mutex // guards pend, pool, done, maxWR and limit
	pend   []*recvWQE
	pool   []*recvWQE
	done   []*recvWQE // completed, back to pool at the next take-in
	maxWR  int
	limit  int          // srq_limit: 0 is disarmed
	used   atomic.Int32 // posted and not completed (max_wr)
	avail  atomic.Int32 // posted and not yet taken by a QP: what the limit counts
	closed atomic.Bool
}

// SRQAttr is an SRQ's attributes (struct ibv_srq_attr).
type SRQAttr struct {
	MaxWR, MaxSGE, Limit int
}

// SRQAttrMask says which attributes ModifySRQ changes (enum ibv_srq_attr_mask).
type SRQAttrMask int

// SRQ attribute mask bits.
const (
	SRQ_MAX_WR SRQAttrMask = 1 << 0 // IBV_SRQ_MAX_WR: resize
	SRQ_LIMIT  SRQAttrMask = 1 << 1 // IBV_SRQ_LIMIT: arm the limit event
)

// SRQ limits, as rdma_rxe reports them on Debian 12's kernel (max_srq_wr and
// max_srq_sge in ibv_devinfo -v, docs/verbs-library.md; rxe_param.h).
const (
	MaxSRQWR  = 1048576
	MaxSRQSGE = 27
)

// ErrSRQBusy is DestroySRQ's error while QPs use the SRQ (EBUSY in verbs), and
// ErrHasSRQ PostRecv's on a QP that receives from an SRQ (EINVAL in rdma_rxe).
var (
	ErrSRQBusy = errors.New("transport: the SRQ still has QPs: destroy them first")
	ErrHasSRQ  = errors.New("transport: the QP receives from an SRQ: post receives to the SRQ")
)

// CreateSRQ creates a shared receive queue of at least a.MaxWR WQEs of a.MaxSGE
// entries each (1..MaxSRQWR, 1..MaxSRQSGE; 0 takes 1), with the limit a.Limit
// (0: disarmed), as ibv_create_srq. Errors: a size out of range, or a limit above
// MaxWR.
func (pd *ProtectionDomain) CreateSRQ(a SRQAttr) (*SharedReceiveQueue, error) {
	a.MaxWR, a.MaxSGE = max(a.MaxWR, 1), max(a.MaxSGE, 1)
	if a.MaxWR > MaxSRQWR || a.MaxSGE > MaxSRQSGE || a.Limit < 0 || a.Limit > a.MaxWR {
		return nil, fmt.Errorf("transport: SRQ of %d WRs of %d SGEs with limit %d: at most %d WRs and %d SGEs, the limit at most max_wr",
			a.MaxWR, a.MaxSGE, a.Limit, MaxSRQWR, MaxSRQSGE)
	}
	return &SharedReceiveQueue{dev: pd.dev, pd: pd, maxSGE: a.MaxSGE, maxWR: a.MaxWR, limit: a.Limit}, nil
}

// PostRecv posts receive work requests to the SRQ (ibv_post_srq_recv). It returns
// how many it posted and, for the first it could not, ErrQueueFull, ErrTooManySGE,
// or ErrQPState once the SRQ is destroyed. A bad local key completes the WR with
// IBV_WC_LOC_QP_OP_ERR on the QP a SEND takes it for (rdma_rxe's
// RESPST_ERR_MALFORMED_WQE).
func (s *SharedReceiveQueue) PostRecv(wrs ...RecvWR) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, wr := range wrs {
		switch {
		case s.closed.Load():
			return i, ErrQPState
		case int(s.used.Load()) >= s.maxWR:
			return i, ErrQueueFull
		case len(wr.SGList) > s.maxSGE:
			return i, ErrTooManySGE
		}
		r := &recvWQE{}
		if k := len(s.pool); k > 0 {
			r = s.pool[k-1]
			s.pool = s.pool[:k-1]
			r.sg.segs, r.sg.total = r.sg.segs[:0], 0
		}
		r.wrid = wr.WRID
		if !s.dev.resolve(wr.SGList, s.pd, AccessLocalWrite, &r.sg) {
			r.sg.total = -1 // marks a protection error, reported when used
		}
		s.pend = append(s.pend, r)
		s.used.Add(1)
		s.avail.Add(1)
	}
	return len(wrs), nil
}

// Query returns the SRQ's attributes (ibv_query_srq).
func (s *SharedReceiveQueue) Query() SRQAttr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return SRQAttr{MaxWR: s.maxWR, MaxSGE: s.maxSGE, Limit: s.limit}
}

// Modify resizes the SRQ (SRQ_MAX_WR: not below the WQEs outstanding, at most
// MaxSRQWR) and arms its limit (SRQ_LIMIT: at most max_wr), as ibv_modify_srq.
// Errors name the attribute out of range; nothing changes then.
func (s *SharedReceiveQueue) Modify(a SRQAttr, mask SRQAttrMask) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	wr, limit := s.maxWR, s.limit
	if mask&SRQ_MAX_WR != 0 {
		wr = a.MaxWR
	}
	if mask&SRQ_LIMIT != 0 {
		limit = a.Limit
	}
	switch {
	case wr < int(s.used.Load()) || wr < 1 || wr > MaxSRQWR:
		return fmt.Errorf("transport: SRQ max_wr %d: between the %d WQEs outstanding (at least 1) and %d", wr, s.used.Load(), MaxSRQWR)
	case limit < 0 || limit > wr:
		return fmt.Errorf("transport: SRQ limit %d: at most max_wr (%d)", limit, wr)
	}
	s.maxWR, s.limit = wr, limit
	return nil
}

// Destroy removes the SRQ (ibv_destroy_srq); its WQEs go without completions.
// ErrSRQBusy while a QP created with it exists.
func (s *SharedReceiveQueue) Destroy() error {
	d := s.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if s.gone {
		return ErrQPState
	}
	if s.qps > 0 {
		return ErrSRQBusy
	}
	s.gone = true
	s.closed.Store(true)
	return nil
}

// takeIn moves the pending WQEs into the engine's queue and the completed ones
// back to the pool. The device lock is held.
func (s *SharedReceiveQueue) takeIn() {
	s.mu.Lock()
	for _, r := range s.pend {
		s.rq.push(r)
	}
	clear(s.pend)
	s.pend = s.pend[:0]
	s.pool = append(s.pool, s.done...)
	clear(s.done)
	s.done = s.done[:0]
	s.mu.Unlock()
}

// lend gives qp the oldest WQE for a new message (on qp's own receive queue, where
// the responder finds it), and reports false when none is posted. The device lock
// is held.
func (s *SharedReceiveQueue) lend(qp *QueuePair) bool {
	if s.rq.len() == 0 && s.avail.Load() > 0 {
		s.takeIn()
	}
	if s.rq.len() == 0 {
		return false
	}
	qp.rq.push(*s.rq.at(0))
	s.rq.popFront()
	left := s.avail.Add(-1)
	s.mu.Lock()
	fire := s.limit > 0 && int(left) < s.limit
	if fire {
		s.limit = 0 // the event disarms the limit (ibv_modify_srq(3))
	}
	s.mu.Unlock()
	if fire {
		s.dev.raise(AsyncEvent{Type: EVENT_SRQ_LIMIT_REACHED, SRQ: s})
	}
	return true
}

// giveBack returns a WQE that a QP had taken for a message it never completed
// (the QP was reset or destroyed): it waits in the SRQ again, still outstanding,
// so the application's receive is neither lost nor completed. The device lock is
// held.
func (s *SharedReceiveQueue) giveBack(r *recvWQE) {
	s.mu.Lock()
	s.pend = append(s.pend, r)
	s.mu.Unlock()
	s.avail.Add(1)
}

// finished takes back a WQE a QP completed. The device lock is held.
func (s *SharedReceiveQueue) finished(r *recvWQE) {
	s.used.Add(-1)
	s.mu.Lock()
	s.done = append(s.done, r)
	s.mu.Unlock()
}
