package transport_test

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

var (
	macA  = [6]byte{0x52, 0x54, 0x00, 0x77, 0x00, 0x0b}
	macB  = [6]byte{0x52, 0x54, 0x00, 0x77, 0x00, 0x0c}
	addrA = netip.MustParseAddr("10.77.0.11")
	addrB = netip.MustParseAddr("10.77.0.12")
)

// side is one endpoint of a test connection.
type side struct {
	dev *transport.Device
	end *transport.PipeEnd
	pd  *transport.ProtectionDomain
	cq  *transport.CompletionQueue
	qp  *transport.QueuePair
	buf []byte // registered with all access flags
	mr  *transport.MemoryRegion
	wcs []transport.WorkCompletion
}

// pair is two devices joined by a Pipe, driven deterministically by a FakeClock.
type pair struct {
	t     testing.TB
	clock *transport.FakeClock
	a, b  *side
}

type pairConfig struct {
	mtu         roce.MTU
	bufSize     int
	faultsA     transport.Faults // frames arriving at A
	faultsB     transport.Faults // frames arriving at B
	retryCnt    uint8
	rnrRetry    uint8
	timeout     uint8
	minRNRTimer uint8
	psnA, psnB  uint32 // first PSN each side sends
	access      transport.Access
	maxRdAtomic uint8
	cqDepthB    int // B's CQ depth (default 1<<16)
	cc          transport.CongestionControl
	dcqcn       transport.DCQCNParams
	tclass      uint8
	maxSendWR   int // each QP's max_send_wr (default 4096)
}

func defaults(c pairConfig) pairConfig {
	if c.mtu == 0 {
		c.mtu = roce.MTU1024
	}
	if c.bufSize == 0 {
		c.bufSize = 1 << 16
	}
	if c.retryCnt == 0 {
		c.retryCnt = 7
	}
	if c.timeout == 0 {
		c.timeout = 14
	}
	if c.minRNRTimer == 0 {
		c.minRNRTimer = 12
	}
	if c.access == 0 {
		c.access = transport.AccessRemoteWrite | transport.AccessRemoteRead | transport.AccessRemoteAtomic
	}
	if c.maxRdAtomic == 0 {
		c.maxRdAtomic = 16
	}
	return c
}

func newPair(t testing.TB, c pairConfig) *pair {
	t.Helper()
	c = defaults(c)
	netMTU := 1500
	if c.mtu == roce.MTU4096 {
		netMTU = 9000
	}
	ea, eb := transport.NewPipe(
		transport.PipeConfig{MAC: macA, Addrs: []netip.Addr{addrA}, MTU: netMTU, Faults: c.faultsA},
		transport.PipeConfig{MAC: macB, Addrs: []netip.Addr{addrB}, MTU: netMTU, Faults: c.faultsB})
	p := &pair{t: t, clock: transport.NewFakeClock()}
	p.a = p.newSide(ea, c, 1<<16)
	p.b = p.newSide(eb, c, cmp.Or(c.cqDepthB, 1<<16))
	p.connect(p.a, p.b, c, c.psnA, c.psnB)
	p.connect(p.b, p.a, c, c.psnB, c.psnA)
	return p
}

func (p *pair) newSide(end *transport.PipeEnd, c pairConfig, cqDepth int) *side {
	return p.newSideOn(end, end, c, cqDepth)
}

// newSideOn is newSide with the device opened on link, which carries end's frames.
func (p *pair) newSideOn(end *transport.PipeEnd, link transport.Link, c pairConfig, cqDepth int) *side {
	dev, err := transport.Open(link, transport.Options{Clock: p.clock, CC: c.cc, DCQCN: c.dcqcn})
	if err != nil {
		p.t.Fatal(err)
	}
	s := &side{dev: dev, end: end, pd: dev.AllocPD(), cq: dev.CreateCQ(cqDepth)}
	s.buf = make([]byte, c.bufSize)
	s.mr, err = s.pd.RegMR(s.buf, transport.AccessLocalWrite|transport.AccessRemoteWrite|
		transport.AccessRemoteRead|transport.AccessRemoteAtomic)
	if err != nil {
		p.t.Fatal(err)
	}
	s.qp, err = s.pd.CreateQP(transport.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq,
		Cap: transport.QPCap{MaxSendWR: cmp.Or(c.maxSendWR, 4096), MaxRecvWR: 4096, MaxSendSGE: 4, MaxRecvSGE: 4, MaxInlineData: 64}})
	if err != nil {
		p.t.Fatal(err)
	}
	return s
}

// connect brings s's QP to RTS towards peer.
func (p *pair) connect(s, peer *side, c pairConfig, sqPSN, rqPSN uint32) {
	p.t.Helper()
	qp := s.qp
	must(p.t, transport.BringUp(qp, transport.QPS_RESET, transport.QPS_RTS,
		c.connectParams(peer.end.Addrs()[0], c.mtu, peer.qp.QPN(), sqPSN, rqPSN)))
}

// connectParams are c's bring-up attributes towards the QP dqpn at addr.
func (c pairConfig) connectParams(addr netip.Addr, mtu roce.MTU, dqpn, sqPSN, rqPSN uint32) transport.ConnectParams {
	return transport.ConnectParams{Access: c.access, AH: transport.AddressHandle{DGID: roce.GIDFromAddr(addr), SGIDIndex: 1, TrafficClass: c.tclass},
		PathMTU: mtu, DestQPN: dqpn, RQPSN: rqPSN, MaxDestRdAtomic: c.maxRdAtomic, SQPSN: sqPSN, MaxRdAtomic: c.maxRdAtomic,
		Timers: &transport.Timers{Timeout: c.timeout, RetryCnt: c.retryCnt, RNRRetry: c.rnrRetry, MinRNRTimer: c.minRNRTimer}}
}

// progress makes one pass of d's engine, failing the test on a link error.
func progress(t testing.TB, d *transport.Device) bool {
	t.Helper()
	busy, err := d.Progress()
	if err != nil {
		t.Fatal(err)
	}
	return busy
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// run drives both devices until cond holds, jumping the clock to the next timer
// whenever both are idle. It fails the test if the engines stall or simulated time
// exceeds limit.
func (p *pair) run(cond func() bool, limit time.Duration) {
	p.t.Helper()
	start := p.clock.Now()
	for {
		p.collect()
		if cond() {
			return
		}
		if p.clock.Now().Sub(start) > limit {
			p.t.Fatalf("not done after %v of simulated time; A: %v B: %v", limit, p.a.counters(), p.b.counters())
		}
		busyA := progress(p.t, p.a.dev)
		busyB := progress(p.t, p.b.dev)
		if busyA || busyB {
			p.clock.Advance(time.Microsecond)
			continue
		}
		next := earliest(p.a.dev.NextDeadline(), p.b.dev.NextDeadline())
		if next.IsZero() {
			p.collect()
			if cond() {
				return
			}
			p.t.Fatalf("engines idle with nothing scheduled; A: %v B: %v", p.a.counters(), p.b.counters())
		}
		p.clock.Set(next)
	}
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// collect polls both CQs into the sides' wcs.
func (p *pair) collect() {
	for _, s := range []*side{p.a, p.b} {
		var buf [64]transport.WorkCompletion
		for {
			n := s.cq.Poll(buf[:])
			if n == 0 {
				break
			}
			s.wcs = append(s.wcs, buf[:n]...)
		}
	}
}

// waitWCs runs until s has n completions and returns them, clearing s.wcs.
func (p *pair) waitWCs(s *side, n int, limit time.Duration) []transport.WorkCompletion {
	p.t.Helper()
	p.run(func() bool { return len(s.wcs) >= n }, limit)
	w := s.wcs
	s.wcs = nil
	if len(w) != n {
		p.t.Fatalf("%d completions, want %d: %+v", len(w), n, w)
	}
	return w
}

func fill(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

func checkWC(t testing.TB, wc transport.WorkCompletion, wrid uint64, status transport.WCStatus, op transport.WCOpcode, byteLen int) {
	t.Helper()
	if wc.WRID != wrid || wc.Status != status || wc.Opcode != op || (byteLen >= 0 && wc.ByteLen != uint32(byteLen)) {
		t.Fatalf("completion %+v (%v %v), want wr_id %d %v %v byte_len %d", wc, wc.Status, wc.Opcode, wrid, status, op, byteLen)
	}
}

func checkBytes(t testing.TB, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: %d bytes differ from byte %d", what, len(want), i)
	}
}

func sge(s *side, off, n int) []transport.SGE {
	return []transport.SGE{{Addr: s.mr.Addr() + uint64(off), Length: uint32(n), LKey: s.mr.LKey()}}
}

func (s *side) String() string { return fmt.Sprintf("QP 0x%x", s.qp.QPN()) }

// counters returns the side's non-zero device and QP counters.
func (s *side) counters() map[string]uint64 {
	m := map[string]uint64{}
	for k, v := range s.dev.Counters().Map() {
		if v != 0 {
			m["dev."+k] = v
		}
	}
	for k, v := range s.qp.Counters().Map() {
		if v != 0 {
			m[k] = v
		}
	}
	return m
}
