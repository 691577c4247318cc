package transport_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/xroce/xroce/transport"
)

// TestSRQ: two QPs of B take their receives from one SRQ. SENDs from two QPs of A
// land in the SRQ's WQEs in posting order, each completion naming the QP that
// took it; the armed limit raises IBV_EVENT_SRQ_LIMIT_REACHED once, when fewer
// WQEs than it remain, and disarms; an empty SRQ answers RNR NAK until a receive
// is posted; a QP with an SRQ refuses its own receives; the SRQ cannot go while a
// QP uses it.
func TestSRQ(t *testing.T) {
	p, srq, a2, b1, b2 := newSRQPair(t, pairConfig{rnrRetry: 7, minRNRTimer: 1}, transport.Faults{}, 8)

	if _, err := b1.qp.PostRecv(transport.RecvWR{WRID: 1, SGList: sge(p.b, 0, 8)}); !errors.Is(err, transport.ErrHasSRQ) {
		t.Errorf("PostRecv on a QP with an SRQ: %v, want ErrHasSRQ", err)
	}
	for i := range 4 {
		if _, err := srq.PostRecv(transport.RecvWR{WRID: uint64(10 + i), SGList: sge(b1, 1024*i, 1024)}); err != nil {
			t.Fatal(err)
		}
	}
	must(t, srq.Modify(transport.SRQAttr{Limit: 2}, transport.SRQ_LIMIT))
	if a := srq.Query(); a != (transport.SRQAttr{MaxWR: 8, MaxSGE: 1, Limit: 2}) {
		t.Errorf("Query: %+v", a)
	}
	send := func(from *side, wrid uint64, n int, seed uint64) {
		fill(from.buf[:n], seed)
		must(t, postSend(from, transport.SendWR{WRID: wrid, Opcode: transport.WR_SEND, SGList: sge(from, 0, n), Flags: transport.SendSignaled}))
	}
	// Three SENDs: A's QP, then A2's, then A's again take WQEs 10, 11 and 12.
	for i, s := range []struct {
		from *side
		to   *side
		n    int
	}{{p.a, b1, 100}, {a2, b2, 200}, {p.a, b1, 300}} {
		send(s.from, uint64(i), s.n, uint64(i))
		p.run(func() bool { return len(b1.wcs) > 0 }, time.Second)
		wc := b1.wcs[0]
		b1.wcs = nil
		if wc.WRID != uint64(10+i) || wc.QPN != s.to.qp.QPN() || wc.Status != transport.WC_SUCCESS || wc.ByteLen != uint32(s.n) {
			t.Fatalf("SEND %d: completion %+v, want wr_id %d on QP 0x%x, %d bytes", i, wc, 10+i, s.to.qp.QPN(), s.n)
		}
		checkBytes(t, "SEND", b1.buf[1024*i:1024*i+s.n], s.from.buf[:s.n])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	ev, err := p.b.dev.GetAsyncEvent(ctx)
	cancel()
	if err != nil || ev.Type != transport.EVENT_SRQ_LIMIT_REACHED || ev.SRQ != srq {
		t.Errorf("event %+v, %v; want IBV_EVENT_SRQ_LIMIT_REACHED of the SRQ", ev, err)
	}
	if a := srq.Query(); a.Limit != 0 {
		t.Errorf("limit %d after its event, want 0 (disarmed)", a.Limit)
	}

	// WQE 13 goes to A2's SEND; the next SEND finds the SRQ empty (RNR NAK) until
	// WQE 14 is posted.
	send(a2, 3, 64, 3)
	p.run(func() bool { return len(b1.wcs) > 0 }, time.Second)
	b1.wcs = nil
	send(p.a, 4, 64, 4)
	p.run(func() bool { return b1.qp.Counters().Get(transport.CntSendRNRErr) > 0 }, time.Second)
	if _, err := srq.PostRecv(transport.RecvWR{WRID: 14, SGList: sge(b1, 4096, 64)}); err != nil {
		t.Fatal(err)
	}
	p.run(func() bool { return len(b1.wcs) > 0 }, time.Second)
	if wc := b1.wcs[0]; wc.WRID != 14 || wc.QPN != b1.qp.QPN() || wc.Status != transport.WC_SUCCESS {
		t.Errorf("after the RNR NAK: completion %+v", wc)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Millisecond)
	if ev, err := p.b.dev.GetAsyncEvent(ctx); err == nil {
		t.Errorf("a second event %+v: the limit was disarmed", ev)
	}
	cancel()

	if err := srq.Destroy(); !errors.Is(err, transport.ErrSRQBusy) {
		t.Errorf("Destroy with QPs: %v, want ErrSRQBusy", err)
	}
	must(t, b1.qp.Destroy())
	must(t, b2.qp.Destroy())
	must(t, srq.Destroy())
	if _, err := srq.PostRecv(transport.RecvWR{WRID: 15}); !errors.Is(err, transport.ErrQPState) {
		t.Errorf("PostRecv after Destroy: %v", err)
	}
}

// newSRQPair is two devices joined by a Pipe (faultsB on the frames towards B):
// A's QP (p.a) connected to b1 and A's second QP a2 to b2, b1 and b2 receiving
// from one SRQ of maxWR WQEs on B; p.b is b1, through which collect and waitWCs
// read B's shared CQ.
func newSRQPair(t *testing.T, cfg pairConfig, faultsB transport.Faults, maxWR int) (p *pair, srq *transport.SharedReceiveQueue, a2, b1, b2 *side) {
	t.Helper()
	c := defaults(cfg)
	ea, eb := transport.NewPipe(transport.PipeConfig{MAC: macA, Addrs: []netip.Addr{addrA}},
		transport.PipeConfig{MAC: macB, Addrs: []netip.Addr{addrB}, Faults: faultsB})
	p = &pair{t: t, clock: transport.NewFakeClock()}
	p.a, p.b = p.newSide(ea, c, 1<<10), p.newSide(eb, c, 1<<10)
	srq, err := p.b.pd.CreateSRQ(transport.SRQAttr{MaxWR: maxWR, MaxSGE: 1})
	must(t, err)
	b1, b2 = p.srqSide(p.b, srq), p.srqSide(p.b, srq)
	a2 = p.secondSide(p.a, c)
	p.connect(p.a, b1, c, 0, 0)
	p.connect(b1, p.a, c, 0, 0)
	p.connect(a2, b2, c, 0, 0)
	p.connect(b2, a2, c, 0, 0)
	p.b = b1
	return p, srq, a2, b1, b2
}

// srqSide is a QP on s's device and PD, with s's buffer and CQ, receiving from srq.
func (p *pair) srqSide(s *side, srq *transport.SharedReceiveQueue) *side {
	p.t.Helper()
	o := *s
	var err error
	o.qp, err = s.pd.CreateQP(transport.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq, SRQ: srq,
		Cap: transport.QPCap{MaxSendWR: 64, MaxSendSGE: 1}})
	must(p.t, err)
	return &o
}

// TestSRQWQEBackAtDestroy: a QP that took the SRQ's only WQE for a SEND whose
// later packets never came gives it back when it is destroyed: another QP's SEND
// then completes into it, and nothing was completed for the first.
func TestSRQWQEBackAtDestroy(t *testing.T) {
	p, srq, a2, b1, b2 := newSRQPair(t, pairConfig{rnrRetry: 1, minRNRTimer: 1}, transport.Faults{Drop: []uint64{2, 3}}, 4)
	if _, err := srq.PostRecv(transport.RecvWR{WRID: 7, SGList: sge(b1, 0, 4096)}); err != nil {
		t.Fatal(err)
	}
	// A 3000-byte SEND: its first packet takes WQE 7 for b1, the next two are lost.
	must(t, postSend(p.a, transport.SendWR{WRID: 1, Opcode: transport.WR_SEND, SGList: sge(p.a, 0, 3000)}))
	p.run(func() bool { return b1.qp.Counters().Get(transport.CntRcvdPkts) >= 1 }, time.Second)
	must(t, b1.qp.Destroy())
	fill(a2.buf[:100], 9)
	must(t, postSend(a2, transport.SendWR{WRID: 2, Opcode: transport.WR_SEND, SGList: sge(a2, 0, 100), Flags: transport.SendSignaled}))
	p.run(func() bool { return len(b1.wcs) > 0 }, time.Second)
	if wc := b1.wcs[0]; wc.WRID != 7 || wc.QPN != b2.qp.QPN() || wc.Status != transport.WC_SUCCESS || wc.ByteLen != 100 || len(b1.wcs) != 1 {
		t.Errorf("completions %+v: want one, WQE 7 on QP 0x%x with 100 bytes", b1.wcs, b2.qp.QPN())
	}
	checkBytes(t, "SEND", b1.buf[:100], a2.buf[:100])
}
