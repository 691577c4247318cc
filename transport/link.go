package transport

import (
	"errors"

	"github.com/xroce/xroce/roce"
	"net/netip"
	"time"
)

// Link carries whole Ethernet frames holding RoCEv2 packets between the engine and a
// network. Implementations: the in-memory Pipe here, the AF_XDP link (package xdp),
// the pcap tap (package pcap).
type Link interface {
	// Send queues frames for transmission and returns how many it accepted, in order,
	// from the start of frames. The link copies what it accepts. Accepting fewer than
	// len(frames) with a nil error means the link is busy (TX ring full, EAGAIN): the
	// engine holds the rest and retries after an adaptive delay. An error means the
	// link is unusable.
	Send(frames [][]byte) (int, error)
	// Recv fills frames with up to len(frames) received frames without blocking and
	// returns how many. The frames stay valid until the next call to Recv.
	Recv(frames [][]byte) (int, error)
	// Wait blocks until Recv may return frames, Wake is called, or the deadline
	// passes (a zero deadline means no deadline). Spurious returns are allowed.
	Wait(deadline time.Time) error
	// Wake makes a concurrent or the next Wait return. It may be called from any
	// goroutine and must not block.
	Wake()
	// MTU is the netdev MTU in bytes (the IP packet size limit).
	MTU() int
	// HardwareAddr is the link's Ethernet address.
	HardwareAddr() [6]byte
	// Addrs are the link's IP addresses, in the kernel's order, for the GID table.
	Addrs() []netip.Addr
	// Resolve returns the Ethernet address for a peer IP address on this link.
	Resolve(ip netip.Addr) ([6]byte, error)
	// Close releases the link.
	Close() error
}

// PathMTULimiter is implemented by links that carry less than their netdev MTU
// suggests (the AF_XDP link without multi-buffer support): MaxPathMTU returns the
// largest path MTU and why.
type PathMTULimiter interface {
	MaxPathMTU() (roce.MTU, string)
}

// ErrLinkClosed is returned by a closed link.
var ErrLinkClosed = errors.New("transport: link closed")

// Clock tells the engine the time. Real devices use the system clock; protocol tests
// inject a FakeClock.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// FakeClock is a Clock that only moves when told to. Drive it from one goroutine.
type FakeClock struct {
	t time.Time
}

// NewFakeClock returns a clock set to a fixed instant.
func NewFakeClock() *FakeClock { return &FakeClock{t: time.Unix(1796000000, 0)} }

// Now returns the clock's time.
func (c *FakeClock) Now() time.Time { return c.t }

// Advance moves the clock forward by d.
func (c *FakeClock) Advance(d time.Duration) { c.t = c.t.Add(d) }

// Set moves the clock to t if t is later.
func (c *FakeClock) Set(t time.Time) {
	if t.After(c.t) {
		c.t = t
	}
}
