package transport_test

import (
	"context"
	"fmt"
	"log"
	"net/netip"
	"sync"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// Two engines joined by an in-memory Ethernet link (a Pipe): the client writes a
// message into the server's memory with RDMA WRITE, then reads it back with RDMA
// READ. The server's CPU takes no part: its engine answers both.
func ExampleQueuePair_PostSend() {
	ipA, ipB := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	linkA, linkB := transport.NewPipe(
		transport.PipeConfig{MAC: [6]byte{0x02, 0, 0, 0, 0, 0x01}, Addrs: []netip.Addr{ipA}},
		transport.PipeConfig{MAC: [6]byte{0x02, 0, 0, 0, 0, 0x02}, Addrs: []netip.Addr{ipB}})
	ctx, cancel := context.WithCancel(context.Background())
	var engines sync.WaitGroup
	defer engines.Wait()
	defer cancel()

	// Each side: a device running its engine, a 64-byte registered buffer the peer
	// may write and read, a CQ and an RC QP.
	type side struct {
		cq  *transport.CompletionQueue
		qp  *transport.QueuePair
		mr  *transport.MemoryRegion
		buf []byte
	}
	open := func(link transport.Link) side {
		dev, err := transport.Open(link, transport.Options{})
		if err != nil {
			log.Fatal(err)
		}
		engines.Add(1)
		go func() { defer engines.Done(); _ = dev.Run(ctx); dev.Close() }()
		pd := dev.AllocPD()
		s := side{cq: dev.CreateCQ(16), buf: make([]byte, 64)}
		if s.mr, err = pd.RegMR(s.buf, transport.AccessLocalWrite|transport.AccessRemoteWrite|transport.AccessRemoteRead); err != nil {
			log.Fatal(err)
		}
		if s.qp, err = pd.CreateQP(transport.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq}); err != nil {
			log.Fatal(err)
		}
		return s
	}
	client, server := open(linkA), open(linkB)

	// Connect the QPs to each other: what an out-of-band exchange (perftest's TCP
	// messages, RDMA CM) would tell each side. GID index 1 is the IPv4 address.
	connect := func(s, peer side, peerIP netip.Addr, psn, peerPSN uint32) {
		err := transport.BringUp(s.qp, transport.QPS_RESET, transport.QPS_RTS, transport.ConnectParams{
			Access:  transport.AccessRemoteWrite | transport.AccessRemoteRead,
			AH:      transport.AddressHandle{DGID: roce.GIDFromAddr(peerIP), SGIDIndex: 1},
			PathMTU: roce.MTU1024, DestQPN: peer.qp.QPN(), RQPSN: peerPSN, SQPSN: psn,
			MaxRdAtomic: 1, MaxDestRdAtomic: 1})
		if err != nil {
			log.Fatal(err)
		}
	}
	connect(client, server, ipB, 100, 500)
	connect(server, client, ipA, 500, 100)

	// complete waits for the client's next completion.
	complete := func() transport.WorkCompletion {
		var wc [1]transport.WorkCompletion
		for client.cq.Poll(wc[:]) == 0 {
			if err := client.cq.Wait(ctx); err != nil {
				log.Fatal(err)
			}
		}
		return wc[0]
	}

	// RDMA WRITE the client's first 16 bytes to the server's offset 32.
	msg := "hello over RoCE!"
	copy(client.buf, msg)
	_, err := client.qp.PostSend(transport.SendWR{WRID: 1, Opcode: transport.WR_RDMA_WRITE, Flags: transport.SendSignaled,
		SGList:     []transport.SGE{{Addr: client.mr.Addr(), Length: uint32(len(msg)), LKey: client.mr.LKey()}},
		RemoteAddr: server.mr.Addr() + 32, RKey: server.mr.RKey()})
	if err != nil {
		log.Fatal(err)
	}
	wc := complete()
	fmt.Println(wc.WRID, wc.Opcode, wc.Status, wc.ByteLen)
	fmt.Printf("server memory: %q\n", server.buf[32:32+len(msg)])

	// RDMA READ them back into the client's offset 48.
	_, err = client.qp.PostSend(transport.SendWR{WRID: 2, Opcode: transport.WR_RDMA_READ, Flags: transport.SendSignaled,
		SGList:     []transport.SGE{{Addr: client.mr.Addr() + 48, Length: uint32(len(msg)), LKey: client.mr.LKey()}},
		RemoteAddr: server.mr.Addr() + 32, RKey: server.mr.RKey()})
	if err != nil {
		log.Fatal(err)
	}
	wc = complete()
	fmt.Println(wc.WRID, wc.Opcode, wc.Status, wc.ByteLen)
	fmt.Printf("read back: %q\n", client.buf[48:48+len(msg)])

	// Output:
	// 1 IBV_WC_RDMA_WRITE IBV_WC_SUCCESS 16
	// server memory: "hello over RoCE!"
	// 2 IBV_WC_RDMA_READ IBV_WC_SUCCESS 16
	// read back: "hello over RoCE!"
}
