package ibcm

import (
	"cmp"
	"errors"
	"fmt"
	"math/bits"
	"net/netip"
	"slices"
	"time"

	"github.com/xroce/xroce/roce/cm"
)

// DefaultPacketLifeTime is the path's packet lifetime rdma_cm assumes on RoCE
// (Linux 6.1 cma.c CMA_IBOE_PACKET_LIFETIME, 18: 4.096 µs × 2^18 ≈ 1.07 s).
const DefaultPacketLifeTime = 18

// Config sets a Manager's identity and timing.
type Config struct {
	// LocalCAGUID goes in every REQ and REP; non-zero and unique per device.
	LocalCAGUID uint64
	// HiTID is the upper half of the transaction IDs of the messages that open a
	// transaction (REQ, DREQ); the lower half is the local Communication ID's bytes
	// in little-endian order, as Linux forms them (cm_form_tid).
	HiTID uint32
	// FirstCommID is the first local Communication ID; the next ones count up in
	// the first byte on the wire, as Linux's do (0xb096cb43, 0xb196cb43, …). Zero
	// picks 1.
	FirstCommID uint32
	// PacketLifeTime (5-bit, 4.096 µs × 2^value) enters every retransmission
	// timeout twice; zero picks DefaultPacketLifeTime.
	PacketLifeTime uint8
}

// Stats counts what the Manager did not hand to the caller.
type Stats struct {
	Retransmits uint64 // REQ, REP, DREQ sent again after a timeout
	Duplicates  uint64 // duplicate REQ, REP, DREQ answered again (or ignored)
	Dropped     uint64 // MADs that fit no connection or state, or did not decode
	Unlistened  uint64 // REQs and SIDR_REQs for a Service ID nothing listens on (REJ Invalid Service ID, SIDR_REP Service ID not supported)
}

// Manager runs the CM state machine of one port (one Local CA GUID).
type Manager struct {
	cfg       Config
	nextID    uint32              // Linux-order counter: the comm ID is its byte swap
	conns     map[uint32]*Conn    // by local comm ID
	byRemote  map[remoteKey]*Conn // by (remote comm ID, remote CA GUID), passive side
	listening map[uint64]bool     // Service IDs
	sidrIn    map[sidrKey]*Conn   // peers' SIDR_REQs not yet answered
	sends     []Send
	events    []Event
	stats     Stats
}

type remoteKey struct {
	id   uint32
	guid uint64
}

// New returns a Manager.
func New(cfg Config) *Manager {
	if cfg.PacketLifeTime == 0 {
		cfg.PacketLifeTime = DefaultPacketLifeTime
	}
	if cfg.FirstCommID == 0 {
		cfg.FirstCommID = 1
	}
	return &Manager{cfg: cfg, nextID: bits.ReverseBytes32(cfg.FirstCommID),
		conns: map[uint32]*Conn{}, byRemote: map[remoteKey]*Conn{}, listening: map[uint64]bool{},
		sidrIn: map[sidrKey]*Conn{}}
}

// ErrState is returned (wrapped) by a call made in a state that does not allow it.
var ErrState = errors.New("ibcm: not allowed in this state")

func stateError(op string, c *Conn) error {
	return fmt.Errorf("%w: %s in %v (local comm ID 0x%08x)", ErrState, op, c.state, c.localID)
}

// Listen makes REQs for serviceID arrive as EventREQ; REQs for other Service IDs
// get a REJ with reason Invalid Service ID.
func (m *Manager) Listen(serviceID uint64) { m.listening[serviceID] = true }

// Unlisten undoes Listen.
func (m *Manager) Unlisten(serviceID uint64) { delete(m.listening, serviceID) }

// Sends returns the MADs to send since the last call, in order.
func (m *Manager) Sends() []Send {
	s := m.sends
	m.sends = nil
	return s
}

// Events returns the events since the last call, in order.
func (m *Manager) Events() []Event {
	e := m.events
	m.events = nil
	return e
}

// Stats returns the counters.
func (m *Manager) Stats() Stats { return m.stats }

// Conns returns how many connections the Manager holds (TimeWait included).
func (m *Manager) Conns() int { return len(m.conns) }

// Connections returns the connections the Manager holds, by local Communication ID.
func (m *Manager) Connections() []*Conn {
	out := make([]*Conn, 0, len(m.conns))
	for _, c := range m.conns {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b *Conn) int { return cmp.Compare(a.localID, b.localID) })
	return out
}

// Conn returns the connection with a local Communication ID, or nil.
func (m *Manager) Conn(localCommID uint32) *Conn { return m.conns[localCommID] }

// newConn allocates a connection with the next local Communication ID.
func (m *Manager) newConn(passive bool, peer netip.Addr) *Conn {
	for {
		id := bits.ReverseBytes32(m.nextID)
		m.nextID++
		if id != 0 && m.conns[id] == nil {
			c := &Conn{passive: passive, peer: peer, localID: id}
			m.conns[id] = c
			return c
		}
	}
}

// tidFor is the transaction ID of a transaction c opens.
func (m *Manager) tidFor(c *Conn) uint64 {
	return uint64(m.cfg.HiTID)<<32 | uint64(bits.ReverseBytes32(c.localID))
}

// drop forgets c.
func (m *Manager) drop(c *Conn) {
	c.state = StateIdle
	c.deadline = time.Time{}
	delete(m.conns, c.localID)
	if c.passive {
		delete(m.byRemote, remoteKey{c.remoteID, c.remoteGUID})
		delete(m.sidrIn, sidrKey{c.peer, c.remoteID})
	}
}

// encode builds the MAD of m in transaction tid.
func encode(tid uint64, msg cm.Message) []byte {
	b := make([]byte, cm.MADLen)
	cm.Encode(b, cm.CMHeader(tid, 0), msg)
	return b
}

func (m *Manager) send(to netip.Addr, mad []byte) {
	m.sends = append(m.sends, Send{To: to, MAD: append([]byte(nil), mad...)})
}

func (m *Manager) event(e Event) { m.events = append(m.events, e) }

// responseTimeout is how long to wait for an answer from a peer that takes up to
// Timeout(cmResponse) to respond: the round trip's two packet lifetimes plus that
// (Linux cm.c: packet_life_time × 2 + the peer's CM response timeout).
func (m *Manager) responseTimeout(cmResponse uint8) time.Duration {
	return 2*cm.Timeout(m.cfg.PacketLifeTime) + cm.Timeout(cmResponse)
}

// sendWithRetry sends mad and keeps it for retransmission: timeout per try, retries
// more tries.
func (m *Manager) sendWithRetry(now time.Time, c *Conn, mad []byte, timeout time.Duration, retries uint8) {
	c.pending = mad
	c.timeout = timeout
	c.retries = int(retries)
	c.deadline = now.Add(timeout)
	m.send(c.peer, mad)
}

// stopRetry ends the retransmission of the pending message.
func (c *Conn) stopRetry() {
	c.pending = nil
	c.deadline = time.Time{}
}
