package transport_test

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// TestWindowInOneSend: what one QP may send, its whole PSN window
// (MaxUnackedPSN, 128 packets), leaves in one engine pass and one link Send, which
// on AF_XDP is one sendto; the packets past the window wait for ACKs. 200 RDMA
// WRITEs of 64 B are posted before the pass: the pass sends PSNs 0-127 in one Send
// of 128 frames. B acknowledges each batch it receives (64 frames), so the other
// 72 leave as 64 and 8, in PSN order.
func TestWindowInOneSend(t *testing.T) {
	c := defaults(pairConfig{})
	ea, eb := transport.NewPipe(transport.PipeConfig{MAC: macA, Addrs: []netip.Addr{addrA}},
		transport.PipeConfig{MAC: macB, Addrs: []netip.Addr{addrB}})
	tap := &tapLink{PipeEnd: ea}
	p := &pair{t: t, clock: transport.NewFakeClock()}
	p.a = p.newSideOn(ea, tap, c, 1<<10)
	p.b = p.newSide(eb, c, 1<<10)
	p.connect(p.a, p.b, c, 0, 0)
	p.connect(p.b, p.a, c, 0, 0)
	a, b := p.a, p.b
	fill(a.buf, 7)
	const n = 200
	wrs := make([]transport.SendWR, n)
	for i := range wrs {
		wrs[i] = transport.SendWR{WRID: uint64(i), Opcode: transport.WR_RDMA_WRITE, SGList: sge(a, 64*i, 64),
			RemoteAddr: b.mr.Addr() + uint64(64*i), RKey: b.mr.RKey()}
	}
	wrs[n-1].Flags = transport.SendSignaled
	must(t, postSend(a, wrs...))
	progress(t, a.dev)
	if len(tap.sends) != 1 || tap.sends[0] != transport.MaxUnackedPSN {
		t.Fatalf("first pass: Sends of %v frames, want one of %d", tap.sends, transport.MaxUnackedPSN)
	}
	sent := tap.take()
	for i, pkt := range sent {
		if pkt.BTH.PSN != uint32(i) {
			t.Fatalf("frame %d of the first pass has PSN %d", i, pkt.BTH.PSN)
		}
	}
	if got := b.end.Pending(); got != transport.MaxUnackedPSN {
		t.Fatalf("B has %d frames waiting after the first pass, want %d", got, transport.MaxUnackedPSN)
	}
	wcs := p.waitWCs(a, 1, time.Second)
	checkWC(t, wcs[0], n-1, transport.WC_SUCCESS, transport.WC_RDMA_WRITE, 64)
	if got := tap.sends[1:]; !slices.Equal(got, []int{64, 8}) {
		t.Errorf("after the first pass: Sends of %v frames, want 64 and 8", got)
	}
	for i, pkt := range append(sent, tap.take()...) {
		if pkt.BTH.PSN != uint32(i) {
			t.Fatalf("frame %d has PSN %d", i, pkt.BTH.PSN)
		}
	}
	checkBytes(t, "B's buffer", b.buf[:64*n], a.buf[:64*n])
}

// qpRun is n consecutive packets to the QP dqpn.
type qpRun struct {
	dqpn uint32
	n    int
}

// TestReadyRoundRobin: when a pass's budget runs out, the QPs it did not visit go
// first in the next pass. Two UC QPs of A (no PSN window stops them) each post three
// 64 KiB WRITEs, 192 packets at path MTU 1024, the first QP first: the first pass
// sends 128 of the first QP's packets, the second 128 of the second QP's, the third
// the rest of the first's and then of the second's.
func TestReadyRoundRobin(t *testing.T) {
	u := newUPair(t, transport.QPT_UC, upairConfig{})
	a, b := u.a, u.b
	second := func(s *side) *transport.QueuePair {
		qp, err := s.pd.CreateQP(transport.QPInitAttr{Type: transport.QPT_UC, SendCQ: s.cq, RecvCQ: s.cq,
			Cap: transport.QPCap{MaxSendWR: 64, MaxRecvWR: 64}})
		must(t, err)
		return qp
	}
	a2, b2 := second(a), second(b)
	for _, c := range []struct {
		qp   *transport.QueuePair
		dst  netip.Addr
		dqpn uint32
	}{{a2, addrB, b2.QPN()}, {b2, addrA, a2.QPN()}} {
		must(t, transport.BringUp(c.qp, transport.QPS_RESET, transport.QPS_RTS, transport.ConnectParams{Type: transport.QPT_UC,
			Access: transport.AccessRemoteWrite, AH: transport.AddressHandle{DGID: roce.GIDFromAddr(c.dst), SGIDIndex: 1},
			PathMTU: roce.MTU1024, DestQPN: c.dqpn}))
	}
	for _, qp := range []*transport.QueuePair{a.qp, a2} {
		for i := range 3 {
			_, err := qp.PostSend(transport.SendWR{WRID: uint64(i), Opcode: transport.WR_RDMA_WRITE, SGList: sge(a, 0, 1<<16),
				RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()})
			must(t, err)
		}
	}
	first, other := b.qp.QPN(), b2.QPN()
	for pass, want := range [][]qpRun{
		{{first, 128}},
		{{other, 128}},
		{{first, 64}, {other, 64}},
	} {
		progress(t, a.dev)
		var got []qpRun
		for _, p := range u.tapA.take() {
			if k := len(got); k > 0 && got[k-1].dqpn == p.BTH.DestQP {
				got[k-1].n++
			} else {
				got = append(got, qpRun{p.BTH.DestQP, 1})
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("pass %d sent (destination QP, packets) %v, want %v (first 0x%x, other 0x%x)", pass+1, got, want, first, other)
		}
	}
}
