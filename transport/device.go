package transport

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/xroce/xroce/roce"
)

// Device is a RoCEv2 endpoint on a Link: the engine that owns every queue pair.
type Device struct {
	link Link
	// lender is link as a TxLender, or nil: frames are then built in bufs.
	lender TxLender
	clock  Clock
	gids   atomic.Pointer[roce.GIDTable] // replaced whole by FollowAddrs, never changed in place

	mu      sync.Mutex // guards the engine state below; held by Progress for a whole pass
	qps     map[uint32]*QueuePair
	paths   map[netip.Addr]*peerPath // loss state per peer address (peerpath.go)
	nextQPN uint32
	nextPD  uint32
	closed  bool

	mrs mrTable // its own lock: posting resolves keys without the engine lock

	// scheduling (sched.go)
	ready      []*QueuePair // QPs that may have something to send
	readySpare []*QueuePair
	timers     timerHeap

	// posting (post.go): QPs with work requests not yet taken in by the engine
	postMu    sync.Mutex
	anyPosted atomic.Bool // set after a QP joins postedQPs
	postedQPs []*QueuePair
	postSpare []*QueuePair

	fatal    []*QueuePair // QPs that lost a receive completion to a CQ overrun in this pass
	evMu     sync.Mutex
	events   []AsyncEvent
	evNotify chan struct{}

	counters *Counters
	cc       CongestionControl
	dcqcn    DCQCNParams
	waiting  atomic.Bool // Run is (about to be) blocked in Link.Wait
	posted   atomic.Bool // work was posted since the loop last looked
	poller   atomic.Pointer[Poller]
	busyPoll time.Duration

	// receive
	rxBatch  [][]byte
	rxPkt    roce.Packet
	looping  bool           // input takes looped-back frames (loopback.go)
	dstTable *roce.GIDTable // the table dstOK was found in (ownDst)
	dstOK    netip.Addr     // the last destination address found in it
	acks     []*QueuePair   // QPs with an ACK to send after this receive batch

	// transmit
	txPkt     roce.Packet
	txq       ring[[]byte] // built frames not yet accepted by the link
	txMeta    ring[txInfo] // what each frame of txq is: the requester learns when its packets leave
	txNext    txInfo       // what the frame emit queues next is (set by the requester)
	bufs      [][]byte     // free frame buffers
	loop      [][]byte     // frames to the device itself, input at the next pass (loopback.go)
	loopIn    [][]byte     // the frames being input from loop
	mac       [6]byte      // the link's Ethernet address: frames to it loop back
	bufSize   int
	retryAt   time.Time     // when to offer a refused frame again
	busySince time.Time     // first refusal of the current busy period
	busyDelay time.Duration // EWMA of how long the link stays busy
	txSlice   [][]byte
	ipID      uint16
	scratch   []byte // gather buffer for payloads spanning SGEs
	now       time.Time
}

// Options tunes a Device.
type Options struct {
	// Clock replaces the system clock (tests use a FakeClock).
	Clock Clock
	// GIDs replaces the GID table derived from the link's addresses.
	GIDs roce.GIDTable
	// BusyPoll is how long Run keeps polling the link after its last work before it
	// sleeps in Link.Wait (0: DefaultBusyPoll; negative: never). Waking a sleeping
	// loop costs more than a frame's whole processing: polling briefly through the
	// gaps of a stream triples the 64-byte message rate over AF_XDP on a veth pair,
	// at the cost of that much CPU after the traffic stops. Past it, Run still polls
	// while a timer is due within 1 ms (a lossy QP's probe or RTO, transport/sched.go
	// timerHorizon) rather than sleep towards it; with a negative BusyPoll it never
	// polls.
	BusyPoll time.Duration
	// CC selects the congestion control: CCNone (rdma_rxe's behaviour, the default)
	// or CCDCQCN (docs/congestion.md).
	CC CongestionControl
	// DCQCN tunes DCQCN; zero fields take mlx5's defaults (DefaultDCQCN).
	DCQCN DCQCNParams
}

// DefaultBusyPoll is Options.BusyPoll's default: measured best between 5 and 50 µs
// on the 2-core development VM (xdp's BenchmarkAFXDP).
const DefaultBusyPoll = 20 * time.Microsecond

// Batch sizes of one Progress pass. The transmit budget is one QP's whole PSN
// window (MaxUnackedPSN), so that what a QP may send leaves in one pass and one
// link Send (one sendto on AF_XDP): a 64 B write_bw burst of 100 work requests
// (perftest's CQ moderation) went out as 64 and 36 frames with a budget of 64, and
// the second kick cost about 5 % of the sender's CPU a message (docs/bench.md,
// "One kick a burst").
const (
	rxBatchSize = 64
	txBudget    = MaxUnackedPSN
)

// Open returns a Device on link. Its GID table is built from the link's MAC and
// addresses as rdma_rxe would (roce.BuildGIDTable) unless opts.GIDs is set.
func Open(link Link, opts Options) (*Device, error) {
	if link == nil {
		return nil, fmt.Errorf("transport: Open needs a link")
	}
	d := &Device{link: link, clock: opts.Clock, qps: map[uint32]*QueuePair{}, paths: map[netip.Addr]*peerPath{}, nextQPN: 17,
		counters: newCounters(), busyDelay: 20 * time.Microsecond, busyPoll: opts.BusyPoll,
		evNotify: make(chan struct{}, 1), cc: opts.CC, dcqcn: opts.DCQCN.withDefaults()}
	if d.busyPoll == 0 {
		d.busyPoll = DefaultBusyPoll
	}
	if d.clock == nil {
		d.clock = systemClock{}
	}
	gids := opts.GIDs
	if gids == nil {
		gids = roce.BuildGIDTable(link.HardwareAddr(), link.Addrs())
	}
	d.gids.Store(&gids)
	d.lender, _ = link.(TxLender)
	d.mac = link.HardwareAddr()
	d.rxBatch = make([][]byte, rxBatchSize)
	// The largest frame: Ethernet with VLAN, IPv6, UDP, the longest header stack,
	// a 4096-byte payload and the ICRC.
	d.bufSize = 18 + 40 + 8 + 40 + 4096 + 4
	d.scratch = make([]byte, 4096)
	return d, nil
}

// GIDTable returns the device's GID table. The caller must not change it; a later
// FollowAddrs does not change it either (it replaces the device's table).
func (d *Device) GIDTable() roce.GIDTable { return *d.gids.Load() }

// FollowAddrs brings the GID table up to the link's addresses now (roce.GIDTable
// Follow: entries keep their indexes, a removed address leaves an empty slot, a
// new one takes the first empty slot), as ib_core's roce_gid_mgmt.c does for
// rdma_rxe on every address notifier; it returns the entries added and removed.
// Connected QPs keep the addresses they resolved at modify_qp, as they keep their
// GID attribute in the kernel. Calls must not overlap.
func (d *Device) FollowAddrs() (added, removed []roce.GIDEntry) {
	t, added, removed := d.GIDTable().Follow(d.link.HardwareAddr(), d.link.Addrs())
	if len(added)+len(removed) > 0 {
		d.gids.Store(&t)
	}
	return added, removed
}

// Link returns the device's link.
func (d *Device) Link() Link { return d.link }

// MaxPathMTU returns the largest path MTU the device's port carries: the IB MTU that
// fits the link's netdev MTU (roce.MTUFromNetdev, as rdma_rxe's rxe_set_mtu), capped
// by what the link itself carries (LinkCaps.MaxPathMTU). It is the port's active_mtu.
func (d *Device) MaxPathMTU() roce.MTU {
	m := roce.MTUFromNetdev(d.link.MTU())
	if c := d.link.Caps(); c.MaxPathMTU != 0 {
		m = roce.MinMTU(m, c.MaxPathMTU)
	}
	return m
}

// Counters returns the device-wide counters.
func (d *Device) Counters() *Counters { return d.counters }

// Close closes the link. Queue pairs stop.
func (d *Device) Close() error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	return d.link.Close()
}

// wakeLoop tells a waiting Run that work was posted. The link is only woken (a
// syscall for AF_XDP) when the loop is actually waiting.
func (d *Device) wakeLoop() {
	// Stored only when clear (Store is a locked XCHG): a set flag has not yet been
	// cleared by the pass that will take this work, since Run clears it before it
	// looks for posted work.
	if !d.posted.Load() {
		d.posted.Store(true)
	}
	if d.waiting.Load() {
		d.link.Wake()
	}
}

// Run drives the engine until ctx ends or the link fails: Progress while there is
// work, otherwise wait for frames, posted work or the next timer.
func (d *Device) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { d.link.Wake() })
	defer stop()
	var lastBusy time.Time // wall time: busy polling is about CPUs, not protocol time
	for ctx.Err() == nil {
		if d.posted.Load() { // no locked XCHG while nothing was posted
			d.posted.Store(false)
		}
		p := d.pollerOf()
		found := p != nil && p.Poll()
		busy, err := d.progress()
		if err != nil {
			return err
		}
		if busy || found {
			lastBusy = time.Now()
			continue
		}
		busyWindow := time.Since(lastBusy) < d.busyPoll
		if d.busyPoll > 0 && (busyWindow || d.timerNear()) {
			if p != nil || !busyWindow {
				// The producers are other processes (the verbs daemon's
				// applications), or, towards a timer, the kernel's softirq
				// work for this CPU: give them the CPU, not only other
				// goroutines.
				yieldCPU()
			}
			if p == nil {
				runtime.Gosched() // let the application's goroutines post and poll
			}
			continue
		}
		d.waiting.Store(true)
		if d.posted.Load() || ctx.Err() != nil { // posted after progress looked
			d.waiting.Store(false)
			continue
		}
		if p != nil && !p.Sleep() { // a producer's work arrived meanwhile
			d.waiting.Store(false)
			continue
		}
		err = d.link.Wait(d.NextDeadline())
		d.waiting.Store(false)
		if p != nil {
			p.Awake()
		}
		if err != nil {
			return err
		}
	}
	return ctx.Err()
}

// Progress makes one non-blocking pass of the engine and reports whether it did
// anything: take in posted work, receive a batch and answer it, run due timers, send
// what the ready QPs have, and hand frames to the link (docs/engine.md). The error is
// the link's when it failed (ErrLinkClosed after Close); the engine is then unusable.
func (d *Device) Progress() (bool, error) { return d.progress() }

func (d *Device) progress() (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false, ErrLinkClosed
	}
	d.now = d.clock.Now()
	did := d.takePosted()
	n, err := d.link.Recv(d.rxBatch)
	if err != nil {
		d.counters.inc(CntLinkDowned)
		return false, err
	}
	for _, f := range d.rxBatch[:n] {
		d.input(f)
	}
	if d.inputLooped() || n > 0 {
		did = true
	}
	for _, qp := range d.acks {
		qp.resp.sendAck(qp)
	}
	clear(d.acks)
	d.acks = d.acks[:0]
	if d.runTimers() {
		did = true
	}
	if d.txq.len() == 0 && d.runReady() {
		did = true
	}
	if len(d.fatal) > 0 {
		d.failFatal()
	}
	sent, err := d.flushTx()
	if err != nil {
		return did, err
	}
	return did || sent || len(d.loop) > 0, nil
}

// NextDeadline returns the earliest time a timer or a held frame needs the engine,
// or the zero time when nothing waits. Its cost does not depend on the number of QPs.
func (d *Device) NextDeadline() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.nextTimer()
	if d.txq.len() > 0 {
		t = earliest(t, d.retryAt)
	}
	return t
}

// input handles one received frame.
func (d *Device) input(f []byte) {
	p := &d.rxPkt
	if err := p.Decode(f); err != nil {
		if err == roce.ErrBadICRC {
			d.counters.inc(CntRcvdICRCErr)
		} else {
			d.counters.inc(CntRcvdMalformed)
		}
		return
	}
	if !d.looping && !d.ownDst(p.DstAddr()) {
		d.counters.inc(CntRcvdBadDGID)
		return
	}
	if p.BTH.Opcode == roce.CNP {
		d.cnpReceived(p)
		return
	}
	qp := d.qps[p.BTH.DestQP]
	if qp == nil || qp.state < QPS_RTR || qp.state == QPS_ERR || qp.fatal || p.BTH.Opcode.Service() != qp.svc ||
		(qp.svc != roce.ServiceUD && (p.SrcAddr() != qp.peer || p.DstAddr() != qp.local)) || p.BTH.PKey&0x7FFF != 0x7FFF {
		d.counters.inc(CntRcvdUnknownQP)
		return
	}
	qp.count(CntRcvdPkts)
	if p.ECN() == roce.CE {
		d.congested(qp)
	}
	if qp.svc != roce.ServiceRC { // UC and UD answer nothing: no need to visit the QP
		qp.unreliableRequest(p)
		return
	}
	d.schedule(qp) // an answer may open the send window; a request may need a READ response
	if p.BTH.Opcode.Is(roce.ClassResponse) {
		if qp.state >= QPS_RTS {
			qp.req.complete(qp, p)
			qp.releaseSQ()
		}
		return
	}
	qp.resp.request(qp, p)
}

// ownDst says whether a received frame's destination address is one of the
// device's GIDs, or a multicast address, as rdma_rxe requires before it takes a
// frame in (rxe_chk_dgid in drivers/infiniband/sw/rxe/rxe_recv.c): a QP whose local
// address went away receives nothing more, though its peer still sends. The last
// address found is remembered with the table it was found in.
func (d *Device) ownDst(a netip.Addr) bool {
	t := d.gids.Load()
	if t == d.dstTable && a == d.dstOK {
		return true
	}
	if a.IsMulticast() {
		return true
	}
	if _, ok := t.Find(roce.GIDFromAddr(a)); !ok {
		return false
	}
	d.dstTable, d.dstOK = t, a
	return true
}

// lendTx returns n bytes of the link's transmit memory for a frame of flow sport
// (TxLender), or nil.
func (d *Device) lendTx(n int, sport uint16) []byte {
	if d.lender == nil {
		return nil
	}
	return d.lender.LendTx(n, sport)
}

// releaseTx takes back a frame buffer the link will not send: a lent one goes back
// to the link, the engine's own to its free list.
func (d *Device) releaseTx(buf []byte, lent bool) {
	if lent {
		d.lender.ReturnTx(buf)
		return
	}
	d.bufs = append(d.bufs, buf[:cap(buf)])
}

// frame returns a free frame buffer.
func (d *Device) frame() []byte {
	if k := len(d.bufs); k > 0 {
		b := d.bufs[k-1]
		d.bufs = d.bufs[:k-1]
		return b
	}
	return make([]byte, d.bufSize)
}

// emit encodes d.txPkt (headers from qp's template already copied in), queues it and
// returns the frame's length (0 if it could not be encoded).
func (d *Device) emit(qp *QueuePair) int {
	p := &d.txPkt
	if !p.IsIPv6 {
		d.ipID++
		p.IPv4.ID = d.ipID
	}
	m := d.txNext
	d.txNext = txInfo{}
	if p.Eth.Dst == d.mac && d.mac != [6]byte{} {
		return d.loopBack(qp, &m)
	}
	buf := d.lendTx(p.Len(), p.UDP.SrcPort)
	m.lent = buf != nil
	if buf == nil {
		buf = d.frame()
	}
	n, err := p.Encode(buf)
	if err != nil { // the engine builds packets from the opcode table: a bug if reached
		d.releaseTx(buf, m.lent)
		d.counters.inc(CntSendErr)
		return 0
	}
	d.txq.push(buf[:n])
	d.txMeta.push(m)
	qp.counters[CntSentPkts]++
	return n
}

// start prepares d.txPkt from qp's header template for a packet with opcode op.
func (d *Device) start(qp *QueuePair, op roce.Opcode, psn uint32) *roce.Packet {
	p := &d.txPkt
	*p = qp.tmpl
	p.BTH.Opcode = op
	p.BTH.PSN = psn & roce.PSNMask
	return p
}

// flushTx hands queued frames to the link. Frames the link refuses stay queued and
// are offered again after the adaptive delay: an EWMA of how long recent busy
// periods lasted.
func (d *Device) flushTx() (bool, error) {
	if d.txq.len() == 0 {
		return false, nil
	}
	if !d.busySince.IsZero() && d.now.Before(d.retryAt) {
		return false, nil
	}
	sent := false
	for d.txq.len() > 0 {
		batch := d.txBatch()
		n, err := d.link.Send(batch)
		d.depart(batch, n)
		err = d.countSent(n, err)
		if n > 0 {
			sent = true
			if !d.busySince.IsZero() {
				d.counters.add(CntLinkBusyResent, uint64(n))
				sample := d.now.Sub(d.busySince)
				d.busyDelay = (7*d.busyDelay + sample) / 8
				d.busyDelay = min(max(d.busyDelay, time.Microsecond), 10*time.Millisecond)
				d.busySince = time.Time{}
			}
		}
		if err != nil {
			d.counters.inc(CntSendErr)
			return sent, err
		}
		if n < len(batch) {
			d.counters.inc(CntLinkBusy)
			if d.busySince.IsZero() {
				d.busySince = d.now
			}
			d.retryAt = d.now.Add(d.busyDelay)
			return sent, nil
		}
	}
	return sent, nil
}

// depart takes the first n frames of batch, which the link accepted, off the
// transmit queue and tells their requesters they left.
func (d *Device) depart(batch [][]byte, n int) {
	for i := 0; i < n; i++ {
		m := d.txMeta.at(0)
		if !m.lent { // a lent buffer is the link's again
			d.bufs = append(d.bufs, batch[i][:cap(batch[i])])
		}
		d.txq.popFront()
		if m.qp != nil {
			m.qp.req.departed(m.qp, m)
		}
		d.txMeta.popFront()
	}
}

// countSent counts the n frames the link accepted in sent_pkts, less those a
// *NotSentError says it dropped, which go to send_err; it returns err unless it was
// that (the engine goes on: the transport resends them).
func (d *Device) countSent(n int, err error) error {
	dropped := 0
	if ns := (*NotSentError)(nil); err != nil && errors.As(err, &ns) { // As makes ns escape: only on an error
		dropped, err = min(ns.Dropped, n), nil
		d.counters.add(CntSendErr, uint64(dropped))
	}
	d.counters.add(CntSentPkts, uint64(n-dropped))
	return err
}

// txBatch returns up to txBudget queued frames as a slice (reusing storage).
func (d *Device) txBatch() [][]byte {
	n := min(d.txq.len(), txBudget)
	if cap(d.txSlice) < n {
		d.txSlice = make([][]byte, 0, txBudget)
	}
	d.txSlice = d.txSlice[:n]
	for i := range n {
		d.txSlice[i] = *d.txq.at(i)
	}
	return d.txSlice
}
