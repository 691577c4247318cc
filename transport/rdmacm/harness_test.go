package rdmacm_test

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/transport/rdmacm"
)

var (
	ipA = netip.MustParseAddr("10.9.0.1")
	ipB = netip.MustParseAddr("10.9.0.2")
)

// tap is a Link that records every frame it sends.
type tap struct {
	*transport.PipeEnd
	mu     sync.Mutex
	frames [][]byte
}

func (t *tap) Send(frames [][]byte) (int, error) {
	n, err := t.PipeEnd.Send(frames)
	t.mu.Lock()
	for _, f := range frames[:n] {
		t.frames = append(t.frames, append([]byte(nil), f...))
	}
	t.mu.Unlock()
	return n, err
}

// reset forgets the frames recorded so far.
func (t *tap) reset() {
	t.mu.Lock()
	t.frames = nil
	t.mu.Unlock()
}

// sent returns the frames sent so far, decoded.
func (t *tap) sent(tb testing.TB) []roce.Packet {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]roce.Packet, 0, len(t.frames))
	for _, f := range t.frames {
		var p roce.Packet
		if err := p.Decode(f); err != nil {
			tb.Fatalf("frame does not decode: %v", err)
		}
		out = append(out, p)
	}
	return out
}

// cmSent returns the CM MADs among the frames sent, decoded, with their packets.
func (t *tap) cmSent(tb testing.TB) ([]cm.Header, []cm.Message, []roce.Packet) {
	var hs []cm.Header
	var ms []cm.Message
	var ps []roce.Packet
	for _, p := range t.sent(tb) {
		mad, err := cm.MADFromPacket(&p)
		if err != nil {
			continue
		}
		h, m, err := cm.Decode(mad)
		if err != nil {
			tb.Fatalf("CM MAD does not decode: %v", err)
		}
		hs, ms, ps = append(hs, h), append(ms, m), append(ps, p)
	}
	return hs, ms, ps
}

// node is one device with its engine, a Service, a PD, a CQ and a buffer.
type node struct {
	dev *transport.Device
	svc *rdmacm.Service
	pd  *transport.ProtectionDomain
	cq  *transport.CompletionQueue
	mr  *transport.MemoryRegion
	buf []byte
	tap *tap
}

// fastCM makes CM timers short for tests: packet lifetime 4.096 µs × 2^10 (4 ms),
// CM response timeout 2^12 (17 ms), 3 retries; the TimeWait (Local ACK Timeout
// from the packet lifetime and rdma_rxe's ACK delay 15) is 134 ms.
var fastCM = rdmacm.Options{PacketLifeTime: 10, CMResponseTimeout: 12, MaxCMRetries: 3}

type pairConfig struct {
	opts         rdmacm.Options
	faultsA, toB transport.Faults // towards A, towards B
	mtuA, mtuB   int
}

// newPair returns two nodes joined by a Pipe, engines running, stopped at the end.
func newPair(t *testing.T, pc pairConfig) (a, b *node, endA, endB *transport.PipeEnd) {
	t.Helper()
	endA, endB = transport.NewPipe(
		transport.PipeConfig{MAC: [6]byte{2, 0, 0, 0, 9, 1}, Addrs: []netip.Addr{ipA}, Faults: pc.faultsA, MTU: pc.mtuA},
		transport.PipeConfig{MAC: [6]byte{2, 0, 0, 0, 9, 2}, Addrs: []netip.Addr{ipB}, Faults: pc.toB, MTU: pc.mtuB})
	return openNode(t, endA, pc.opts), openNode(t, endB, pc.opts), endA, endB
}

// openNode runs an engine on end with a Service, a PD, a CQ and a registered
// buffer, all stopped when the test ends.
func openNode(t *testing.T, end *transport.PipeEnd, opts rdmacm.Options) *node {
	t.Helper()
	n := &node{tap: &tap{PipeEnd: end}, buf: make([]byte, 1<<16)}
	dev, err := transport.Open(n.tap, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	n.dev = dev
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = dev.Run(ctx) }()
	if n.svc, err = rdmacm.Start(dev, opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.svc.Close()
		cancel()
		<-done
		dev.Close()
	})
	n.pd = dev.AllocPD()
	n.cq = dev.CreateCQ(256)
	if n.mr, err = n.pd.RegMR(n.buf, transport.AccessLocalWrite|transport.AccessRemoteWrite|transport.AccessRemoteRead); err != nil {
		t.Fatal(err)
	}
	return n
}

func (n *node) newQP(t *testing.T) *transport.QueuePair {
	t.Helper()
	qp, err := n.pd.CreateQP(transport.QPInitAttr{SendCQ: n.cq, RecvCQ: n.cq,
		Cap: transport.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return qp
}

func (n *node) sge(off, length int) []transport.SGE {
	return []transport.SGE{{Addr: n.mr.Addr() + uint64(off), Length: uint32(length), LKey: n.mr.LKey()}}
}

// wc waits up to 5 s for one completion.
func (n *node) wc(t *testing.T) transport.WorkCompletion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.cq.Wait(ctx); err != nil {
		t.Fatalf("no completion: %v", err)
	}
	var wcs [1]transport.WorkCompletion
	n.cq.Poll(wcs[:])
	return wcs[0]
}

func ctx5(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// connected is an established pair of connections.
type connected struct {
	client, server *rdmacm.Conn
	req            *rdmacm.Request
}

// dialResult is what Dial returned.
type dialResult struct {
	c   *rdmacm.Conn
	err error
}

// dialAsync dials B's port from a's QP qa with cp in a goroutine; the result comes
// on the channel.
func dialAsync(t *testing.T, a *node, qa *transport.QueuePair, port uint16, cp rdmacm.Param) <-chan dialResult {
	ch := make(chan dialResult, 1)
	go func() {
		c, err := a.svc.Dial(ctx5(t), qa, netip.AddrPortFrom(ipB, port), cp, rdmacm.DialOptions{})
		ch <- dialResult{c, err}
	}()
	return ch
}

// connect listens on port at b, dials from a with cp, accepts with sp.
func connect(t *testing.T, a, b *node, port uint16, cp, sp rdmacm.Param) connected {
	t.Helper()
	l, err := b.svc.Listen(port, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	qa, qb := a.newQP(t), b.newQP(t)
	ch := dialAsync(t, a, qa, port, cp)
	req, err := l.Accept(ctx5(t))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := req.Accept(qb, sp)
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	if err := sc.WaitEstablished(ctx5(t)); err != nil {
		t.Fatal(err)
	}
	return connected{client: r.c, server: sc, req: req}
}
