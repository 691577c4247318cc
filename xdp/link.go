package xdp

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xroce/xroce/bpf"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/xdp/xsk"
)

// UMEM and ring sizing. A 4 KiB chunk holds one frame of up to MaxFrame bytes (AF_XDP
// chunks are at most a page); longer frames take several chunks in multi-buffer mode. 2048 chunks each for receive and transmit are 8 MiB each way: at the ~430
// kpps of 1 KiB frames that copy-mode veth carries (docs/afxdp.md) that is ~5 ms of
// traffic, far above the bandwidth-delay product of a LAN path (10 Gb/s × 100 µs =
// 125 KB), so the rings never limit a window of 128 unacknowledged PSNs per QP. The
// library's defaults (128 frames, 64-entry rings) would.
const (
	FrameSize   = 4096
	RxFrames    = 2048
	TxFrames    = 2048
	xdpHeadroom = 256 // XDP_PACKET_HEADROOM: the kernel leaves it free in each RX chunk
	// MaxFrame is the longest frame one RX chunk holds; longer needs multi-buffer.
	MaxFrame = FrameSize - xdpHeadroom
	// maxTxChunks bounds the chunks of one transmitted frame: the kernel's copy mode
	// takes at most MAX_SKB_FRAGS (17) + 1 descriptors per frame, and 3 hold any
	// frame of a 9000-byte MTU (9018 bytes with VLAN).
	maxTxChunks = 4
	// kicksPerSend bounds how often a send retries the TX kick when the kernel
	// answers EAGAIN or takes only part of the ring (it takes at most txBudget
	// descriptors a call).
	kicksPerSend = 64
	// txBudget is the TX descriptors one copy-mode sendto may take (Linux 6.17's
	// XDP_MAX_TX_SKB_BUDGET; the kernel's default is 32). A kick is a system call,
	// about 1 µs on the development VM, and with 32 a PMTU-4096 stream (two
	// descriptors a frame) made one per 16 frames: at 256, alternating runs of
	// WRITE 64 KiB gave 1553-1805 against 1491-1624 MiB/s at PMTU 4096 and
	// 0.73 against 0.68 M msg/s at 64 B (docs/afxdp.md).
	txBudget = 256
)

// Config opens a Link.
type Config struct {
	Interface string   // network interface name
	Mode      bpf.Mode // XDP attach mode
	// Netns is the path of a network namespace (/var/run/netns/NAME) to open the
	// link in; empty means the caller's.
	Netns string
	// SingleBuffer binds the sockets without XDP_USE_SG, as on kernels before 6.6:
	// one chunk per frame, path MTU at most 2048. By default the link asks for
	// multi-buffer and falls back to this when the kernel or driver refuses it.
	SingleBuffer bool
	// Bind chooses zero-copy or copy mode; the zero value lets the kernel choose.
	Bind Bind
}

// Link is a transport.Link on AF_XDP sockets, one per receive queue of the
// interface; each frame is sent from the socket of the queue its flow maps to
// (txQueue) among those the interface also has a transmit queue for.
type Link struct {
	ifc    *iface
	prog   *bpf.Program
	queues []*queue
	// txq is how many of the queues, from the first, transmit: those the interface
	// has transmit queues for (iface.txQueues).
	txq    int
	w      *waiter
	rxNext int

	bind Bind
	// multi: every socket is bound with XDP_USE_SG; else noMulti says why not.
	multi   bool
	noMulti string
	// asm holds the frames Recv reassembled from chained descriptors, valid until
	// the next Recv; nasm of them are in use.
	asm  [][]byte
	nasm int

	mu     sync.Mutex // Send, Recv and Close; Wait and Wake need no lock
	closed bool
	// down: the last kick found the interface down (ENETDOWN). Until it is up
	// again Send drops what it is given, as a network does (transport.NotSentError).
	down bool
}

// queue is one AF_XDP socket and its UMEM bookkeeping.
type queue struct {
	xsk      *xsk.Socket
	received uint64   // frames delivered by Recv
	chained  uint64   // of which arrived as chained descriptors
	joined   uint64   // of which were joined in place (chain)
	sent     uint64   // frames submitted to the TX ring
	inPlace  uint64   // of which the engine encoded in a lent chunk (no copy)
	lent     int      // chunks lent (LendTx) and not yet submitted or returned
	kicks    uint64   // sendto calls
	slots    int      // free TX ring slots during a Send; -1 before Send looks
	rxRefill []uint64 // chunks handed out by the last Recv, to give back to the fill ring
	rxSpare  []uint64 // receive chunks kept out of the working set (rxfill.go)
	txFree   []uint64 // free TX chunk addresses
	descs    []unix.XDPDesc
	rxChain  []unix.XDPDesc // scratch: the descriptors of one received chain
}

// ErrFrameTooLong is returned by Send for a frame longer than the link carries: one
// UMEM chunk without multi-buffer, maxTxChunks chunks with it.
var ErrFrameTooLong = errors.New("xdp: frame longer than the AF_XDP link carries")

// Open attaches the XDP program to the interface and opens one AF_XDP socket per
// receive queue. Errors name the cause: missing privileges (bpf.ErrPermission), no
// such interface (ErrNoInterface), another XDP program attached (bpf.ErrBusy), an
// MTU too large for the XDP mode (bpf.ErrMTU), RLIMIT_MEMLOCK (bpf.ErrMemlock for
// the program's maps, ErrUMEMLimit for the sockets' memory).
func Open(cfg Config) (*Link, error) {
	l := &Link{}
	err := inNetns(cfg.Netns, func() error {
		var err error
		if l.prog, err = bpf.Load(); err != nil { // first: fails without privileges
			return err
		}
		if l.w, err = newWaiter(); err != nil {
			return err
		}
		if l.ifc, err = openIface(cfg.Interface); err != nil {
			return err
		}
		if l.ifc.queues > bpf.MaxQueues {
			return fmt.Errorf("xdp: %s has %d receive queues; at most %d are supported", cfg.Interface, l.ifc.queues, bpf.MaxQueues)
		}
		if err = l.prog.Attach(l.ifc.index, cfg.Mode); err != nil {
			return err
		}
		l.bind = cfg.Bind
		l.multi = !cfg.SingleBuffer
		if cfg.SingleBuffer {
			l.noMulti = "the link was opened single-buffer (xdp.Config.SingleBuffer)"
		}
		if l.queues, err = openQueues(l.ifc, l.multi, l.bind); err != nil && l.multi && sgRefused(err) {
			// The kernel (before 6.6: EINVAL, an unknown bind flag) or the driver
			// (zero-copy without multi-buffer: EOPNOTSUPP) refuses XDP_USE_SG. If the
			// same queues bind without it, that was the reason: run single-buffer.
			if qs, err2 := openQueues(l.ifc, false, l.bind); err2 == nil {
				l.queues, l.multi = qs, false
				l.noMulti = fmt.Sprintf("the kernel refused AF_XDP multi-buffer on %s (%v): it needs Linux 6.6 or later, and in zero-copy mode a driver that supports it", cfg.Interface, err)
				err = nil
			}
		}
		if err != nil && cfg.Bind == BindZeroCopy && errors.Is(err, xsk.ErrBind) {
			return zeroCopyRefused(err, cfg.Interface, l.ifc.driver)
		}
		if err != nil {
			return err
		}
		l.txq = min(max(l.ifc.txQueues, 1), len(l.queues))
		for q, qu := range l.queues {
			if err := l.prog.Register(q, qu.xsk.FD()); err != nil {
				return fmt.Errorf("xdp: registering the socket of queue %d: %w", q, err)
			}
			l.w.watch(qu.xsk.FD())
		}
		return nil
	})
	if err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// openQueues opens one socket per receive queue of the interface, or none.
func openQueues(ifc *iface, multi bool, bind Bind) ([]*queue, error) {
	var qs []*queue
	raiseMemlock(ifc.queues)
	for q := 0; q < ifc.queues; q++ {
		qu, err := newQueue(ifc.index, q, multi, bind)
		if err != nil {
			for _, o := range qs {
				o.xsk.Close()
			}
			return nil, fmt.Errorf("xdp: %s queue %d: %w", ifc.name, q, err)
		}
		qs = append(qs, qu)
	}
	return qs, nil
}

// sgRefused reports whether a bind failed in a way that refusing XDP_USE_SG explains.
func sgRefused(err error) bool {
	return errors.Is(err, xsk.ErrBind) && (errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP))
}

// busyWait is how long newQueue retries a queue another AF_XDP socket holds: the
// kernel releases the socket of a process that just exited after the process is
// gone (a tool started right after another on the same interface met EBUSY).
const busyWait = 2 * time.Second

func newQueue(ifindex, q int, multi bool, bind Bind) (qu *queue, err error) {
	var s *xsk.Socket
	for deadline := time.Now().Add(busyWait); ; time.Sleep(50 * time.Millisecond) {
		s, err = xsk.Open(ifindex, q, xsk.Config{
			Frames: RxFrames + TxFrames, FrameSize: FrameSize,
			FillSize: RxFrames, CompletionSize: TxFrames, RxSize: RxFrames, TxSize: TxFrames,
			MultiBuffer: multi, NeedWakeup: true, TxBudget: txBudget,
			ZeroCopy: bind == BindZeroCopy, Copy: bind == BindCopy,
		})
		if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		if errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.ENOMEM) {
			return nil, umemError(err)
		}
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("%w: %v", bpf.ErrPermission, err)
		}
		if errors.Is(err, unix.EBUSY) {
			return nil, fmt.Errorf("another AF_XDP socket (another xroce?) has been bound to this queue for %v: %w", busyWait, err)
		}
		return nil, err
	}
	qu = &queue{xsk: s, descs: make([]unix.XDPDesc, 0, TxFrames)}
	qu.initFill()
	for i := RxFrames; i < RxFrames+TxFrames; i++ {
		qu.txFree = append(qu.txFree, uint64(i)*FrameSize)
	}
	return qu, nil
}

// Send implements transport.Link: a frame the engine encoded in a chunk lent by
// LendTx goes to the kernel as it is; any other it copies into free TX chunks of
// the queue txQueue picks for it (a frame longer than a chunk into several, chained with
// XDP_PKT_CONTD, when the link is multi-buffer), submits them and kicks the kernel
// on every queue it used, retrying the kick on EAGAIN. It accepts fewer than
// len(frames) when the chosen queue's TX ring or chunks run out (the engine resends
// after its adaptive delay); a frame is submitted whole or not at all.
func (l *Link) Send(frames [][]byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, errClosed
	}
	if l.down {
		if l.ifc.up() {
			l.down = false // what waits on the TX rings leaves with the next kick
		} else {
			for _, f := range frames { // the engine lets go of lent memory it hands over
				l.returnTx(f)
			}
			return len(frames), &transport.NotSentError{Dropped: len(frames), Err: fmt.Errorf("xdp: %s is down", l.ifc.name)}
		}
	}
	maxChunks := 1
	if l.multi {
		maxChunks = maxTxChunks
	}
	for _, q := range l.queues {
		q.slots = -1 // not looked at yet
	}
	sent := 0
	for _, f := range frames {
		if len(f) == 0 { // nothing to put on the wire (the engine never builds one)
			sent++
			continue
		}
		if q, addr, ok := l.lentChunk(f); ok {
			if !q.stageLent(f, addr) {
				break
			}
			sent++
			continue
		}
		k := (len(f) + FrameSize - 1) / FrameSize
		if k > maxChunks {
			if sent == 0 {
				if !l.multi && k <= maxTxChunks {
					return 0, fmt.Errorf("%w: %d bytes, and %s", ErrFrameTooLong, len(f), l.noMulti)
				}
				return 0, fmt.Errorf("%w: %d bytes (at most %d)", ErrFrameTooLong, len(f), maxChunks*FrameSize)
			}
			break
		}
		if !l.queues[txQueue(f, l.txq)].stage(f, k) {
			break
		}
		sent++
	}
	var err error
	for _, q := range l.queues {
		if q.slots < 0 {
			continue
		}
		if n := q.xsk.Tx.Put(q.descs); n != len(q.descs) {
			// Cannot happen: slots came from Tx.Free and only this side produces.
			return 0, fmt.Errorf("xdp: TX ring took %d of %d descriptors", n, len(q.descs))
		}
		q.descs = q.descs[:0]
		if e := l.kick(q); e != nil && err == nil {
			err = e
		}
	}
	return sent, err
}

// stageLent adds the descriptors of frame f, which the engine encoded in place in
// q's chunks from addr (LendTx; one, or a run chained with XDP_PKT_CONTD), to
// q.descs, or reports false when q's TX ring has no room for them. Lent chunks the
// frame turned out not to need are free again.
func (q *queue) stageLent(f []byte, addr uint64) bool {
	q.openSend()
	k := (len(f) + FrameSize - 1) / FrameSize
	if q.slots < k {
		return false
	}
	for off := 0; off < len(f); off += FrameSize {
		d := unix.XDPDesc{Addr: addr + uint64(off), Len: uint32(min(len(f)-off, FrameSize))}
		if off+FrameSize < len(f) {
			d.Options = unix.XDP_PKT_CONTD
		}
		q.descs = append(q.descs, d)
	}
	if extra := cap(f)/FrameSize - k; extra > 0 {
		q.free(addr+uint64(k)*FrameSize, extra)
	}
	q.slots -= k
	q.sent++
	q.inPlace++
	q.lent -= k
	return true
}

// openSend looks at q's free TX ring slots the first time a Send uses q.
func (q *queue) openSend() {
	if q.slots < 0 {
		q.reclaim()
		q.slots = q.xsk.Tx.Free()
	}
}

// stage copies frame f, k chunks long, into free TX chunks of q and adds its
// descriptors to q.descs, or reports false when q has no room for it.
func (q *queue) stage(f []byte, k int) bool {
	q.openSend()
	if k > len(q.txFree) || k > q.slots {
		return false
	}
	umem := q.xsk.UMEM()
	for off := 0; off < len(f); off += FrameSize {
		n := len(q.txFree)
		addr := q.txFree[n-1]
		q.txFree = q.txFree[:n-1]
		c := copy(umem[addr:addr+FrameSize], f[off:])
		d := unix.XDPDesc{Addr: addr, Len: uint32(c)}
		if off+c < len(f) {
			d.Options = unix.XDP_PKT_CONTD
		}
		q.descs = append(q.descs, d)
	}
	q.slots -= k
	q.sent++
	return true
}

// kick makes the kernel drain the TX ring: sendto until the ring is empty, retrying
// EAGAIN/EBUSY (the kernel takes at most TxBudget descriptors a call), a bounded
// number of times.
// With need_wakeup it makes no syscall when the kernel does not ask for one.
func (l *Link) kick(q *queue) error {
	for i := 0; i < kicksPerSend && q.xsk.Tx.Pending() > 0 && q.xsk.TxNeedsKick(); i++ {
		q.kicks++
		switch errno := q.xsk.Kick(); errno {
		case 0, unix.EAGAIN, unix.EBUSY, unix.EINTR:
		case unix.ENOBUFS:
			return nil // frames stay in the ring; the next send kicks again
		case unix.ENETDOWN:
			// The interface is down (ip link set … down): the frames stay in the
			// ring and leave when it is up; until then Send drops new ones.
			l.down = true
			return nil
		default:
			return fmt.Errorf("xdp: AF_XDP kick (sendto) on %s: %w", l.ifc.name, errno)
		}
	}
	return nil
}

// reclaim returns completed TX chunks to the free list: the completion ring names
// each chunk the kernel is done with, in the kernel's order.
func (q *queue) reclaim() {
	q.txFree = q.xsk.Completion.Get(q.txFree)
}

// Recv implements transport.Link: it returns received frames from all queues; the
// chunks return to the fill ring at the next Recv. A frame in one chunk is handed
// out in place. A frame that arrived as chained descriptors (multi-buffer) is
// joined in place when its chunks are adjacent, as the fill ring's order makes them
// (chain); otherwise it is copied whole into a reassembly buffer of the link. Either
// is valid until the next Recv.
func (l *Link) Recv(frames [][]byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, errClosed
	}
	l.nasm = 0
	got := 0
	for k := 0; k < len(l.queues) && got < len(frames); k++ {
		q := l.queues[(l.rxNext+k)%len(l.queues)]
		umem := q.xsk.UMEM()
		avail := q.xsk.Rx.Available()
		q.refill(avail)
		i := 0
		for i < avail && got < len(frames) {
			d := q.xsk.Rx.Desc(i)
			if d.Options&unix.XDP_PKT_CONTD == 0 {
				frames[got] = umem[d.Addr : d.Addr+uint64(d.Len)]
				q.rxRefill = append(q.rxRefill, d.Addr&^(FrameSize-1))
				i++
			} else {
				f, next := q.chain(umem, i, avail, l.asmBuf)
				if f == nil {
					// The kernel publishes a frame's descriptors together, so this
					// is not expected; leave the partial chain for the next Recv.
					break
				}
				frames[got] = f
				i = next
			}
			got++
			q.received++
		}
		q.xsk.Rx.Release(i)
	}
	l.rxNext++
	return got, nil
}

// asmBuf returns a reassembly buffer of n bytes valid until the next Recv.
func (l *Link) asmBuf(n int) []byte {
	if l.nasm == len(l.asm) {
		l.asm = append(l.asm, nil)
	}
	b := l.asm[l.nasm]
	if cap(b) < n {
		b = make([]byte, n, (n+FrameSize-1)/FrameSize*FrameSize)
		l.asm[l.nasm] = b
	}
	l.nasm++
	return b[:n]
}

// Wait implements transport.Link with ppoll on the sockets and a wake eventfd. Frames
// still on the TX ring (the kernel answered EAGAIN to every kick of the last Send)
// are kicked again first, and the wait is kept short while any remain, so they do not
// sit there until the engine next has something to send.
func (l *Link) Wait(deadline time.Time) error {
	l.mu.Lock()
	pending := false
	if !l.closed {
		for _, q := range l.queues {
			_ = l.kick(q)
			pending = pending || q.xsk.Tx.Pending() > 0
		}
	}
	l.mu.Unlock()
	if soon := time.Now().Add(50 * time.Microsecond); pending && (deadline.IsZero() || deadline.After(soon)) {
		deadline = soon
	}
	err := l.w.wait(deadline)
	l.mu.Lock()
	for _, q := range l.queues {
		q.reclaim()
	}
	l.mu.Unlock()
	return err
}

// Wake implements transport.Link.
func (l *Link) Wake() { l.w.wake() }

// MTU implements transport.Link: the interface's MTU.
func (l *Link) MTU() int { return l.ifc.currentMTU() }

// Caps implements transport.Link. With multi-buffer AF_XDP a frame may span chunks,
// so the netdev MTU alone decides the path MTU; without it a frame must fit one UMEM
// chunk, so the path MTU stops at 2048. Frames arrive as they were on the wire.
func (l *Link) Caps() transport.LinkCaps {
	if l.multi {
		return transport.LinkCaps{}
	}
	return transport.LinkCaps{
		MaxPathMTU:       roce.MTU2048,
		MaxPathMTUReason: fmt.Sprintf("a path MTU 4096 frame needs AF_XDP multi-buffer (XDP_USE_SG), and %s; one %d-byte UMEM chunk holds at most %d bytes of frame", l.noMulti, FrameSize, MaxFrame),
	}
}

// MultiBuffer reports whether the link's sockets are bound with XDP_USE_SG (frames
// longer than a UMEM chunk are carried); if not, the reason says why.
func (l *Link) MultiBuffer() (bool, string) { return l.multi, l.noMulti }

// HardwareAddr implements transport.Link.
func (l *Link) HardwareAddr() [6]byte { return l.ifc.mac }

// Addrs implements transport.Link.
func (l *Link) Addrs() []netip.Addr { return l.ifc.addrs() }

// Resolve implements transport.Link from the kernel's neighbour table.
func (l *Link) Resolve(ip netip.Addr) ([6]byte, error) { return l.ifc.resolve(ip) }

// ChainedInPlace returns how many of the ChainedFrames were joined in place
// (adjacent chunks, chain.go) rather than copied into a reassembly buffer.
func (l *Link) ChainedInPlace() uint64 { return l.total(func(q *queue) uint64 { return q.joined }) }

// ChainedFrames returns how many received frames arrived as chained descriptors
// (longer than one UMEM chunk) and were reassembled.
func (l *Link) ChainedFrames() uint64 { return l.total(func(q *queue) uint64 { return q.chained }) }

// Stats returns the kernel's AF_XDP counters summed over the link's sockets: frames
// dropped (too long for a single-buffer socket, no room on the RX ring), invalid
// descriptors, empty fill ring.
func (l *Link) Stats() (unix.XDPStatistics, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var sum unix.XDPStatistics
	if l.closed {
		return sum, errClosed
	}
	for _, q := range l.queues {
		st, err := q.xsk.Stats()
		if err != nil {
			return sum, err
		}
		sum.Rx_dropped += st.Rx_dropped
		sum.Rx_invalid_descs += st.Rx_invalid_descs
		sum.Tx_invalid_descs += st.Tx_invalid_descs
		sum.Rx_ring_full += st.Rx_ring_full
		sum.Rx_fill_ring_empty_descs += st.Rx_fill_ring_empty_descs
		sum.Tx_ring_empty_descs += st.Tx_ring_empty_descs
	}
	return sum, nil
}

// QueueFrames returns, per receive queue, how many frames its socket delivered.
func (l *Link) QueueFrames() []uint64 { return l.perQueue(func(q *queue) uint64 { return q.received }) }

// TxInPlace returns how many frames Send submitted without a copy, from chunks
// the engine encoded them in (LendTx), summed over the queues.
func (l *Link) TxInPlace() uint64 { return l.total(func(q *queue) uint64 { return q.inPlace }) }

// Kicks returns how many sendto calls the link made to have the kernel transmit.
func (l *Link) Kicks() uint64 { return l.total(func(q *queue) uint64 { return q.kicks }) }

// TxBudget returns how many TX descriptors one sendto takes (xsk.Socket.TxBudget):
// txBudget where the kernel has XDP_MAX_TX_SKB_BUDGET (6.17 and later), else the
// kernel's 32.
func (l *Link) TxBudget() uint32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := uint32(0)
	for _, q := range l.queues {
		if b == 0 || q.xsk.TxBudget() < b {
			b = q.xsk.TxBudget()
		}
	}
	return b
}

// QueueSent returns, per queue, how many frames its socket submitted for
// transmission (txQueue picks the socket by the frame's flow).
func (l *Link) QueueSent() []uint64 { return l.perQueue(func(q *queue) uint64 { return q.sent }) }

// perQueue returns one counter of every queue, read under the link's lock.
// total sums counter over the queues.
func (l *Link) total(counter func(*queue) uint64) uint64 {
	var n uint64
	for _, c := range l.perQueue(counter) {
		n += c
	}
	return n
}

func (l *Link) perQueue(counter func(*queue) uint64) []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]uint64, len(l.queues))
	for i, q := range l.queues {
		out[i] = counter(q)
	}
	return out
}

// ZeroCopy reports whether the kernel bound every socket of the link in zero-copy
// mode (XDP_OPTIONS_ZEROCOPY); false means copy mode.
func (l *Link) ZeroCopy() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, q := range l.queues {
		if !q.xsk.ZeroCopy() {
			return false
		}
	}
	return len(l.queues) > 0
}

// Describe says how the link runs, for tool headers and logs: "xdp native,
// zero-copy, multi-buffer, 4 queues" or "xdp generic, copy, single-buffer, 1 queue";
// when --xdp-mode auto fell back to generic mode, with native mode's refusal.
func (l *Link) Describe() string {
	copyMode, buffers, queues := "copy", "multi-buffer", "queues"
	if l.ZeroCopy() {
		copyMode = "zero-copy"
	}
	if !l.multi {
		buffers = "single-buffer"
	}
	if len(l.queues) == 1 {
		queues = "queue"
	}
	mode := l.Mode().String()
	if err := l.prog.NativeRefused(); err != nil {
		mode += " (native refused: " + strings.TrimPrefix(err.Error(), "bpf: ") + ")"
	}
	s := fmt.Sprintf("xdp %s, %s, %s, %d %s", mode, copyMode, buffers, len(l.queues), queues)
	if l.txq < len(l.queues) {
		s += fmt.Sprintf(", %d transmitting (the interface has %d TX %s in use)", l.txq, l.txq, map[bool]string{true: "queue", false: "queues"}[l.txq == 1])
	}
	return s
}

// Mode returns the XDP mode the program attached in.
func (l *Link) Mode() bpf.Mode { return l.prog.Mode() }

// Name returns the interface name.
func (l *Link) Name() string { return l.ifc.name }

// Close closes the sockets and detaches the XDP program.
func (l *Link) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	var errs []error
	for _, q := range l.queues {
		errs = append(errs, q.xsk.Close())
	}
	if l.prog != nil {
		errs = append(errs, l.prog.Close())
	}
	if l.w != nil {
		l.w.close()
	}
	if l.ifc != nil {
		l.ifc.close()
	}
	return errors.Join(errs...)
}

var errClosed = transport.ErrLinkClosed
