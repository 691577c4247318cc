package transport_test

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// movingLink is a link whose addresses a test changes, as `ip addr` changes an
// interface's.
type movingLink struct {
	*transport.PipeEnd
	mu    sync.Mutex
	addrs []netip.Addr
}

func (l *movingLink) Addrs() []netip.Addr {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.addrs
}

func (l *movingLink) set(a ...netip.Addr) {
	l.mu.Lock()
	l.addrs = a
	l.mu.Unlock()
}

// TestFollowAddrs: the device's GID table follows its link's addresses
// (roce.GIDTable.Follow); an address handle naming the slot of a removed address
// is refused with the cause, one naming the new address's slot is resolved, and a
// table returned before the change is left as it was.
func TestFollowAddrs(t *testing.T) {
	a, _ := transport.NewPipe(transport.PipeConfig{MAC: macA, Addrs: []netip.Addr{addrA}}, transport.PipeConfig{MAC: macB, Addrs: []netip.Addr{addrB}})
	link := &movingLink{PipeEnd: a, addrs: []netip.Addr{addrA}}
	dev, err := transport.Open(link, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	start := dev.GIDTable()
	if added, removed := dev.FollowAddrs(); added != nil || removed != nil {
		t.Fatalf("nothing changed, but FollowAddrs = %v, %v", added, removed)
	}
	extra := netip.MustParseAddr("10.77.0.99")
	link.set(addrA, extra)
	added, removed := dev.FollowAddrs()
	if len(added) != 1 || added[0].Index != 2 || added[0].GID != roce.GIDFromAddr(extra) || removed != nil {
		t.Fatalf("adding %v: added %v, removed %v", extra, added, removed)
	}
	link.set(extra)
	added, removed = dev.FollowAddrs()
	if len(removed) != 1 || removed[0].Index != 1 || removed[0].GID != roce.GIDFromAddr(addrA) || added != nil {
		t.Fatalf("removing %v: added %v, removed %v", addrA, added, removed)
	}
	if len(start) != 2 || start[1].GID != roce.GIDFromAddr(addrA) {
		t.Errorf("the table returned before the change changed:\n%v", start)
	}
	pd := dev.AllocPD()
	_, err = pd.CreateAH(transport.AddressHandle{DGID: roce.GIDFromAddr(addrB), SGIDIndex: 1})
	const want = "transport: address handle: roce: GID index 1 is empty: its address was removed from the interface"
	if err == nil || err.Error() != want {
		t.Errorf("AH on the empty slot: %v, want %q", err, want)
	}
	if _, err := pd.CreateAH(transport.AddressHandle{DGID: roce.GIDFromAddr(addrB), SGIDIndex: 2}); err != nil {
		t.Errorf("AH on the new address's slot: %v", err)
	}
}

// movingPair is a connected pair whose B side's addresses the test changes (link,
// then B's FollowAddrs).
func movingPair(t *testing.T) (*pair, *movingLink) {
	c := defaults(pairConfig{})
	ea, eb := transport.NewPipe(transport.PipeConfig{MAC: macA, Addrs: []netip.Addr{addrA}},
		transport.PipeConfig{MAC: macB, Addrs: []netip.Addr{addrB}})
	link := &movingLink{PipeEnd: eb, addrs: []netip.Addr{addrB}}
	p := &pair{t: t, clock: transport.NewFakeClock()}
	p.a = p.newSide(ea, c, 1<<10)
	p.b = p.newSideOn(eb, link, c, 1<<10)
	p.connect(p.a, p.b, c, 0, 0)
	p.connect(p.b, p.a, c, 0, 0)
	return p, link
}

// TestRemovedAddressReceivesNothing: once its address leaves the interface (and
// the GID table), a device drops the frames sent to it, as rdma_rxe's
// rxe_chk_dgid does, counting them in rcvd_bad_dgid: an RDMA WRITE to it is not
// executed and its sender times out and retries; when the address comes back (to
// the same GID index) the retry lands. A QP whose address went cannot send.
func TestRemovedAddressReceivesNothing(t *testing.T) {
	p, link := movingPair(t)
	write := func(wrid uint64, b byte) {
		p.a.buf[0] = b
		_, err := p.a.qp.PostSend(transport.SendWR{WRID: wrid, Opcode: transport.WR_RDMA_WRITE, SGList: sge(p.a, 0, 1),
			RemoteAddr: p.b.mr.Addr(), RKey: p.b.mr.RKey(), Flags: transport.SendSignaled})
		must(t, err)
	}
	write(1, 'x')
	checkWC(t, p.waitWCs(p.a, 1, time.Second)[0], 1, transport.WC_SUCCESS, transport.WC_RDMA_WRITE, 1)

	link.set()
	if _, removed := p.b.dev.FollowAddrs(); len(removed) != 1 {
		t.Fatalf("removed %v", removed)
	}
	write(2, 'y')
	p.run(func() bool { return p.b.dev.Counters().Get(transport.CntRcvdBadDGID) > 0 }, time.Second)
	p.run(func() bool { return p.a.dev.Counters().Get(transport.CntLocalAckTimeoutErr) > 0 }, time.Second)
	if p.b.buf[0] != 'x' {
		t.Fatalf("the WRITE to the removed address was executed: %q", p.b.buf[0])
	}
	link.set(addrB)
	if added, _ := p.b.dev.FollowAddrs(); len(added) != 1 || added[0].Index != 1 {
		t.Fatalf("added %v", added)
	}
	checkWC(t, p.waitWCs(p.a, 1, 10*time.Second)[0], 2, transport.WC_SUCCESS, transport.WC_RDMA_WRITE, 1)
	if p.b.buf[0] != 'y' {
		t.Errorf("the retried WRITE left %q", p.b.buf[0])
	}

	// A QP whose source address went sends nothing: its next WQE completes with
	// IBV_WC_LOC_QP_OP_ERR and the QP goes to the error state, as rxe's cannot
	// route from it.
	link.set()
	p.b.dev.FollowAddrs()
	sent := p.b.dev.Counters().Get(transport.CntSentPkts)
	_, err := p.b.qp.PostSend(transport.SendWR{WRID: 3, Opcode: transport.WR_RDMA_WRITE, SGList: sge(p.b, 0, 1),
		RemoteAddr: p.a.mr.Addr(), RKey: p.a.mr.RKey(), Flags: transport.SendSignaled})
	must(t, err)
	checkWC(t, p.waitWCs(p.b, 1, time.Second)[0], 3, transport.WC_LOC_QP_OP_ERR, transport.WC_RDMA_WRITE, 0)
	if st := p.b.qp.State(); st != transport.QPS_ERR {
		t.Errorf("QP state %v, want ERR", st)
	}
	if n := p.b.dev.Counters().Get(transport.CntSentPkts); n != sent {
		t.Errorf("%d frames sent from the removed address", n-sent)
	}
}

// TestRemovedSourceAddressInFlight: a WRITE is on its way when its QP's source
// address leaves the interface. Its ACK, sent to the removed address, is dropped
// (rcvd_bad_dgid), and when the local ACK timeout sends it again the QP cannot
// route from the address: the WRITE completes with IBV_WC_LOC_QP_OP_ERR and the
// QP goes to the error state, as rdma_rxe's requester fails that transmission
// (rxe_req.c), not with the retry-exceeded status a trial saw after the retries.
func TestRemovedSourceAddressInFlight(t *testing.T) {
	p, link := movingPair(t)
	_, err := p.b.qp.PostSend(transport.SendWR{WRID: 1, Opcode: transport.WR_RDMA_WRITE, SGList: sge(p.b, 0, 1),
		RemoteAddr: p.a.mr.Addr(), RKey: p.a.mr.RKey(), Flags: transport.SendSignaled})
	must(t, err)
	progress(t, p.b.dev) // the WRITE leaves
	if n := p.b.dev.Counters().Get(transport.CntSentPkts); n != 1 {
		t.Fatalf("%d frames sent, want the WRITE", n)
	}
	link.set()
	p.b.dev.FollowAddrs()
	checkWC(t, p.waitWCs(p.b, 1, 10*time.Second)[0], 1, transport.WC_LOC_QP_OP_ERR, transport.WC_RDMA_WRITE, 0)
	if st := p.b.qp.State(); st != transport.QPS_ERR {
		t.Errorf("QP state %v, want ERR", st)
	}
	if n := p.b.dev.Counters().Get(transport.CntSentPkts); n != 1 {
		t.Errorf("%d frames sent, want only the first WRITE: none from the removed address", n)
	}
}
