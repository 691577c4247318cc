package pcap_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// A pair of engines on a Pipe, driven by a fake clock, for recording real traffic
// through a Tap: a client that runs requests against a server.

var (
	srvAddr = netip.MustParseAddr("10.79.0.2")
	cliAddr = netip.MustParseAddr("10.79.0.1")
	srvMAC  = [6]byte{0x52, 0x54, 0x00, 0x79, 0x00, 0x02}
	cliMAC  = [6]byte{0x52, 0x54, 0x00, 0x79, 0x00, 0x01}
)

type node struct {
	dev *transport.Device
	qp  *transport.QueuePair
	cq  *transport.CompletionQueue
	mr  *transport.MemoryRegion
	buf []byte
	n   int // completions seen
}

type engines struct {
	t        *testing.T
	clock    *transport.FakeClock
	srv, cli *node
}

// newEngines joins a server and a client; wrap may put a Tap around the server's
// link end.
func newEngines(t *testing.T, wrap func(transport.Link, *transport.FakeClock) transport.Link) *engines {
	t.Helper()
	es, ec := transport.NewPipe(transport.PipeConfig{MAC: srvMAC, Addrs: []netip.Addr{srvAddr}},
		transport.PipeConfig{MAC: cliMAC, Addrs: []netip.Addr{cliAddr}})
	e := &engines{t: t, clock: transport.NewFakeClock()}
	var sl transport.Link = es
	if wrap != nil {
		sl = wrap(es, e.clock)
	}
	e.srv = e.node(sl)
	e.cli = e.node(ec)
	e.connect(e.srv, e.cli, cliAddr, 1000, 5000)
	e.connect(e.cli, e.srv, srvAddr, 5000, 1000)
	return e
}

func (e *engines) node(l transport.Link) *node {
	dev, err := transport.Open(l, transport.Options{Clock: e.clock})
	must(e.t, err)
	pd := dev.AllocPD()
	n := &node{dev: dev, cq: dev.CreateCQ(1 << 14), buf: make([]byte, 1<<16)}
	for i := range n.buf {
		n.buf[i] = byte(i * 7)
	}
	n.mr, err = pd.RegMR(n.buf, transport.AccessLocalWrite|transport.AccessRemoteWrite|transport.AccessRemoteRead|transport.AccessRemoteAtomic)
	must(e.t, err)
	n.qp, err = pd.CreateQP(transport.QPInitAttr{SendCQ: n.cq, RecvCQ: n.cq, Cap: transport.QPCap{MaxSendWR: 1024, MaxRecvWR: 1024}})
	must(e.t, err)
	return n
}

func (e *engines) connect(n, peer *node, peerAddr netip.Addr, sq, rq uint32) {
	must(e.t, transport.BringUp(n.qp, transport.QPS_RESET, transport.QPS_RTS, transport.ConnectParams{
		Access: transport.AccessRemoteWrite | transport.AccessRemoteRead | transport.AccessRemoteAtomic,
		AH:     transport.AddressHandle{DGID: roce.GIDFromAddr(peerAddr), SGIDIndex: 1}, PathMTU: roce.MTU1024,
		DestQPN: peer.qp.QPN(), RQPSN: rq, MaxDestRdAtomic: 128, SQPSN: sq, MaxRdAtomic: 16}))
}

// post posts count work requests of op from the client, size bytes each, and runs
// both engines until all complete. SENDs get receives posted at the server first.
func (e *engines) post(op transport.WROpcode, size, count int) {
	e.t.Helper()
	c, s := e.cli, e.srv
	for i := 0; i < count; i++ {
		if op == transport.WR_SEND {
			// Away from what the RDMA requests touch: replay cannot know where
			// receive buffers are, so memory that SENDs change is not modelled.
			_, err := s.qp.PostRecv(transport.RecvWR{WRID: uint64(i), SGList: []transport.SGE{{Addr: s.mr.Addr() + 32768, Length: uint32(size), LKey: s.mr.LKey()}}})
			must(e.t, err)
		}
		wr := transport.SendWR{WRID: uint64(i), Opcode: op, Flags: transport.SendSignaled, RemoteAddr: s.mr.Addr() + uint64(i%8)*64,
			RKey: s.mr.RKey(), CompareAdd: 1, SGList: []transport.SGE{{Addr: c.mr.Addr() + 4096, Length: uint32(size), LKey: c.mr.LKey()}}}
		_, err := c.qp.PostSend(wr)
		must(e.t, err)
	}
	want := c.n + count
	for limit := 0; c.n < want; limit++ {
		if limit > 1_000_000 {
			e.t.Fatalf("%d of %d completions", c.n-want+count, count)
		}
		busyS, errS := s.dev.Progress()
		busyC, errC := c.dev.Progress()
		if errS != nil || errC != nil {
			e.t.Fatalf("engine: %v, %v", errS, errC)
		}
		busy := busyS || busyC
		var wcs [64]transport.WorkCompletion
		for _, nd := range []*node{c, s} {
			for {
				k := nd.cq.Poll(wcs[:])
				if k == 0 {
					break
				}
				for _, wc := range wcs[:k] {
					if wc.Status != transport.WC_SUCCESS {
						e.t.Fatalf("completion %+v", wc)
					}
				}
				if nd == c {
					c.n += k
				}
			}
		}
		if busy {
			e.clock.Advance(time.Microsecond)
		} else if d := earliest(s.dev.NextDeadline(), c.dev.NextDeadline()); !d.IsZero() {
			e.clock.Set(d)
		} else {
			e.clock.Advance(time.Microsecond)
		}
	}
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
