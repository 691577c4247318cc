package xdp_test

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/xroce/xroce/bpf"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/test/testnet"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/xdp"
)

// testNet is a testnet.Net with this package's field names.
type testNet struct {
	nsA, nsB, nsBr string
	ifA, ifB       string
	ipA, ipB       netip.Addr
	ip6A, ip6B     netip.Addr
}

func sh(t testing.TB, args ...string) string { t.Helper(); return testnet.Sh(t, args...) }

func newTestNet(t testing.TB, mtu int, bridge bool) *testNet {
	t.Helper()
	return newTestNetQueues(t, mtu, bridge, 1)
}

func newTestNetQueues(t testing.TB, mtu int, bridge bool, queues int) *testNet {
	t.Helper()
	n := testnet.New(t, testnet.Options{MTU: mtu, Bridge: bridge, Queues: queues})
	return &testNet{n.NsA, n.NsB, n.NsBr, n.IfA, n.IfB, n.IPA, n.IPB, n.IP6A, n.IP6B}
}

func nsPath(ns string) string { return testnet.Path(ns) }

// endpoint is an engine with one QP and a registered buffer.
type endpoint struct {
	dev *transport.Device
	pd  *transport.ProtectionDomain
	cq  *transport.CompletionQueue
	qp  *transport.QueuePair
	buf []byte
	mr  *transport.MemoryRegion
}

func newEndpoint(t testing.TB, link transport.Link, size int) *endpoint {
	t.Helper()
	return newEndpointOpts(t, link, size, transport.Options{})
}

// newEndpointOpts is newEndpoint with the device opened with opts.
func newEndpointOpts(t testing.TB, link transport.Link, size int, opts transport.Options) *endpoint {
	t.Helper()
	dev, err := transport.Open(link, opts)
	if err != nil {
		t.Fatal(err)
	}
	e := &endpoint{dev: dev, pd: dev.AllocPD(), cq: dev.CreateCQ(1 << 14), buf: make([]byte, size)}
	e.mr, err = e.pd.RegMR(e.buf, transport.AccessLocalWrite|transport.AccessRemoteWrite|transport.AccessRemoteRead|transport.AccessRemoteAtomic)
	if err != nil {
		t.Fatal(err)
	}
	e.qp, err = e.pd.CreateQP(transport.QPInitAttr{SendCQ: e.cq, RecvCQ: e.cq, Cap: transport.QPCap{MaxSendWR: 1024, MaxRecvWR: 1024}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// connect brings a's QP to RTS towards b at the given path MTU, from the GID of a's
// address of the peer's kind (index 1, the IPv4 address, for an IPv4 peer, as with
// rdma_rxe).
func connect(t testing.TB, a, b *endpoint, peer netip.Addr, mtu roce.MTU) {
	t.Helper()
	sgid := -1
	for _, e := range a.dev.GIDTable() {
		if g := e.GID.Addr(); g.Is4() == peer.Is4() && !g.IsLinkLocalUnicast() {
			sgid = e.Index
			break
		}
	}
	if sgid < 0 {
		t.Fatalf("no GID of %v's kind in %v", peer, a.dev.GIDTable())
	}
	if err := transport.BringUp(a.qp, transport.QPS_RESET, transport.QPS_RTS, transport.ConnectParams{
		Access: transport.AccessRemoteWrite | transport.AccessRemoteRead | transport.AccessRemoteAtomic,
		AH:     transport.AddressHandle{DGID: roce.GIDFromAddr(peer), SGIDIndex: sgid, TrafficClass: 0x68}, PathMTU: mtu,
		DestQPN: b.qp.QPN(), RQPSN: 0x100, MaxDestRdAtomic: 16, SQPSN: 0x100, MaxRdAtomic: 16}); err != nil {
		t.Fatal(err)
	}
}

// run starts both engines; the returned function stops them.
func run(t testing.TB, es ...*endpoint) func() {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, e := range es {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.dev.Run(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("engine stopped: %v", err)
			}
		}()
	}
	return func() { cancel(); wg.Wait() }
}

func sge(e *endpoint, off, n int) []transport.SGE {
	return []transport.SGE{{Addr: e.mr.Addr() + uint64(off), Length: uint32(n), LKey: e.mr.LKey()}}
}

// wait polls e's CQ for one completion.
func wait(t testing.TB, e *endpoint, timeout time.Duration) transport.WorkCompletion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var wc [1]transport.WorkCompletion
	for {
		if e.cq.Poll(wc[:]) == 1 {
			return wc[0]
		}
		if err := e.cq.Wait(ctx); err != nil {
			t.Fatalf("no completion after %v: counters %v", timeout, nonzero(e.dev.Counters().Map()))
		}
	}
}

func nonzero(m map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

func fill(b []byte, seed byte) {
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
}

// transfer moves n bytes A→B with op (READ: B→A) and checks the bytes. Under
// go test -race, its writes to a buffer can be reported against the engine's: they
// are ordered through the kernel (sendto, the veth, the peer's RX ring, then the
// ACK back), an edge the race detector cannot see. .ci/run runs -race on transport,
// whose Pipe link orders through Go channels, and on the daemon.
func transfer(t testing.TB, a, b *endpoint, op string, n int, seed byte) {
	t.Helper()
	half := len(a.buf) / 2
	src, dst := a.buf[:n], b.buf[half:half+n]
	if op == "READ" {
		src, dst = b.buf[:n], a.buf[half:half+n]
	}
	fill(src, seed)
	fill(dst, seed+1)
	var wr transport.SendWR
	want := transport.WC_SEND
	switch op {
	case "SEND":
		if _, err := b.qp.PostRecv(transport.RecvWR{WRID: 9, SGList: sge(b, half, n)}); err != nil {
			t.Fatal(err)
		}
		wr = transport.SendWR{Opcode: transport.WR_SEND, SGList: sge(a, 0, n)}
	case "WRITE":
		wr = transport.SendWR{Opcode: transport.WR_RDMA_WRITE, SGList: sge(a, 0, n), RemoteAddr: b.mr.Addr() + uint64(half), RKey: b.mr.RKey()}
		want = transport.WC_RDMA_WRITE
	case "READ":
		wr = transport.SendWR{Opcode: transport.WR_RDMA_READ, SGList: sge(a, half, n), RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}
		want = transport.WC_RDMA_READ
	}
	wr.WRID, wr.Flags = uint64(seed), transport.SendSignaled
	if _, err := a.qp.PostSend(wr); err != nil {
		t.Fatal(err)
	}
	wc := wait(t, a, 60*time.Second)
	if wc.Status != transport.WC_SUCCESS || wc.Opcode != want || wc.WRID != uint64(seed) {
		t.Fatalf("%s %d: completion %+v (%v)", op, n, wc, wc.Status)
	}
	if op == "SEND" {
		if rwc := wait(t, b, 10*time.Second); rwc.Status != transport.WC_SUCCESS || int(rwc.ByteLen) != n {
			t.Fatalf("SEND %d: receive completion %+v", n, rwc)
		}
	}
	if string(dst) != string(src) {
		t.Fatalf("%s of %d bytes: data differs", op, n)
	}
}

// openXDP opens an AF_XDP link on each end of n in mode; they close with the test.
func openXDP(t testing.TB, n *testNet, mode bpf.Mode) (*xdp.Link, *xdp.Link) {
	t.Helper()
	return openXDPOn(t, n.ifA, n.nsA, mode), openXDPOn(t, n.ifB, n.nsB, mode)
}

// openXDPOn opens an AF_XDP link on ifname in namespace ns; it closes with the test.
func openXDPOn(t testing.TB, ifname, ns string, mode bpf.Mode) *xdp.Link {
	t.Helper()
	l, err := xdp.Open(xdp.Config{Interface: ifname, Mode: mode, Netns: nsPath(ns)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// openUDPOn opens the kernel UDP link on ifname in namespace ns; it closes with
// the test.
func openUDPOn(t testing.TB, ifname, ns string) *xdp.UDPLink {
	t.Helper()
	l, err := xdp.OpenUDP(xdp.UDPConfig{Interface: ifname, Netns: nsPath(ns)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}
