package transport_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/xroce/xroce/transport"
)

// pathDir is one direction of a simulated path on the fake clock: frames leave at
// the bottleneck's rate, wait behind each other (at most limit frames: tail drop),
// and arrive a fixed delay later; each is lost at random with probability loss.
type pathDir struct {
	clock *transport.FakeClock
	rate  float64       // bytes per second at the bottleneck; 0: no serialization
	delay time.Duration // one-way delay after serialization
	limit int           // frames that may wait at the bottleneck
	loss  float64
	rng   *rand.Rand
	busy  time.Time // when the bottleneck is free
	queue []simFrame
	sent  uint64
	lost  uint64
	tail  uint64
}

type simFrame struct {
	at time.Time
	b  []byte
}

func (d *pathDir) send(f []byte) {
	d.sent++
	now := d.clock.Now()
	if d.loss > 0 && d.rng.Float64() < d.loss {
		d.lost++
		return
	}
	start := d.busy
	if start.Before(now) {
		start = now
	}
	var tx time.Duration
	if d.rate > 0 {
		tx = time.Duration(float64(len(f)) * float64(time.Second) / d.rate)
	}
	if d.limit > 0 && tx > 0 && int(start.Sub(now)/tx) > d.limit {
		d.tail++
		return
	}
	d.busy = start.Add(tx)
	d.queue = append(d.queue, simFrame{at: d.busy.Add(d.delay), b: append([]byte(nil), f...)})
}

func (d *pathDir) next() time.Time {
	if len(d.queue) == 0 {
		return time.Time{}
	}
	return d.queue[0].at
}

// simEnd is one end of a simulated path: a transport.Link.
type simEnd struct {
	mac   [6]byte
	addr  netip.Addr
	tx    *pathDir // towards the peer
	rx    *pathDir // towards this end
	peer  *simEnd
	clock *transport.FakeClock
}

func (e *simEnd) Send(frames [][]byte) (int, error) {
	for _, f := range frames {
		e.tx.send(f)
	}
	return len(frames), nil
}

func (e *simEnd) Recv(frames [][]byte) (int, error) {
	d := e.rx
	n := 0
	now := e.clock.Now()
	for n < len(frames) && len(d.queue) > 0 && !d.queue[0].at.After(now) {
		frames[n] = d.queue[0].b
		d.queue = d.queue[1:]
		n++
	}
	return n, nil
}

func (e *simEnd) Wait(time.Time) error                { return nil }
func (e *simEnd) Wake()                               {}
func (e *simEnd) MTU() int                            { return 1500 }
func (e *simEnd) Caps() transport.LinkCaps            { return transport.LinkCaps{} }
func (e *simEnd) HardwareAddr() [6]byte               { return e.mac }
func (e *simEnd) Addrs() []netip.Addr                 { return []netip.Addr{e.addr} }
func (e *simEnd) Resolve(netip.Addr) ([6]byte, error) { return e.peer.mac, nil }
func (e *simEnd) Close() error                        { return nil }

// pathConfig shapes a simulated path: the same in both directions unless set.
type pathConfig struct {
	rate  float64       // bottleneck bytes per second; 0: no serialization
	delay time.Duration // one-way
	limit int           // bottleneck queue in frames; 0: unbounded
	lossA float64       // towards A (responses)
	lossB float64       // towards B (requests)
	seed  uint64
	c     pairConfig
}

// simPair is a pair of engines joined by a simulated path, driven on a fake clock.
type simPair struct {
	*pair
	ab, ba *pathDir // A to B, B to A
}

func newSimPair(t testing.TB, pc pathConfig) *simPair {
	t.Helper()
	c := defaults(pc.c)
	clock := transport.NewFakeClock()
	mk := func(loss float64, seed uint64) *pathDir {
		return &pathDir{clock: clock, rate: pc.rate, delay: pc.delay, limit: pc.limit, loss: loss,
			rng: rand.New(rand.NewPCG(seed, 0x70617468))}
	}
	ab, ba := mk(pc.lossB, pc.seed), mk(pc.lossA, pc.seed+1)
	ea := &simEnd{mac: macA, addr: addrA, tx: ab, rx: ba, clock: clock}
	eb := &simEnd{mac: macB, addr: addrB, tx: ba, rx: ab, clock: clock}
	ea.peer, eb.peer = eb, ea
	p := &pair{t: t, clock: clock}
	mkSide := func(l transport.Link) *side {
		dev, err := transport.Open(l, transport.Options{Clock: clock})
		must(t, err)
		s := &side{dev: dev, pd: dev.AllocPD(), cq: dev.CreateCQ(1 << 16)}
		s.buf = make([]byte, c.bufSize)
		s.mr, err = s.pd.RegMR(s.buf, transport.AccessLocalWrite|transport.AccessRemoteWrite|
			transport.AccessRemoteRead|transport.AccessRemoteAtomic)
		must(t, err)
		s.qp, err = s.pd.CreateQP(transport.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq,
			Cap: transport.QPCap{MaxSendWR: 4096, MaxRecvWR: 4096, MaxSendSGE: 4, MaxRecvSGE: 4}})
		must(t, err)
		return s
	}
	p.a, p.b = mkSide(ea), mkSide(eb)
	must(t, transport.BringUp(p.a.qp, transport.QPS_RESET, transport.QPS_RTS,
		c.connectParams(addrB, c.mtu, p.b.qp.QPN(), c.psnA, c.psnB)))
	must(t, transport.BringUp(p.b.qp, transport.QPS_RESET, transport.QPS_RTS,
		c.connectParams(addrA, c.mtu, p.a.qp.QPN(), c.psnB, c.psnA)))
	return &simPair{pair: p, ab: ab, ba: ba}
}

// run drives both engines until cond holds: a busy pass costs a microsecond; when
// both are idle the clock jumps to the next timer or frame arrival.
func (s *simPair) run(cond func() bool, limit time.Duration) {
	s.t.Helper()
	start := s.clock.Now()
	for {
		s.collect()
		if cond() {
			return
		}
		if s.clock.Now().Sub(start) > limit {
			s.t.Fatalf("not done after %v of simulated time; A: %v B: %v", limit, s.a.counters(), s.b.counters())
		}
		busyA := progress(s.t, s.a.dev)
		busyB := progress(s.t, s.b.dev)
		if busyA || busyB {
			s.clock.Advance(time.Microsecond)
			continue
		}
		next := earliest(earliest(s.a.dev.NextDeadline(), s.b.dev.NextDeadline()), earliest(s.ab.next(), s.ba.next()))
		if next.IsZero() {
			s.t.Fatalf("engines idle with nothing scheduled; A: %v B: %v", s.a.counters(), s.b.counters())
		}
		s.clock.Set(next)
	}
}

// stream keeps depth messages of size bytes of op (WRITE, READ or SEND) posted from
// A to B until n have completed, checks the data of every message, and returns the
// goodput in bytes per simulated second.
func (s *simPair) stream(op string, size, n, depth int) float64 {
	s.t.Helper()
	a, b := s.a, s.b
	slots := len(a.buf) / 2 / size
	start := s.clock.Now()
	posted, done, recvd := 0, 0, 0
	post := func(i int) {
		off := (i % slots) * size
		src, dst := a.buf[off:off+size], b.buf[len(b.buf)/2+off:][:size]
		if op == "READ" {
			src, dst = b.buf[off:off+size], a.buf[len(a.buf)/2+off:][:size]
		}
		fill(src, uint64(i))
		_ = dst
		wr := transport.SendWR{WRID: uint64(i), Opcode: transport.WR_RDMA_WRITE, SGList: sge(a, off, size),
			Flags: transport.SendSignaled, RemoteAddr: b.mr.Addr() + uint64(len(b.buf)/2+off), RKey: b.mr.RKey()}
		switch op {
		case "READ":
			wr = transport.SendWR{WRID: uint64(i), Opcode: transport.WR_RDMA_READ, SGList: sge(a, len(a.buf)/2+off, size),
				Flags: transport.SendSignaled, RemoteAddr: b.mr.Addr() + uint64(off), RKey: b.mr.RKey()}
		case "SEND":
			must(s.t, postRecv(b, uint64(i), len(b.buf)/2+off, size))
			wr.Opcode, wr.RemoteAddr, wr.RKey = transport.WR_SEND, 0, 0
		}
		must(s.t, postSend(a, wr))
	}
	check := func(i int) {
		off := (i % slots) * size
		src, dst := a.buf[off:off+size], b.buf[len(b.buf)/2+off:][:size]
		if op == "READ" {
			src, dst = b.buf[off:off+size], a.buf[len(a.buf)/2+off:][:size]
		}
		checkBytes(s.t, fmt.Sprintf("%s %d", op, i), dst, src)
	}
	for posted < min(depth, n) {
		post(posted)
		posted++
	}
	for done < n {
		s.run(func() bool { return len(a.wcs) > 0 }, time.Minute)
		for _, wc := range a.wcs {
			if wc.Status != transport.WC_SUCCESS || wc.WRID != uint64(done) {
				s.t.Fatalf("completion %+v (%v), want wr_id %d success", wc, wc.Status, done)
			}
			if op == "SEND" {
				for recvd <= done {
					s.run(func() bool { return len(b.wcs) > 0 }, time.Minute)
					recvd += len(b.wcs)
					b.wcs = nil
				}
			}
			check(done)
			done++
			if posted < n {
				post(posted)
				posted++
			}
		}
		a.wcs = nil
	}
	return float64(n*size) / s.clock.Now().Sub(start).Seconds()
}

// simPath is the simulated path of the loss tests: 300k frames/s of path MTU 1024
// (1082-byte RDMA WRITE MIDDLE frames; about what the engine moves over AF_XDP on the
// development VM) and 25 µs each way, a bandwidth-delay product of about 16 packets.
func simPath(loss float64, seed uint64) pathConfig {
	return pathConfig{rate: 300e3 * 1082, delay: 25 * time.Microsecond, lossA: loss, lossB: loss, seed: seed,
		c: pairConfig{bufSize: 32 << 20}}
}

// simRate is simPath's goodput with no loss, in bytes per second: 1024 payload bytes
// a frame.
const simRate = 300e3 * 1024

// TestWindowUnderRandomLoss: a 1 MiB WRITE stream over the simulated path with 5 %
// random loss each way keeps more than a quarter of the path's rate (the fixed
// window of 128 kept a few percent), the window settles well inside its limits, and
// the retransmission timer runs from measured round trips, far below the local ACK
// timeout.
func TestWindowUnderRandomLoss(t *testing.T) {
	s := newSimPair(t, simPath(0.05, 3))
	g := s.stream("WRITE", 1<<20, 12, 8)
	cs := s.a.qp.CongestionState()
	c := s.a.qp.Counters()
	t.Logf("%.1f MiB/s (%.0f %% of the path), %+v, A %v", g/(1<<20), 100*g/simRate, cs, c)
	if g < simRate/4 {
		t.Errorf("goodput %.1f MiB/s, want at least a quarter of the path's %.1f", g/(1<<20), simRate/(1<<20))
	}
	if cs.Cwnd < minWindow || cs.Cwnd >= transport.MaxUnackedPSN || cs.SRTT <= 0 || cs.SRTT > time.Millisecond ||
		cs.RTO < transport.MinRTO || cs.RTO > 10*time.Millisecond {
		t.Errorf("state %+v", cs)
	}
	if c.Get(transport.CntRcvdSeqErr) == 0 || c.Get(transport.CntRoceAdpRetrans) == 0 || c.Get(transport.CntLocalAckTimeoutErr) > 1 {
		t.Errorf("counters %v", c)
	}
}

const minWindow = 2

// TestSimulatedLoss (XROCE_SIM=1) logs the goodput of 1 MiB WRITE, READ and SEND
// streams over the simulated path with 0, 2 and 5 % random loss in both directions,
// and of a WRITE stream through a 100 Mbit/s bottleneck with a shallow queue: the
// tool behind the window's constants (docs/congestion.md). Every message's bytes are
// checked.
func TestSimulatedLoss(t *testing.T) {
	if os.Getenv("XROCE_SIM") == "" {
		t.Skip("a simulation of about a minute: XROCE_SIM=1")
	}
	for _, op := range []string{"WRITE", "READ", "SEND"} {
		for _, loss := range []float64{0, 0.02, 0.05} {
			s := newSimPair(t, simPath(loss, 7))
			g := s.stream(op, 1<<20, 100, 8)
			cs := s.a.qp.CongestionState()
			t.Logf("%-5s %2.0f %%: %6.1f MiB/s (%3.0f %% of the path) cwnd %3d srtt %v; A %v",
				op, loss*100, g/(1<<20), 100*g/simRate, cs.Cwnd, cs.SRTT, s.a.qp.Counters())
		}
	}
	for _, lim := range []int{16, 64} {
		s := newSimPair(t, pathConfig{rate: 12.5e6, delay: 25 * time.Microsecond, limit: lim, seed: 7, c: pairConfig{bufSize: 32 << 20}})
		g := s.stream("WRITE", 1<<20, 10, 8)
		cs := s.a.qp.CongestionState()
		t.Logf("WRITE through 100 Mbit/s, queue %d: %.2f MB/s (%.0f %% of the bottleneck) cwnd %d, %d tail drops; A %v",
			lim, g/1e6, 100*g/(12.5e6*1024/1082), cs.Cwnd, s.ab.tail, s.a.qp.Counters())
	}
}
