package transport

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Faults configures the deterministic fault injector of one direction of a Pipe.
// Each probability is per frame, in [0, 1]; the same Seed gives the same faults.
type Faults struct {
	Seed      uint64
	Loss      float64 // frame silently dropped
	Duplicate float64 // frame delivered twice
	Reorder   float64 // frame swapped with the one queued before it
	Corrupt   float64 // one byte after the Ethernet header flipped (ICRC then fails)
	TxRefuse  float64 // Send stops accepting at this frame, as a full TX ring does
	// Drop lists frames to lose by their number among the frames sent towards this
	// end, counted from 1 (PipeStats.Sent after the frame): a loss at an exact place.
	Drop []uint64
}

// PipeStats counts what a direction of a Pipe did.
type PipeStats struct {
	Sent, Delivered, Lost, Duplicated, Reordered, Corrupted, Refused, Cut uint64
}

// PipeConfig describes one end of a Pipe.
type PipeConfig struct {
	MAC   [6]byte
	Addrs []netip.Addr
	MTU   int // netdev MTU; 0 means 1500
	// Queue is how many frames may wait in this end's receive queue before the
	// sender's Send is refused; 0 means 4096.
	Queue int
	// Faults applies to frames travelling towards this end.
	Faults Faults
	// Caps is what this end's Caps reports, to stand in for a link with limits
	// (a MaxPathMTU) or one that recomputes ICRCs; the Pipe itself carries any
	// path MTU its MTU allows and delivers frames unchanged except for Faults.
	Caps LinkCaps
}

// PipeEnd is one end of an in-memory Ethernet link, a Link.
type PipeEnd struct {
	cfg  PipeConfig
	peer *PipeEnd

	mu        sync.Mutex
	queue     [][]byte // frames waiting for Recv
	free      [][]byte // recycled buffers
	delivered [][]byte // frames returned by the last Recv
	rng       *rand.Rand
	cut       bool
	closed    atomic.Bool
	stats     PipeStats
	notify    chan struct{}
}

// NewPipe returns the two ends of an in-memory link. Frames sent on one end arrive at
// the other, through that end's fault injector.
func NewPipe(a, b PipeConfig) (*PipeEnd, *PipeEnd) {
	ea, eb := newPipeEnd(a), newPipeEnd(b)
	ea.peer, eb.peer = eb, ea
	return ea, eb
}

func newPipeEnd(c PipeConfig) *PipeEnd {
	if c.MTU == 0 {
		c.MTU = 1500
	}
	if c.Queue == 0 {
		c.Queue = 4096
	}
	return &PipeEnd{cfg: c, rng: rand.New(rand.NewPCG(c.Faults.Seed, 0x78726f6365)), notify: make(chan struct{}, 1)}
}

// SetQueue sets how many frames may wait at this end before senders are refused.
func (e *PipeEnd) SetQueue(n int) {
	e.mu.Lock()
	e.cfg.Queue = max(1, n)
	e.mu.Unlock()
}

// SetCut drops every frame arriving at this end while cut is true.
func (e *PipeEnd) SetCut(cut bool) {
	e.mu.Lock()
	e.cut = cut
	e.mu.Unlock()
}

// Stats returns the counters of frames travelling towards this end.
func (e *PipeEnd) Stats() PipeStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats
}

// Send implements Link: frames go to the peer's receive queue through its faults.
func (e *PipeEnd) Send(frames [][]byte) (int, error) {
	d := e.peer
	d.mu.Lock()
	defer d.mu.Unlock()
	if e.closed.Load() || d.closed.Load() {
		return 0, ErrLinkClosed
	}
	f := &d.cfg.Faults
	n := 0
	for _, fr := range frames {
		if len(d.queue) >= d.cfg.Queue || (f.TxRefuse > 0 && d.rng.Float64() < f.TxRefuse) {
			d.stats.Refused++
			break
		}
		n++
		d.stats.Sent++
		if d.cut {
			d.stats.Cut++
			continue
		}
		if (f.Loss > 0 && d.rng.Float64() < f.Loss) || slices.Contains(f.Drop, d.stats.Sent) {
			d.stats.Lost++
			continue
		}
		c := d.copyFrame(fr)
		if f.Corrupt > 0 && d.rng.Float64() < f.Corrupt && len(c) > 14 {
			c[14+d.rng.IntN(len(c)-14)] ^= 1 << d.rng.IntN(8)
			d.stats.Corrupted++
		}
		d.queue = append(d.queue, c)
		if f.Reorder > 0 && len(d.queue) >= 2 && d.rng.Float64() < f.Reorder {
			q := d.queue
			q[len(q)-1], q[len(q)-2] = q[len(q)-2], q[len(q)-1]
			d.stats.Reordered++
		}
		if f.Duplicate > 0 && d.rng.Float64() < f.Duplicate {
			d.queue = append(d.queue, d.copyFrame(c))
			d.stats.Duplicated++
		}
	}
	if len(d.queue) > 0 {
		select {
		case d.notify <- struct{}{}:
		default:
		}
	}
	return n, nil
}

func (d *PipeEnd) copyFrame(fr []byte) []byte {
	var b []byte
	if k := len(d.free); k > 0 {
		b = d.free[k-1][:0]
		d.free = d.free[:k-1]
	}
	return append(b, fr...)
}

// Recv implements Link.
func (e *PipeEnd) Recv(frames [][]byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed.Load() {
		return 0, ErrLinkClosed
	}
	e.free = append(e.free, e.delivered...)
	e.delivered = e.delivered[:0]
	n := copy(frames, e.queue)
	e.delivered = append(e.delivered, e.queue[:n]...)
	rest := copy(e.queue, e.queue[n:])
	clear(e.queue[rest:])
	e.queue = e.queue[:rest]
	e.stats.Delivered += uint64(n)
	return n, nil
}

// Pending returns how many frames wait in this end's receive queue.
func (e *PipeEnd) Pending() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.queue)
}

// Wait implements Link.
func (e *PipeEnd) Wait(deadline time.Time) error {
	if e.Pending() > 0 {
		return nil
	}
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-e.notify:
	case <-timeout:
	}
	return nil
}

// Wake implements Link.
func (e *PipeEnd) Wake() {
	select {
	case e.notify <- struct{}{}:
	default:
	}
}

// MTU implements Link.
func (e *PipeEnd) MTU() int { return e.cfg.MTU }

// Caps implements Link: PipeConfig.Caps.
func (e *PipeEnd) Caps() LinkCaps { return e.cfg.Caps }

// HardwareAddr implements Link.
func (e *PipeEnd) HardwareAddr() [6]byte { return e.cfg.MAC }

// Addrs implements Link.
func (e *PipeEnd) Addrs() []netip.Addr { return e.cfg.Addrs }

// Resolve implements Link: the peer end's MAC for any of the peer's addresses.
func (e *PipeEnd) Resolve(ip netip.Addr) ([6]byte, error) {
	for _, a := range e.peer.cfg.Addrs {
		if a == ip.Unmap() {
			return e.peer.cfg.MAC, nil
		}
	}
	return [6]byte{}, fmt.Errorf("transport: pipe: no peer has address %v", ip)
}

// Close implements Link.
func (e *PipeEnd) Close() error {
	e.closed.Store(true)
	e.mu.Lock()
	select {
	case e.notify <- struct{}{}:
	default:
	}
	e.mu.Unlock()
	return nil
}
