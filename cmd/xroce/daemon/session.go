package daemon

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// The data path of a session: the PDs, MRs, CQs, QPs and completion channels a
// client creates belong to its session, are named by per-session handles (a client
// cannot name another's objects), and are destroyed when the session ends, however
// it ends: QPs first (the peer then sees retry-exceeded), then CQs, MRs (unmapped)
// and channels.
//
// Work requests and completions cross on shared-memory rings (ring.go, qpring.go,
// poller.go; docs/verbs-library.md §6): the control socket carries only object
// management. Registered memory is shared: the library moves the pages of a region
// onto a sealed memfd and sends the fd; the daemon maps it, and the engine reads and
// writes the application's pages directly.

// EngineSource is implemented by a Source whose device can carry data (the
// daemon's transport.Device); without it the data-path ops fail with EOPNOTSUPP.
type engineSource interface {
	Engine() *transport.Device
}

// Engine implements engineSource.
func (e *EngineSource) Engine() *transport.Device { return e.Dev }

// Limits a session's request may ask for (rdma_rxe's, as DeviceAttr reports them).
const (
	maxCQE    = transport.MaxCQE
	maxQPWR   = transport.MaxQPWR
	maxSGE    = transport.MaxSGE
	wcWithImm = 1 << 1 // IBV_WC_WITH_IMM
	qptRC     = 2      // IBV_QPT_RC
	qptUC     = 3      // IBV_QPT_UC
	qptUD     = 4      // IBV_QPT_UD
)

// verbs access flags beyond the engine's four that registration accepts and
// ignores, as rdma_rxe on Linux 6.1 does (ib_check_mr_access's IB_ACCESS_SUPPORTED):
// IBV_ACCESS_MW_BIND (no memory windows are ever bound), IBV_ACCESS_ZERO_BASED and
// IBV_ACCESS_HUGETLB (rxe registers the iova given either way), and the optional
// range, IBV_ACCESS_RELAXED_ORDERING (1 << 20) to 1 << 29.
const (
	accessMWBind    = 1 << 4
	accessZeroBased = 1 << 5
	accessOnDemand  = 1 << 6
	accessHugeTLB   = 1 << 7
	accessOptional  = 0x3ff00000
)

type session struct {
	dev    *transport.Device
	ifname string // the interface the device serves
	poller *poller
	logf   func(format string, a ...any)
	ctx    context.Context
	cancel context.CancelFunc
	next   uint32
	pds    map[uint32]*pdObj
	mrs    map[uint32]*mrObj
	cqs    map[uint32]*cqObj
	qps    map[uint32]*qpObj
	chans  map[uint32]*chanObj
	srqs   map[uint32]*srqObj
	ahs    *ahTable
	// graveyard holds deregistered mappings while the session has QPs: a WR that
	// resolved into one may still be queued, so the range stays mapped (onto
	// anonymous memory, the application's pages released) until no QP is left.
	graveyard []mapping
	counts    *objCounts
	async     asyncOut // the asynchronous event channel
	wg        sync.WaitGroup
}

// objCounts are the session's object counts for `xroce daemon status`, read by
// other sessions.
type objCounts struct {
	pds, mrs, cqs, qps, srqs atomic.Int32
}

type mapping struct {
	p *byte
	n uintptr
}

type pdObj struct {
	pd   *transport.ProtectionDomain
	refs int // MRs, QPs and AHs
}

type mrObj struct {
	mr  *transport.MemoryRegion
	pd  *pdObj
	m   mapping
	req RegMRReq
}

type chanObj struct {
	mu     sync.Mutex
	fd     int // the daemon's end of the client's socketpair; -1 once closed
	refs   int
	closed bool
}

type cqObj struct {
	cq     *transport.CompletionQueue
	ring   *cqRing
	ch     *chanObj
	cookie uint64
	refs   int
	stop   context.CancelFunc
	done   chan struct{} // closed when the channel watcher returned
}

type qpObj struct {
	qp         *transport.QueuePair
	ring       *qpRing
	pd         *pdObj
	send, recv *cqObj
	srq        *srqObj // the SRQ it receives from, or nil
	caps       CreateQPReply
	attr       QPAttrMsg
}

func newSession(src Source, counts *objCounts, logf func(string, ...any)) *session {
	es, ok := src.(engineSource)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	dev := es.Engine()
	return &session{dev: dev, ifname: src.Ifname(), poller: pollerFor(dev), logf: logf, ctx: ctx, cancel: cancel, pds: map[uint32]*pdObj{},
		mrs: map[uint32]*mrObj{}, cqs: map[uint32]*cqObj{}, qps: map[uint32]*qpObj{}, chans: map[uint32]*chanObj{}, srqs: map[uint32]*srqObj{},
		ahs: &ahTable{m: map[uint32]*ahObj{}}, counts: counts}
}

// errno is an error with the errno the library returns.
type errno struct {
	e   unix.Errno
	msg string
}

func (e *errno) Error() string { return e.msg }

func fail(e unix.Errno, format string, a ...any) error {
	return &errno{e, fmt.Sprintf(format, a...)}
}

// handle answers one data-path request with a reply and the descriptors it
// carries (the caller closes them once sent). fds are the descriptors the request
// carried; handle takes the ones the op uses and closes the rest.
func (s *session) handle(op uint16, seq uint32, p []byte, fds []int) ([]byte, []int) {
	defer func() {
		for _, fd := range fds {
			if fd >= 0 {
				unix.Close(fd)
			}
		}
	}()
	if s == nil {
		return errReply(op, seq, unix.EOPNOTSUPP, "this device serves no data path"), nil
	}
	takeFD := func() (int, error) {
		if len(fds) != 1 {
			return -1, fail(unix.EBADMSG, "op %d carries one descriptor, got %d", op, len(fds))
		}
		fd := fds[0]
		fds[0] = -1
		return fd, nil
	}
	var body any
	var err error
	switch op {
	case OpRegMR, OpCreateChannel, OpAsyncChannel:
	default:
		if len(fds) != 0 {
			return errReply(op, seq, unix.EBADMSG, fmt.Sprintf("op %d takes no descriptors, got %d", op, len(fds))), nil
		}
	}
	var out []int
	switch op {
	case OpAllocPD:
		if len(p) != 0 {
			err = fail(unix.EBADMSG, "alloc pd takes no body")
			break
		}
		body, err = s.allocPD()
	case OpDeallocPD:
		var h Handle
		if err = decode(p, &h); err == nil {
			err = s.deallocPD(h.Handle)
		}
	case OpRegMR:
		var req RegMRReq
		if err = decode(p, &req); err == nil {
			body, err = s.regMR(&req, fds)
		}
	case OpDeregMR:
		var h Handle
		if err = decode(p, &h); err == nil {
			err = s.deregMR(h.Handle)
		}
	case OpCreateChannel:
		if len(p) != 0 {
			err = fail(unix.EBADMSG, "create channel takes no body")
			break
		}
		var fd int
		if fd, err = takeFD(); err == nil {
			body, err = s.createChannel(fd)
		}
	case OpAsyncChannel:
		if len(p) != 0 {
			err = fail(unix.EBADMSG, "async channel takes no body")
			break
		}
		var fd int
		if fd, err = takeFD(); err == nil {
			err = s.asyncChannel(fd)
		}
	case OpDestroyChannel:
		var h Handle
		if err = decode(p, &h); err == nil {
			err = s.destroyChannel(h.Handle)
		}
	case OpCreateCQ:
		var req CreateCQReq
		if err = decode(p, &req); err == nil {
			body, out, err = s.createCQ(&req)
		}
	case OpDestroyCQ:
		var h Handle
		if err = decode(p, &h); err == nil {
			err = s.destroyCQ(h.Handle)
		}
	case OpReqNotifyCQ:
		var req NotifyReq
		if err = decode(p, &req); err == nil {
			err = s.reqNotify(&req)
		}
	case OpCreateQP:
		var req CreateQPReq
		if err = decode(p, &req); err == nil {
			body, out, err = s.createQP(&req)
		}
	case OpModifyQP:
		var req QPAttrMsg
		if err = decode(p, &req); err == nil {
			err = s.modifyQP(&req)
		}
	case OpQueryQP:
		var h Handle
		if err = decode(p, &h); err == nil {
			body, err = s.queryQP(h.Handle)
		}
	case OpDestroyQP:
		var h Handle
		if err = decode(p, &h); err == nil {
			err = s.destroyQP(h.Handle)
		}
	case OpCreateAH:
		var req CreateAHReq
		if err = decode(p, &req); err == nil {
			body, err = s.createAH(&req)
		}
	case OpDestroyAH:
		var h Handle
		if err = decode(p, &h); err == nil {
			err = s.destroyAH(h.Handle)
		}
	default:
		switch {
		case op >= OpCMCreateID && op <= opLastCM, op >= opFirstCMAppQP && op <= opLastCMAppQP:
			body, err = s.handleCM(op, p)
		case op >= OpCreateSRQ && op <= opLastSRQ:
			body, err = s.handleSRQ(op, p)
		default:
			return errReply(op, seq, unix.EOPNOTSUPP, fmt.Sprintf("unknown op %d", op)), nil
		}
	}
	if err != nil {
		var e *errno
		if errors.As(err, &e) {
			return errReply(op, seq, e.e, e.msg), nil
		}
		return errReply(op, seq, unix.EINVAL, err.Error()), nil
	}
	return okReply(op, seq, body), out
}

func decode(p []byte, v any) error {
	if err := decodeBody(p, v); err != nil {
		return fail(unix.EBADMSG, "%v", err)
	}
	return nil
}

func (s *session) handleID() uint32 {
	s.next++
	if s.next == 0 {
		s.next = 1
	}
	return s.next
}

// ---- PD ----

func (s *session) allocPD() (*Handle, error) {
	pd := s.dev.AllocPD()
	h := s.handleID()
	s.pds[h] = &pdObj{pd: pd}
	s.counts.pds.Add(1)
	return &Handle{h}, nil
}

func (s *session) deallocPD(h uint32) error {
	o := s.pds[h]
	if o == nil {
		return fail(unix.EINVAL, "no PD %d in this session", h)
	}
	if o.refs > 0 {
		return fail(unix.EBUSY, "PD %d still has %d MRs, QPs or address handles", h, o.refs)
	}
	delete(s.pds, h)
	s.counts.pds.Add(-1)
	return nil
}

// ---- MR ----

// regMR maps the region's memfd pieces (fds, which the caller closes) into one
// range and registers the region in it.
func (s *session) regMR(r *RegMRReq, fds []int) (*RegMRReply, error) {
	pd := s.pds[r.PD]
	if pd == nil {
		return nil, fail(unix.EINVAL, "no PD %d in this session", r.PD)
	}
	if r.Access&accessOnDemand != 0 {
		return nil, fail(unix.EOPNOTSUPP, "access flags 0x%x: on-demand paging regions are not supported", r.Access)
	}
	if r.Access&^(0xf|accessMWBind|accessZeroBased|accessHugeTLB|accessOptional) != 0 {
		return nil, fail(unix.EINVAL, "unknown access flags 0x%x", r.Access)
	}
	if r.NPieces == 0 || r.NPieces > MRPieces || len(fds) != int(r.NPieces) {
		return nil, fail(unix.EBADMSG, "reg mr: %d pieces (1..%d) with %d descriptors", r.NPieces, MRPieces, len(fds))
	}
	page := uint64(os.Getpagesize())
	if r.Length == 0 || r.MapLen == 0 || r.MapAddr%page != 0 || r.MapLen%page != 0 ||
		r.Addr < r.MapAddr || r.Addr+r.Length < r.Addr || r.MapAddr+r.MapLen < r.MapAddr ||
		r.Addr+r.Length > r.MapAddr+r.MapLen || r.MapLen > 1<<40 {
		return nil, fail(unix.EINVAL, "region [0x%x, +%d) in mapping [0x%x, +%d): not page-aligned, empty or outside its mapping",
			r.Addr, r.Length, r.MapAddr, r.MapLen)
	}
	m, err := mapPieces(r.MapLen, r.Pieces[:r.NPieces], fds)
	if err != nil {
		return nil, err
	}
	buf := unsafe.Slice(m.p, m.n)[r.Addr-r.MapAddr : r.Addr-r.MapAddr+r.Length]
	mr, err := pd.pd.RegMRWith(buf, transport.Access(r.Access&0xf), transport.MROptions{IOVA: r.IOVA, HasIOVA: true})
	if err != nil {
		_ = unix.MunmapPtr(unsafe.Pointer(m.p), m.n)
		return nil, fail(unix.EINVAL, "%v", err)
	}
	h := s.handleID()
	s.mrs[h] = &mrObj{mr: mr, pd: pd, m: m, req: *r}
	pd.refs++
	s.counts.mrs.Add(1)
	return &RegMRReply{Handle: h, LKey: mr.LKey(), RKey: mr.RKey()}, nil
}

// mapPieces maps the pieces, one after the other, into one range of size bytes.
// Each descriptor must be a memfd sealed against shrinking and long enough for
// its piece: then no access through the mapping can fault (SIGBUS) in the daemon.
func mapPieces(size uint64, pieces []MRPiece, fds []int) (mapping, error) {
	page := uint64(os.Getpagesize())
	var total uint64
	for i, pc := range pieces {
		if pc.Len == 0 || pc.Len%page != 0 || pc.FdOff%page != 0 || pc.FdOff+pc.Len < pc.FdOff {
			return mapping{}, fail(unix.EINVAL, "piece %d of %d bytes at fd offset %d: not page-aligned or empty", i, pc.Len, pc.FdOff)
		}
		seals, err := unix.FcntlInt(uintptr(fds[i]), unix.F_GET_SEALS, 0)
		if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
			return mapping{}, fail(unix.EINVAL, "the region's descriptor %d is not a memfd sealed with F_SEAL_SHRINK (%v)", i, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fds[i], &st); err != nil || uint64(st.Size) < pc.FdOff+pc.Len {
			return mapping{}, fail(unix.EINVAL, "the region's memfd %d holds %d bytes, its piece needs %d", i, st.Size, pc.FdOff+pc.Len)
		}
		total += pc.Len
	}
	if total != size {
		return mapping{}, fail(unix.EINVAL, "the pieces hold %d bytes, the mapping %d", total, size)
	}
	if len(pieces) == 1 {
		p, err := unix.MmapPtr(fds[0], int64(pieces[0].FdOff), nil, uintptr(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		if err != nil {
			return mapping{}, fail(unix.ENOMEM, "mapping the region's memfd: %v", err)
		}
		return mapping{(*byte)(p), uintptr(size)}, nil
	}
	base, err := unix.MmapPtr(-1, 0, nil, uintptr(size), unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return mapping{}, fail(unix.ENOMEM, "reserving %d bytes for the region: %v", size, err)
	}
	off := uintptr(0)
	for i, pc := range pieces {
		if _, err := unix.MmapPtr(fds[i], int64(pc.FdOff), unsafe.Add(base, off), uintptr(pc.Len),
			unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_FIXED); err != nil {
			_ = unix.MunmapPtr(base, uintptr(size))
			return mapping{}, fail(unix.ENOMEM, "mapping piece %d of the region: %v", i, err)
		}
		off += uintptr(pc.Len)
	}
	return mapping{(*byte)(base), uintptr(size)}, nil
}

func (s *session) deregMR(h uint32) error {
	o := s.mrs[h]
	if o == nil {
		return fail(unix.EINVAL, "no MR %d in this session", h)
	}
	_ = o.mr.Dereg()
	delete(s.mrs, h)
	o.pd.refs--
	s.counts.mrs.Add(-1)
	s.release(o.m)
	return nil
}

// release unmaps m, or, while the session has QPs that may hold work resolved
// into it, puts anonymous memory in its place until they are gone.
func (s *session) release(m mapping) {
	if len(s.qps) == 0 {
		_ = unix.MunmapPtr(unsafe.Pointer(m.p), m.n)
		return
	}
	// On failure the shared mapping stays until then, rather than a hole the
	// engine could fault on.
	_, _ = unix.MmapPtr(-1, 0, unsafe.Pointer(m.p), m.n, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED|unix.MAP_NORESERVE)
	s.graveyard = append(s.graveyard, m)
}

// sweep unmaps the graveyard once no QP is left.
func (s *session) sweep() {
	if len(s.qps) != 0 {
		return
	}
	for _, m := range s.graveyard {
		_ = unix.MunmapPtr(unsafe.Pointer(m.p), m.n)
	}
	s.graveyard = nil
}

// ---- completion channels ----

func (s *session) createChannel(fd int) (*Handle, error) {
	c, err := newChan(fd)
	if err != nil {
		return nil, err
	}
	h := s.handleID()
	s.chans[h] = c
	return &Handle{h}, nil
}

// asyncChannel makes fd the session's asynchronous event channel.
func (s *session) asyncChannel(fd int) error {
	c, err := newChan(fd)
	if err != nil {
		return err
	}
	s.async.set(c)
	return nil
}

// newChan takes fd, the daemon's end of a client's SOCK_SEQPACKET socketpair.
func newChan(fd int) (*chanObj, error) {
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil || typ != unix.SOCK_SEQPACKET {
		unix.Close(fd)
		return nil, fail(unix.EINVAL, "a channel's descriptor must be a SOCK_SEQPACKET socket")
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, fail(unix.EINVAL, "%v", err)
	}
	return &chanObj{fd: fd}, nil
}

func (c *chanObj) close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		unix.Close(c.fd)
		c.fd = -1
	}
	c.mu.Unlock()
}

// signal writes one event; a full channel (the application reads no events)
// drops it: notification is re-armed by ibv_req_notify_cq anyway.
func (c *chanObj) signal(cookie uint64) {
	c.write(binary.LittleEndian.AppendUint64(nil, cookie))
}

// write sends one message unless the channel is closed or full.
func (c *chanObj) write(b []byte) {
	c.mu.Lock()
	if !c.closed {
		_, _ = unix.Write(c.fd, b)
	}
	c.mu.Unlock()
}

func (s *session) destroyChannel(h uint32) error {
	c := s.chans[h]
	if c == nil {
		return fail(unix.EINVAL, "no completion channel %d in this session", h)
	}
	if c.refs > 0 {
		return fail(unix.EBUSY, "completion channel %d still has %d CQs", h, c.refs)
	}
	c.close()
	delete(s.chans, h)
	return nil
}

// ---- CQ ----

// createCQ creates a CQ whose completions the engine writes into a new CQ ring;
// the reply carries the ring's memfd.
func (s *session) createCQ(r *CreateCQReq) (*CreateCQReply, []int, error) {
	if r.CQE < 1 || r.CQE > maxCQE {
		return nil, nil, fail(unix.EINVAL, "cqe %d out of range 1..%d", r.CQE, maxCQE)
	}
	var ch *chanObj
	if r.Channel != 0 {
		if ch = s.chans[r.Channel]; ch == nil {
			return nil, nil, fail(unix.EINVAL, "no completion channel %d in this session", r.Channel)
		}
	}
	// A CQ holds 2^k − 1 completions, the least such number not below cqe, and
	// ibv_create_cq reports that in cq->cqe (rxe_queue_init in rxe_queue.c,
	// rxe_cq_from_init in rxe_cq.c: 2 → 3, 16 → 31).
	cqe := min(rxeSlots(r.CQE), uint32(maxCQE))
	ring, reply, err := newCQRing(cqe)
	if err != nil {
		return nil, nil, err
	}
	o := &cqObj{cq: s.dev.CreateCQWithSink(int(cqe), ring), ring: ring, ch: ch, cookie: r.Cookie}
	if ch != nil {
		ch.refs++
		ctx, cancel := context.WithCancel(s.ctx)
		o.stop, o.done = cancel, make(chan struct{})
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer close(o.done)
			o.watch(ctx)
		}()
	}
	h := s.handleID()
	s.cqs[h] = o
	s.counts.cqs.Add(1)
	s.poller.events.setCQ(o.cq, &asyncDest{&s.async, r.Cookie})
	reply.Handle = h
	fd := ring.m.fd
	ring.m.fd = -1 // the caller closes it once sent
	return reply, []int{fd}, nil
}

// watch signals the channel at each completion event of the CQ: the next
// completion after ibv_req_notify_cq armed it, or the next solicited one
// (transport.CompletionQueue.Arm, which follows rdma_rxe).
func (o *cqObj) watch(ctx context.Context) {
	for {
		select {
		case <-o.cq.Events():
			o.ch.signal(o.cookie)
		case <-ctx.Done():
			return
		}
	}
}

func (s *session) destroyCQ(h uint32) error {
	o := s.cqs[h]
	if o == nil {
		return fail(unix.EINVAL, "no CQ %d in this session", h)
	}
	if o.refs > 0 {
		return fail(unix.EBUSY, "CQ %d is still used by %d QPs", h, o.refs)
	}
	if o.stop != nil {
		o.stop()
		<-o.done // the watcher reads the ring
		o.ch.refs--
	}
	s.poller.events.setCQ(o.cq, nil)
	o.ring.m.close()
	delete(s.cqs, h)
	s.counts.cqs.Add(-1)
	return nil
}

func (s *session) reqNotify(r *NotifyReq) error {
	o := s.cqs[r.CQ]
	if o == nil {
		return fail(unix.EINVAL, "no CQ %d in this session", r.CQ)
	}
	if o.ch == nil {
		return fail(unix.EINVAL, "CQ %d has no completion channel", r.CQ)
	}
	o.cq.Arm(r.SolicitedOnly != 0)
	return nil
}

// ---- QP ----

// rxeQPCap returns the capabilities rdma_rxe gives a QP asked for r's (what
// ibv_create_qp writes back into cap, and the QP then allows): a send WQE holds
// max(max_send_sge × 16, max_inline_data) bytes, so max_send_sge becomes that / 16
// and max_inline_data that (rxe_init_sq in drivers/infiniband/sw/rxe/rxe_qp.c: one
// SGE gives 16 bytes of inline data); each queue holds 2^k − 1 WRs, the least such
// number not below the request (rxe_queue_init in rxe_queue.c: 128 → 255, 0 → 0).
// A queue of 0 WRs or 0 SGEs is reported as such (posting to it then fails in the
// library, ENOMEM or EINVAL, as on rxe); engineCap gives the engine at least one.
func rxeQPCap(r *CreateQPReq) transport.QPCap {
	wqe := max(r.MaxSendSGE*16, r.MaxInline)
	slots := func(n uint32) int { return int(min(rxeSlots(n), maxQPWR)) } // max_qp_wr itself: 2^21 − 1 on rxe, max_qp_wr here
	return transport.QPCap{MaxSendWR: slots(r.MaxSendWR), MaxRecvWR: slots(r.MaxRecvWR),
		MaxSendSGE: int(wqe / 16), MaxRecvSGE: int(r.MaxRecvSGE), MaxInlineData: int(wqe)}
}

// engineCap is c with every queue and SGE count at least 1, as the engine's
// QPs need them.
func engineCap(c transport.QPCap) transport.QPCap {
	c.MaxSendWR, c.MaxRecvWR = max(c.MaxSendWR, 1), max(c.MaxRecvWR, 1)
	c.MaxSendSGE, c.MaxRecvSGE = max(c.MaxSendSGE, 1), max(c.MaxRecvSGE, 1)
	return c
}

// rxeSlots is the number of WRs rdma_rxe gives a queue asked for n: 2^k − 1, the
// least such number not below n (rxe_queue_init in rxe_queue.c).
func rxeSlots(n uint32) uint32 { return roundPow2(n+1) - 1 }

// rxeRdAtomic rounds a max_rd_atomic or max_dest_rd_atomic of 1 to
// transport.MaxQPRdAtom up to a power of two, as rdma_rxe stores it.
func rxeRdAtomic(n uint8) uint8 {
	if n == 0 || int(n) > transport.MaxQPRdAtom {
		return n
	}
	return uint8(roundPow2(uint32(n)))
}

// roundPow2 returns the least power of two not below n (n ≥ 1).
func roundPow2(n uint32) uint32 {
	p := uint32(1)
	for p < n {
		p <<= 1
	}
	return p
}

// createQP creates an RC, UC or UD QP and its rings; the reply carries the
// rings' memfd and the doorbell eventfd.
func (s *session) createQP(r *CreateQPReq) (*CreateQPReply, []int, error) {
	if r.QPType != qptRC && r.QPType != qptUC && r.QPType != qptUD {
		return nil, nil, fail(unix.EOPNOTSUPP, "QP type %d: only RC, UC and UD QPs (IBV_QPT_RC, _UC, _UD) are supported", r.QPType)
	}
	pd, scq, rcq := s.pds[r.PD], s.cqs[r.SendCQ], s.cqs[r.RecvCQ]
	if pd == nil || scq == nil || rcq == nil {
		return nil, nil, fail(unix.EINVAL, "PD %d, send CQ %d or receive CQ %d is not in this session", r.PD, r.SendCQ, r.RecvCQ)
	}
	if r.MaxSendWR > maxQPWR || r.MaxRecvWR > maxQPWR || r.MaxSendSGE > maxSGE || r.MaxRecvSGE > maxSGE || r.MaxInline > transport.MaxInline {
		return nil, nil, fail(unix.EINVAL, "capabilities %d/%d WRs, %d/%d SGEs, %d inline exceed %d WRs, %d SGEs, %d inline bytes",
			r.MaxSendWR, r.MaxRecvWR, r.MaxSendSGE, r.MaxRecvSGE, r.MaxInline, maxQPWR, maxSGE, transport.MaxInline)
	}
	c := rxeQPCap(r)
	init := transport.QPInitAttr{Type: transport.QPType(r.QPType), SendCQ: scq.cq, RecvCQ: rcq.cq, Cap: engineCap(c), SigAll: r.SQSigAll != 0}
	var so *srqObj
	if r.SRQ != 0 {
		if so = s.srqs[r.SRQ]; so == nil {
			return nil, nil, fail(unix.EINVAL, "SRQ %d is not in this session", r.SRQ)
		}
		init.SRQ = so.srq
	}
	qp, err := pd.pd.CreateQP(init)
	if err != nil {
		return nil, nil, fail(unix.EINVAL, "%v", err)
	}
	h := s.handleID()
	o := &qpObj{qp: qp, pd: pd, send: scq, recv: rcq, srq: so}
	if so != nil {
		so.refs++
		c.MaxRecvWR, c.MaxRecvSGE = 0, 0 // as rdma_rxe reports a QP with an SRQ
	}
	o.caps = CreateQPReply{Handle: h, QPN: qp.QPN(), MaxSendWR: uint32(c.MaxSendWR), MaxRecvWR: uint32(c.MaxRecvWR),
		MaxSendSGE: uint32(c.MaxSendSGE), MaxRecvSGE: uint32(c.MaxRecvSGE), MaxInline: uint32(c.MaxInlineData)}
	if r.QPType == qptUD {
		o.caps.MaxUDMsg = uint32(s.dev.MaxPathMTU().Bytes()) // what PostSend allows (a UD message is one packet)
	}
	qpLayout(&o.caps)
	if o.ring, err = newQPRing(qp, pd.pd, &o.caps, s.ahs, s.logf); err != nil {
		_ = qp.Destroy()
		return nil, nil, err
	}
	db, err := unix.Dup(int(o.ring.db.Fd()))
	if err != nil {
		o.ring.close()
		_ = qp.Destroy()
		return nil, nil, fail(unix.EMFILE, "doorbell: %v", err)
	}
	fds := []int{o.ring.m.fd, db}
	o.ring.m.fd = -1 // the caller closes both once sent
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		o.ring.ring(s.dev)
	}()
	s.poller.add(o.ring)
	s.poller.events.setQP(qp.QPN(), &asyncDest{&s.async, r.Cookie})
	o.attr = QPAttrMsg{QP: h, PortNum: 1}
	s.qps[h] = o
	pd.refs++
	scq.refs++
	rcq.refs++
	s.counts.qps.Add(1)
	return &o.caps, fds, nil
}

func (s *session) modifyQP(r *QPAttrMsg) error {
	o := s.qps[r.QP]
	if o == nil {
		return fail(unix.EINVAL, "no QP %d in this session", r.QP)
	}
	mask := transport.QPAttrMask(r.Mask)
	cur, next := o.qp.State(), transport.QPState(r.State)
	if mask&maskCurState != 0 {
		cur = transport.QPState(r.CurState)
	}
	if mask&transport.QP_STATE == 0 {
		next = cur
	}
	if r.State > uint32(transport.QPS_ERR) && mask&transport.QP_STATE != 0 || r.CurState > uint8(transport.QPS_ERR) && mask&maskCurState != 0 {
		return fail(unix.EINVAL, "qp_state %d or cur_qp_state %d", r.State, r.CurState)
	}
	if err := modifyOK(cur, next, o.qp.Type(), mask); err != nil {
		return fail(unix.EINVAL, "%v", err)
	}
	mask &^= ignoredMask
	if mask&transport.QP_PORT != 0 && r.PortNum != 1 {
		return fail(unix.EINVAL, "port %d: the device has port 1 only", r.PortNum)
	}
	if mask&transport.QP_PKEY_INDEX != 0 && r.PKeyIndex != 0 {
		return fail(unix.EINVAL, "pkey_index %d: the P_Key table has one entry", r.PKeyIndex)
	}
	if mask&transport.QP_AV != 0 && r.IsGlobal == 0 {
		return fail(unix.EINVAL, "ah_attr %s", noGRH)
	}
	if mask&transport.QP_STATE == 0 {
		r.State = uint32(o.qp.State()) // attr->qp_state is read only under IBV_QP_STATE
	}
	// rdma_rxe keeps max_rd_atomic and max_dest_rd_atomic rounded up to a power of
	// two (rxe_qp_from_attr in rxe_qp.c), and ibv_query_qp reports them so.
	// Values above max_qp_rd_atom are left for Modify to refuse, as rxe_qp_chk_attr
	// does before it rounds.
	r.MaxRdAtomic, r.MaxDestRdAtomic = rxeRdAtomic(r.MaxRdAtomic), rxeRdAtomic(r.MaxDestRdAtomic)
	a := transport.QPAttr{State: transport.QPState(r.State), PathMTU: roce.MTU(r.PathMTU), DestQPN: r.DestQPN,
		RQPSN: r.RQPSN, SQPSN: r.SQPSN, MaxRdAtomic: r.MaxRdAtomic, MaxDestRdAtomic: r.MaxDestRdAtomic,
		MinRNRTimer: r.MinRNRTimer, Timeout: r.Timeout, RetryCnt: r.RetryCnt, RNRRetry: r.RNRRetry,
		AccessFlags: transport.Access(r.AccessFlags & 0xf), QKey: r.QKey,
		AH: transport.AddressHandle{DGID: roce.GID(r.DGID), SGIDIndex: int(r.SGIDIndex), TrafficClass: r.TrafficClass, HopLimit: r.HopLimit, FlowLabel: r.FlowLabel}}
	if r.PathMTU > 255 {
		a.PathMTU = 0
	}
	var err error
	if mask&transport.QP_STATE != 0 && a.State == transport.QPS_RESET {
		// RESET empties the work queues: what the rings still hold goes too.
		s.poller.locked(func() {
			if err = o.qp.Modify(a, mask); err == nil {
				o.ring.discard()
			}
		})
	} else {
		err = o.qp.Modify(a, mask)
	}
	if err != nil {
		return fail(unix.EINVAL, "%v", err)
	}
	// Remember what was set, for ibv_query_qp.
	t := &o.attr
	set := func(bit transport.QPAttrMask, f func()) {
		if mask&bit != 0 {
			f()
		}
	}
	set(transport.QP_ACCESS_FLAGS, func() { t.AccessFlags = r.AccessFlags })
	set(transport.QP_AV, func() {
		t.DGID, t.SGIDIndex, t.HopLimit, t.TrafficClass, t.FlowLabel, t.IsGlobal = r.DGID, r.SGIDIndex, r.HopLimit, r.TrafficClass, r.FlowLabel, 1
	})
	set(transport.QP_PATH_MTU, func() { t.PathMTU = r.PathMTU })
	set(transport.QP_DEST_QPN, func() { t.DestQPN = r.DestQPN })
	set(transport.QP_RQ_PSN, func() { t.RQPSN = r.RQPSN })
	set(transport.QP_SQ_PSN, func() { t.SQPSN = r.SQPSN })
	set(transport.QP_MAX_QP_RD_ATOMIC, func() { t.MaxRdAtomic = r.MaxRdAtomic })
	set(transport.QP_MAX_DEST_RD_ATOMIC, func() { t.MaxDestRdAtomic = r.MaxDestRdAtomic })
	set(transport.QP_MIN_RNR_TIMER, func() { t.MinRNRTimer = r.MinRNRTimer })
	set(transport.QP_TIMEOUT, func() { t.Timeout = r.Timeout })
	set(transport.QP_RETRY_CNT, func() { t.RetryCnt = r.RetryCnt })
	set(transport.QP_RNR_RETRY, func() { t.RNRRetry = r.RNRRetry })
	set(transport.QP_QKEY, func() { t.QKey = r.QKey })
	return nil
}

func (s *session) queryQP(h uint32) (*QPAttrMsg, error) {
	o := s.qps[h]
	if o == nil {
		return nil, fail(unix.EINVAL, "no QP %d in this session", h)
	}
	a := o.attr
	a.State = uint32(o.qp.State())
	return &a, nil
}

func (s *session) destroyQP(h uint32) error {
	o := s.qps[h]
	if o == nil {
		return fail(unix.EINVAL, "no QP %d in this session", h)
	}
	o.destroy(s.poller)
	delete(s.qps, h)
	o.pd.refs--
	o.send.refs--
	o.recv.refs--
	if o.srq != nil {
		o.srq.refs--
	}
	s.counts.qps.Add(-1)
	s.sweep()
	return nil
}

// destroy stops the engine's loop reading the QP's rings, destroys the QP and
// unmaps its rings.
func (o *qpObj) destroy(p *poller) {
	p.events.setQP(o.qp.QPN(), nil)
	p.remove(o.ring)
	_ = o.qp.Destroy()
	o.ring.close()
}

// close destroys everything the session owns: QPs (their work discarded; the
// peer sees retry-exceeded), CQs, MRs (unmapped), PDs and channels.
func (s *session) close() {
	if s == nil {
		return
	}
	s.closeCM()
	for h, o := range s.qps {
		o.destroy(s.poller)
		delete(s.qps, h)
	}
	for h, o := range s.srqs {
		_ = o.srq.Destroy()
		s.poller.events.setSRQ(o.srq, nil)
		delete(s.srqs, h)
	}
	s.counts.srqs.Store(0)
	s.cancel()
	s.wg.Wait()
	for _, o := range s.cqs {
		s.poller.events.setCQ(o.cq, nil)
		o.ring.m.close()
	}
	s.async.set(nil)
	s.ahs.mu.Lock()
	clear(s.ahs.m)
	s.ahs.mu.Unlock()
	for h, o := range s.mrs {
		_ = o.mr.Dereg()
		_ = unix.MunmapPtr(unsafe.Pointer(o.m.p), o.m.n)
		delete(s.mrs, h)
	}
	s.sweep()
	for _, c := range s.chans {
		c.close()
	}
	clear(s.pds)
	clear(s.cqs)
	clear(s.chans)
	s.counts.pds.Store(0)
	s.counts.mrs.Store(0)
	s.counts.cqs.Store(0)
	s.counts.qps.Store(0)
}
