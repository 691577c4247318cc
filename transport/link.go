package transport

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/xroce/xroce/roce"
)

// Link carries whole Ethernet frames holding RoCEv2 packets between the engine and a
// network. Implementations: the in-memory Pipe here, the AF_XDP link and the kernel
// UDP link (package xdp); the pcap tap (package pcap) wraps any of them.
type Link interface {
	// Send queues frames for transmission and returns how many it accepted, in order,
	// from the start of frames. The link copies what it accepts. Accepting fewer than
	// len(frames) with a nil error means the link is busy (TX ring full, EAGAIN): the
	// engine holds the rest and retries after an adaptive delay. A *NotSentError
	// means the frames it accepted may not all reach the wire, for a reason that may
	// pass (the interface is down); any other error means the link is unusable.
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
	// Caps is what the link can carry beyond what MTU says, and how faithfully it
	// delivers received frames. It does not change while the link is open.
	Caps() LinkCaps
	// HardwareAddr is the link's Ethernet address.
	HardwareAddr() [6]byte
	// Addrs are the link's IP addresses, in the kernel's order, for the GID table.
	Addrs() []netip.Addr
	// Resolve returns the Ethernet address frames to the peer at ip go to: the
	// peer's on its link, or the next hop's where a route's gateway leads to it.
	// A peer no route reaches through this link is an error wrapping ErrNoRoute.
	Resolve(ip netip.Addr) ([6]byte, error)
	// Close releases the link.
	Close() error
}

// TxLender is a Link that lends its transmit memory, so that the engine encodes a
// frame where the link sends it from and the link does not copy it: the AF_XDP
// link lends UMEM chunks (issue 20: one copy fewer per frame). The engine asks for a
// buffer per frame and passes it to Send as any frame; Send takes it without a
// copy. A lent buffer belongs to the link again once Send accepted it, or with
// ReturnTx.
type TxLender interface {
	// LendTx returns n writable bytes of transmit memory for a frame of the flow
	// whose UDP source port is sport, or nil when the link has none free or n does
	// not fit one piece (the engine then uses its own buffer).
	LendTx(n int, sport uint16) []byte
	// ReturnTx gives back a buffer from LendTx that will not be sent.
	ReturnTx(buf []byte)
}

// RxReserver is a Link that holds receive buffers for the frames the engine may have
// in flight towards it: the AF_XDP link keeps a small working set of receive chunks
// (its fill ring) and grows it on demand, and a working set grown too late drops a
// burst. The engine calls ReserveRx with MaxUnackedPSN frames per QP whenever it
// creates a QP: each RC QP's peer may have that many request packets, and each of
// its reads that many response packets, in flight (rdma_rxe's RXE_MAX_UNACKED_PSNS;
// xroce's requester window).
type RxReserver interface {
	// ReserveRx asks the link to keep room for frames received frames at once. It
	// never shrinks what the link holds.
	ReserveRx(frames int)
}

// LinkCaps describes what a link can carry and what it guarantees about the frames
// it receives, beyond its netdev MTU. The zero value is a link with no limit of its
// own that delivers frames exactly as they were on the wire (the Pipe, by default).
type LinkCaps struct {
	// MaxPathMTU is the largest path MTU the link carries whatever its netdev MTU
	// (the AF_XDP link without multi-buffer support stops at roce.MTU2048); 0 means
	// no limit of its own: the netdev MTU alone decides (roce.MTUFromNetdev).
	// QueuePair.Modify refuses a larger PathMTU with MaxPathMTUReason.
	MaxPathMTU roce.MTU
	// MaxPathMTUReason says why MaxPathMTU is what it is, for error messages.
	MaxPathMTUReason string
	// ICRCRecomputed is true when the link rebuilds the headers of some received
	// frames and recomputes their ICRC (the kernel UDP link for IPv4, whose socket
	// does not report the sender's IPv4 ID that the ICRC covers): the engine's ICRC
	// check (IBTA Vol 1 Annex A17.3.3) then cannot detect a corrupted frame, and a
	// recording of those frames shows the link's ICRC, not the sender's.
	ICRCRecomputed bool
}

// ErrLinkClosed is returned by a closed link.
var ErrLinkClosed = errors.New("transport: link closed")

// NotSentError is a Link's Send error for frames it accepted but dropped, as a
// network drops them, for a reason that may pass: the interface is down (ENETDOWN),
// or the kernel has no route or neighbour for the destination (ENETUNREACH,
// EHOSTUNREACH). The engine counts the dropped frames in send_err, as rdma_rxe
// counts a failed ip_local_out (drivers/infiniband/sw/rxe/rxe_net.c, rxe_send), and
// goes on: the transport's retries send them again.
type NotSentError struct {
	Dropped int   // frames dropped, of those Send accepted
	Err     error // the cause, naming the interface or the destination
}

func (e *NotSentError) Error() string {
	return fmt.Sprintf("%d frames dropped: %v", e.Dropped, e.Err)
}

func (e *NotSentError) Unwrap() error { return e.Err }

// ErrNoRoute is what a Link's Resolve wraps when no route reaches the peer through
// the link (the kernel's ENETUNREACH: rdma_cm reports such an address error with
// that status, rdma-core's librdmacm/cma.c passes it on).
var ErrNoRoute = errors.New("no route")

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
