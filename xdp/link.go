package xdp

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	axdp "github.com/asavie/xdp"
	"golang.org/x/sys/unix"

	"github.com/xroce/xroce/bpf"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// UMEM and ring sizing. A 4 KiB chunk holds one frame (AF_XDP chunks are at most a
// page). 2048 chunks each for receive and transmit are 8 MiB each way: at the ~430
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
	// kicksPerSend bounds how often a send retries the TX kick when the kernel
	// answers EAGAIN or takes only part of the ring (it sends ≤ 32 frames a call).
	kicksPerSend = 64
)

// Config opens a Link.
type Config struct {
	Interface string   // network interface name
	Mode      bpf.Mode // XDP attach mode
	// Netns is the path of a network namespace (/var/run/netns/NAME) to open the
	// link in; empty means the caller's.
	Netns string
}

// Link is a transport.Link on AF_XDP sockets, one per receive queue of the
// interface; frames are sent from queue 0's socket.
type Link struct {
	ifc    *iface
	prog   *bpf.Program
	queues []*queue
	w      *waiter
	rxNext int

	mu     sync.Mutex // Send, Recv and Close; Wait and Wake need no lock
	closed bool
}

// queue is one AF_XDP socket and its UMEM bookkeeping.
type queue struct {
	xsk      *axdp.Socket
	received uint64      // frames delivered by Recv
	rxRefill []axdp.Desc // chunks handed out by the last Recv, to give back to the fill ring
	txFree   []uint64    // free TX chunk addresses
	txBusy   []uint64    // TX chunks in flight, in submission order
	descs    []axdp.Desc
}

// ErrFrameTooLong is returned by Send for a frame longer than one UMEM chunk.
var ErrFrameTooLong = errors.New("xdp: frame longer than an AF_XDP chunk")

// Open attaches the XDP program to the interface and opens one AF_XDP socket per
// receive queue. Errors name the cause: missing privileges (bpf.ErrPermission), no
// such interface (ErrNoInterface), another XDP program attached (bpf.ErrBusy), an
// MTU too large for the XDP mode (bpf.ErrMTU), RLIMIT_MEMLOCK (bpf.ErrMemlock).
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
		for q := 0; q < l.ifc.queues; q++ {
			qu, err := newQueue(l.ifc.index, q)
			if err != nil {
				return fmt.Errorf("xdp: %s queue %d: %w", cfg.Interface, q, err)
			}
			l.queues = append(l.queues, qu)
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

func newQueue(ifindex, q int) (qu *queue, err error) {
	opts := axdp.SocketOptions{
		NumFrames: RxFrames + TxFrames, FrameSize: FrameSize,
		FillRingNumDescs: RxFrames, CompletionRingNumDescs: TxFrames,
		RxRingNumDescs: RxFrames, TxRingNumDescs: TxFrames,
	}
	xsk, err := axdp.NewSocket(ifindex, q, &opts)
	if err != nil {
		if errors.Is(err, unix.ENOMEM) {
			return nil, fmt.Errorf("%w: %v", bpf.ErrMemlock, err)
		}
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
			return nil, fmt.Errorf("%w: %v", bpf.ErrPermission, err)
		}
		if strings.Contains(err.Error(), "device or resource busy") { // asavie/xdp formats the errno
			return nil, fmt.Errorf("another AF_XDP socket (another xroce?) is bound to this queue: %v", err)
		}
		return nil, err
	}
	qu = &queue{xsk: xsk, descs: make([]axdp.Desc, 0, TxFrames)}
	fill := make([]axdp.Desc, RxFrames)
	for i := range fill {
		fill[i] = axdp.Desc{Addr: uint64(i) * FrameSize, Len: FrameSize}
	}
	xsk.Fill(fill)
	for i := RxFrames; i < RxFrames+TxFrames; i++ {
		qu.txFree = append(qu.txFree, uint64(i)*FrameSize)
	}
	return qu, nil
}

// Send implements transport.Link: it copies frames into free TX chunks of queue 0,
// submits them and kicks the kernel, retrying the kick on EAGAIN. It accepts fewer
// than len(frames) when the TX ring or the chunks run out (the engine resends after
// its adaptive delay).
func (l *Link) Send(frames [][]byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, errClosed
	}
	q := l.queues[0]
	q.reclaim()
	descs := q.descs[:0]
	for _, f := range frames {
		if len(f) > FrameSize {
			if len(descs) == 0 {
				return 0, fmt.Errorf("%w: %d bytes", ErrFrameTooLong, len(f))
			}
			break
		}
		k := len(q.txFree)
		if k == 0 {
			break
		}
		addr := q.txFree[k-1]
		q.txFree = q.txFree[:k-1]
		d := axdp.Desc{Addr: addr, Len: uint32(len(f))}
		copy(q.xsk.GetFrame(d), f)
		descs = append(descs, d)
	}
	n, err := transmit(q.xsk, descs)
	for _, d := range descs[:n] {
		q.txBusy = append(q.txBusy, d.Addr)
	}
	for _, d := range descs[n:] {
		q.txFree = append(q.txFree, d.Addr)
	}
	if err != nil {
		return n, err
	}
	return n, l.kick(q)
}

// transmit puts descriptors on the TX ring. asavie/xdp's Transmit panics on a kick
// error other than EAGAIN/EBUSY (ENXIO when the link goes down, ENOBUFS, …); that
// becomes an error here, never a crash of the engine.
func transmit(xsk *axdp.Socket, descs []axdp.Desc) (n int, err error) {
	defer func() {
		if r := recover(); r != nil {
			n, err = len(descs), fmt.Errorf("xdp: AF_XDP transmit: %v", r)
		}
	}()
	return xsk.Transmit(descs), nil
}

// kick makes the kernel drain the TX ring: sendto until the ring is empty, retrying
// EAGAIN/EBUSY (the kernel sends at most 32 frames a call), a bounded number of times.
func (l *Link) kick(q *queue) error {
	for i := 0; i < kicksPerSend && q.xsk.NumFreeTxSlots() < TxFrames; i++ {
		_, _, errno := unix.Syscall6(unix.SYS_SENDTO, uintptr(q.xsk.FD()), 0, 0, unix.MSG_DONTWAIT, 0, 0)
		switch errno {
		case 0, unix.EAGAIN, unix.EBUSY, unix.EINTR:
		case unix.ENOBUFS:
			return nil // frames stay in the ring; the next send kicks again
		default:
			return fmt.Errorf("xdp: AF_XDP kick: %w", errno)
		}
	}
	return nil
}

// reclaim returns completed TX chunks to the free list. In copy mode the kernel
// completes TX descriptors in submission order (it reserves completion-ring slots
// as it takes descriptors, net/xdp/xsk.c), so the oldest in-flight chunks are the
// completed ones.
func (q *queue) reclaim() {
	n := q.xsk.NumCompleted()
	if n == 0 {
		return
	}
	n = min(n, len(q.txBusy))
	q.xsk.Complete(n)
	q.txFree = append(q.txFree, q.txBusy[:n]...)
	k := copy(q.txBusy, q.txBusy[n:])
	q.txBusy = q.txBusy[:k]
}

// Recv implements transport.Link: it returns received frames from all queues; the
// chunks return to the fill ring at the next Recv.
func (l *Link) Recv(frames [][]byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, errClosed
	}
	got := 0
	for k := 0; k < len(l.queues) && got < len(frames); k++ {
		q := l.queues[(l.rxNext+k)%len(l.queues)]
		if len(q.rxRefill) > 0 {
			n := q.xsk.Fill(q.rxRefill)
			m := copy(q.rxRefill, q.rxRefill[n:])
			q.rxRefill = q.rxRefill[:m]
		}
		avail := q.xsk.NumReceived()
		for _, d := range q.xsk.Receive(min(avail, len(frames)-got)) {
			frames[got] = q.xsk.GetFrame(d)
			got++
			q.received++
			q.rxRefill = append(q.rxRefill, axdp.Desc{Addr: d.Addr &^ (FrameSize - 1), Len: FrameSize})
		}
	}
	l.rxNext++
	return got, nil
}

// Wait implements transport.Link with ppoll on the sockets and a wake eventfd. Frames
// still on the TX ring (the kernel answered EAGAIN to every kick of the last Send)
// are kicked again first, and the wait is kept short while any remain, so they do not
// sit there until the engine next has something to send.
func (l *Link) Wait(deadline time.Time) error {
	l.mu.Lock()
	pending := false
	if !l.closed {
		q := l.queues[0]
		_ = l.kick(q)
		pending = q.xsk.NumFreeTxSlots() < TxFrames
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
func (l *Link) MTU() int { return l.ifc.mtu }

// Caps implements transport.Link: without multi-buffer AF_XDP a frame must fit one
// UMEM chunk, so the path MTU stops at 2048; frames arrive as they were on the wire.
func (l *Link) Caps() transport.LinkCaps {
	return transport.LinkCaps{
		MaxPathMTU:       roce.MTU2048,
		MaxPathMTUReason: fmt.Sprintf("a path MTU 4096 frame needs AF_XDP multi-buffer (XDP_USE_SG), which xroce does not implement yet; one %d-byte UMEM chunk holds at most %d bytes of frame", FrameSize, MaxFrame),
	}
}

// HardwareAddr implements transport.Link.
func (l *Link) HardwareAddr() [6]byte { return l.ifc.mac }

// Addrs implements transport.Link.
func (l *Link) Addrs() []netip.Addr { return l.ifc.addrs() }

// Resolve implements transport.Link from the kernel's neighbour table.
func (l *Link) Resolve(ip netip.Addr) ([6]byte, error) { return l.ifc.resolve(ip) }

// QueueFrames returns, per receive queue, how many frames its socket delivered.
func (l *Link) QueueFrames() []uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]uint64, len(l.queues))
	for i, q := range l.queues {
		out[i] = q.received
	}
	return out
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
