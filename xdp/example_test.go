package xdp_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/xdp"
)

// Two engines on the two ends of a veth pair, each end in its own network namespace
// (ip netns add a; ip link add veth-a netns a type veth peer veth-b netns b; with
// 10.79.0.1/24 on veth-a and 10.79.0.2/24 on veth-b), talking RoCEv2 over AF_XDP:
// A writes 16 bytes into B's memory with RDMA WRITE and reads them back with RDMA
// READ. It prints:
//
//	1 IBV_WC_RDMA_WRITE IBV_WC_SUCCESS 16
//	2 IBV_WC_RDMA_READ IBV_WC_SUCCESS 16
//	read back: "hello over XDP!!"
//
// It needs root (CAP_NET_ADMIN and CAP_BPF) and the veth pair, so it has no Output
// line: go test compiles it but does not run it. TestExampleOpen runs writeReadXDP
// on a veth pair in two namespaces it creates, and checks it prints exactly that.
func ExampleOpen() {
	err := writeReadXDP(os.Stdout,
		xdp.Config{Interface: "veth-a", Netns: "/var/run/netns/a"}, netip.MustParseAddr("10.79.0.1"),
		xdp.Config{Interface: "veth-b", Netns: "/var/run/netns/b"}, netip.MustParseAddr("10.79.0.2"))
	if err != nil {
		log.Fatal(err)
	}
}

// xdpSide is one end: an engine on an AF_XDP link with a 64-byte registered buffer,
// a CQ and an RC QP.
type xdpSide struct {
	dev *transport.Device
	cq  *transport.CompletionQueue
	qp  *transport.QueuePair
	mr  *transport.MemoryRegion
	buf []byte
}

// writeReadXDP opens an AF_XDP link with cfgA and with cfgB, whose interfaces have
// the addresses ipA and ipB, runs an engine on each and connects a QP on each to the
// other's. A then RDMA WRITEs 16 bytes to B and READs them back; each completion and
// the bytes are printed on w. It gives up after 10 seconds.
func writeReadXDP(w io.Writer, cfgA xdp.Config, ipA netip.Addr, cfgB xdp.Config, ipB netip.Addr) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	var engines sync.WaitGroup
	defer engines.Wait()
	defer cancel()
	open := func(cfg xdp.Config) (*xdpSide, error) {
		link, err := xdp.Open(cfg) // loads xroce's XDP program: UDP port 4791 to AF_XDP
		if err != nil {
			return nil, err
		}
		dev, err := transport.Open(link, transport.Options{})
		if err != nil {
			link.Close()
			return nil, err
		}
		engines.Add(1)
		go func() { defer engines.Done(); _ = dev.Run(ctx); dev.Close() }()
		pd := dev.AllocPD()
		s := &xdpSide{dev: dev, cq: dev.CreateCQ(16), buf: make([]byte, 64)}
		if s.mr, err = pd.RegMR(s.buf, transport.AccessLocalWrite|transport.AccessRemoteWrite|transport.AccessRemoteRead); err != nil {
			return nil, err
		}
		s.qp, err = pd.CreateQP(transport.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq})
		return s, err
	}
	a, err := open(cfgA)
	if err != nil {
		return err
	}
	b, err := open(cfgB)
	if err != nil {
		return err
	}
	// Each QP towards the other, from the GID of its own address (index 1 for IPv4,
	// as rdma_rxe numbers them); RTR resolves the peer's MAC address (ARP).
	connect := func(s, peer *xdpSide, ip, peerIP netip.Addr, psn, peerPSN uint32) error {
		sgid, ok := s.dev.GIDTable().Find(roce.GIDFromAddr(ip))
		if !ok {
			return fmt.Errorf("no GID for %s", ip)
		}
		return transport.BringUp(s.qp, transport.QPS_RESET, transport.QPS_RTS, transport.ConnectParams{
			Access:  transport.AccessRemoteWrite | transport.AccessRemoteRead,
			AH:      transport.AddressHandle{DGID: roce.GIDFromAddr(peerIP), SGIDIndex: sgid},
			PathMTU: roce.MTU1024, DestQPN: peer.qp.QPN(), RQPSN: peerPSN, SQPSN: psn,
			MaxRdAtomic: 1, MaxDestRdAtomic: 1})
	}
	if err := connect(a, b, ipA, ipB, 100, 500); err != nil {
		return err
	}
	if err := connect(b, a, ipB, ipA, 500, 100); err != nil {
		return err
	}

	// post posts one signaled work request of A's and prints its completion.
	post := func(wr transport.SendWR) error {
		wr.Flags = transport.SendSignaled
		if _, err := a.qp.PostSend(wr); err != nil {
			return err
		}
		var wc [1]transport.WorkCompletion
		for a.cq.Poll(wc[:]) == 0 {
			if err := a.cq.Wait(ctx); err != nil {
				return fmt.Errorf("%v: no completion: %w", wr.Opcode, err)
			}
		}
		_, err := fmt.Fprintln(w, wc[0].WRID, wc[0].Opcode, wc[0].Status, wc[0].ByteLen)
		return err
	}
	msg := "hello over XDP!!"
	copy(a.buf, msg)
	if err := post(transport.SendWR{WRID: 1, Opcode: transport.WR_RDMA_WRITE,
		SGList:     []transport.SGE{{Addr: a.mr.Addr(), Length: uint32(len(msg)), LKey: a.mr.LKey()}},
		RemoteAddr: b.mr.Addr() + 32, RKey: b.mr.RKey()}); err != nil {
		return err
	}
	// Looking at b.buf here would race with B's engine (the two sides meet only in
	// the kernel, which Go's race detector does not see): A reads it back instead.
	if err := post(transport.SendWR{WRID: 2, Opcode: transport.WR_RDMA_READ,
		SGList:     []transport.SGE{{Addr: a.mr.Addr() + 48, Length: uint32(len(msg)), LKey: a.mr.LKey()}},
		RemoteAddr: b.mr.Addr() + 32, RKey: b.mr.RKey()}); err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "read back: %q\n", a.buf[48:48+len(msg)])
	return err
}
