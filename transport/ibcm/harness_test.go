package ibcm_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport/ibcm"
)

// The tests run two Managers, A (active, 10.0.0.1) and B (passive, 10.0.0.2),
// joined by a lossless or lossy in-memory wire, on a clock the test moves.

var (
	addrA = netip.MustParseAddr("10.0.0.1")
	addrB = netip.MustParseAddr("10.0.0.2")
	t0    = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
)

const service = 0x0000000001064853 // RDMA_PS_TCP, port 18515

type side struct {
	m      *ibcm.Manager
	addr   netip.Addr
	events []ibcm.Event
}

// wire is the test's network: what each side sent, in order, and a loss rule.
type wire struct {
	t    testing.TB
	now  time.Time
	a, b *side
	// lose, when set, says whether to drop a MAD (its sender, its header).
	lose func(from netip.Addr, h cm.Header) bool
	// sent is every MAD sent, in order, with its sender, lost or not.
	sent []sent
}

type sent struct {
	from netip.Addr
	h    cm.Header
	msg  cm.Message
	mad  []byte
	lost bool
}

func newWire(t testing.TB) *wire {
	w := &wire{t: t, now: t0}
	w.a = &side{m: ibcm.New(ibcm.Config{LocalCAGUID: 0x0200000000000001, HiTID: 1, FirstCommID: 0x11000000}), addr: addrA}
	w.b = &side{m: ibcm.New(ibcm.Config{LocalCAGUID: 0x0200000000000002, HiTID: 2, FirstCommID: 0x22000000}), addr: addrB}
	w.b.m.Listen(service)
	return w
}

func (w *wire) other(s *side) *side {
	if s == w.a {
		return w.b
	}
	return w.a
}

// pump delivers what both sides sent until neither sends more, and collects
// their events.
func (w *wire) pump() {
	w.t.Helper()
	for {
		moved := false
		for _, s := range []*side{w.a, w.b} {
			for _, snd := range s.m.Sends() {
				moved = true
				dst := w.other(s)
				if snd.To != dst.addr {
					w.t.Fatalf("%v sent to %v", s.addr, snd.To)
				}
				h, msg, err := cm.Decode(snd.MAD)
				if err != nil {
					w.t.Fatalf("%v sent a MAD that does not decode: %v", s.addr, err)
				}
				lost := w.lose != nil && w.lose(s.addr, h)
				w.sent = append(w.sent, sent{s.addr, h, msg, snd.MAD, lost})
				if !lost {
					dst.m.Receive(w.now, s.addr, snd.MAD)
				}
			}
		}
		for _, s := range []*side{w.a, w.b} {
			s.events = append(s.events, s.m.Events()...)
		}
		if !moved {
			return
		}
	}
}

// advance moves the clock by d, running both sides' timers.
func (w *wire) advance(d time.Duration) {
	w.t.Helper()
	w.now = w.now.Add(d)
	w.a.m.Advance(w.now)
	w.b.m.Advance(w.now)
	w.pump()
}

// toNextDeadline moves the clock to the earliest timer of either side.
func (w *wire) toNextDeadline() {
	w.t.Helper()
	ta, oka := w.a.m.NextDeadline()
	tb, okb := w.b.m.NextDeadline()
	switch {
	case oka && (!okb || ta.Before(tb)):
		w.advance(ta.Sub(w.now))
	case okb:
		w.advance(tb.Sub(w.now))
	default:
		w.t.Fatal("no timer runs")
	}
}

// event pops s's next event, which must be of type typ.
func (w *wire) event(s *side, typ ibcm.EventType) ibcm.Event {
	w.t.Helper()
	if len(s.events) == 0 {
		w.t.Fatalf("%v: no event, want %v", s.addr, typ)
	}
	e := s.events[0]
	s.events = s.events[1:]
	if e.Type != typ {
		w.t.Fatalf("%v: event %v, want %v", s.addr, e.Type, typ)
	}
	return e
}

// noEvents checks that neither side has an event left.
func (w *wire) noEvents() {
	w.t.Helper()
	for _, s := range []*side{w.a, w.b} {
		if len(s.events) != 0 {
			w.t.Fatalf("%v: unexpected events %v", s.addr, s.events)
		}
	}
}

// count returns how many MADs of attr from sent (lost or not).
func (w *wire) count(from netip.Addr, attr cm.AttributeID) int {
	n := 0
	for _, s := range w.sent {
		if s.from == from && s.h.AttributeID == attr {
			n++
		}
	}
	return n
}

// testREQ is a REQ as rdma_cm fills it for RC over RoCE (values of rdma_rxe's).
func testREQ(qpn, psn uint32) cm.REQ {
	return cm.REQ{ServiceID: service, LocalQPN: qpn, StartingPSN: psn, RemoteCMResponseTimeout: 20,
		LocalCMResponseTimeout: 20, RetryCount: 7, PKey: 0xffff, PathMTU: roce.MTU1024, RNRRetryCount: 7,
		MaxCMRetries: 15, Primary: cm.Path{LocalPortLID: 0xffff, RemotePortLID: 0xffff,
			LocalPortGID: roce.GIDFromAddr(addrA), RemotePortGID: roce.GIDFromAddr(addrB), HopLimit: 64, LocalACKTimeout: 19}}
}

func testREP(qpn, psn uint32) cm.REP {
	return cm.REP{LocalQPN: qpn, StartingPSN: psn, TargetACKDelay: 15, RNRRetryCount: 7}
}

// connect establishes a connection A → B and returns both ends.
func (w *wire) connect() (ca, cb *ibcm.Conn) {
	w.t.Helper()
	ca, err := w.a.m.Connect(w.now, addrB, testREQ(0x11, 0x100))
	if err != nil {
		w.t.Fatal(err)
	}
	w.pump()
	cb = w.event(w.b, ibcm.EventREQ).Conn
	if err := w.b.m.Accept(w.now, cb, testREP(0x22, 0x200)); err != nil {
		w.t.Fatal(err)
	}
	w.pump()
	w.event(w.a, ibcm.EventREP)
	if err := w.a.m.RTU(ca, nil); err != nil {
		w.t.Fatal(err)
	}
	w.pump()
	w.event(w.b, ibcm.EventEstablished)
	w.noEvents()
	return ca, cb
}

func wantState(t *testing.T, c *ibcm.Conn, s ibcm.State) {
	t.Helper()
	if c.State() != s {
		t.Fatalf("connection 0x%08x: state %v, want %v", c.LocalCommID(), c.State(), s)
	}
}

// loseFirst drops the first n MADs of attr that from sends.
func loseFirst(from netip.Addr, attr cm.AttributeID, n int) func(netip.Addr, cm.Header) bool {
	return func(f netip.Addr, h cm.Header) bool {
		if f == from && h.AttributeID == attr && n > 0 {
			n--
			return true
		}
		return false
	}
}

// madsOf returns the MADs of attr that from sent, in order.
func (w *wire) madsOf(from netip.Addr, attr cm.AttributeID) [][]byte {
	var out [][]byte
	for _, s := range w.sent {
		if s.from == from && s.h.AttributeID == attr {
			out = append(out, s.mad)
		}
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
