package transport_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/xroce/xroce/transport"
)

// TestCQOverrun: B's receive CQ holds 4 completions and nobody polls it while A sends
// 6 SENDs. The 5th completion finds it full and is lost (IBV_EVENT_CQ_ERR); B's QP
// moves to ERR without acknowledging the 5th SEND and with no event of its own
// (rdma_rxe's responder: RESPST_ERR_CQ_OVERFLOW, rxe_qp_error); the 4 queued
// completions can be polled, Wait reports the overrun instead of waiting, and the
// CQ takes completions again once polled: B's QP's flushed receive, the 6th. A,
// unanswered, runs out of retries.
func TestCQOverrun(t *testing.T) {
	p := newPair(t, pairConfig{cqDepthB: 4, timeout: 10, retryCnt: 2})
	a, b := p.a, p.b
	for i := range 6 {
		must(t, postRecv(b, uint64(100+i), i*64, 64))
	}
	for i := range 6 {
		must(t, postSend(a, transport.SendWR{WRID: uint64(i), Opcode: transport.WR_SEND, SGList: sge(a, i*64, 64)}))
	}
	// Drive both engines without polling B's CQ (p.run would poll it).
	for i := 0; a.qp.State() != transport.QPS_ERR; i++ {
		if i > 100000 {
			t.Fatalf("A's QP still %v; A: %v B: %v", a.qp.State(), a.counters(), b.counters())
		}
		busyA, busyB := progress(t, a.dev), progress(t, b.dev)
		if busyA || busyB {
			p.clock.Advance(time.Microsecond)
		} else if next := earliest(a.dev.NextDeadline(), b.dev.NextDeadline()); !next.IsZero() {
			p.clock.Set(next)
		}
	}

	var wcs [8]transport.WorkCompletion
	n := b.cq.Poll(wcs[:])
	if n != 4 {
		t.Fatalf("B polled %d completions, want the 4 queued before the overrun", n)
	}
	for i, wc := range wcs[:n] {
		checkWC(t, wc, uint64(100+i), transport.WC_SUCCESS, transport.WC_RECV, 64)
	}
	if err := b.cq.Err(); !errors.Is(err, transport.ErrCQOverrun) {
		t.Errorf("B's CQ error %v, want ErrCQOverrun", err)
	}
	if err := b.cq.Wait(context.Background()); !errors.Is(err, transport.ErrCQOverrun) {
		t.Errorf("Wait on the overrun CQ: %v", err)
	}
	if s := b.qp.State(); s != transport.QPS_ERR {
		t.Errorf("B's QP %v, want IBV_QPS_ERR", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	ev, err := b.dev.GetAsyncEvent(ctx)
	if err != nil || ev.Type != transport.EVENT_CQ_ERR || ev.CQ != b.cq {
		t.Errorf("first event %v %v, want IBV_EVENT_CQ_ERR on B's CQ", ev, err)
	}
	// The 6th receive's flush found the CQ full too: a second IBV_EVENT_CQ_ERR, as
	// rxe_cq_post raises one at every completion it loses; nothing else.
	ev, err = b.dev.GetAsyncEvent(ctx)
	if err != nil || ev.Type != transport.EVENT_CQ_ERR || ev.CQ != b.cq {
		t.Errorf("second event %v %v, want IBV_EVENT_CQ_ERR on B's CQ", ev, err)
	}
	short, cancelShort := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancelShort()
	if ev, err := b.dev.GetAsyncEvent(short); err == nil {
		t.Errorf("a third event %+v", ev)
	}
	// Polled, the CQ takes completions again: a receive posted to the QP in ERR is
	// flushed into it.
	must(t, postRecv(b, 200, 0, 64))
	progress(t, b.dev)
	if n := b.cq.Poll(wcs[:]); n != 1 {
		t.Errorf("after the overrun B polled %d completions, want the flushed receive", n)
	} else {
		checkWC(t, wcs[0], 200, transport.WC_WR_FLUSH_ERR, transport.WC_RECV, -1)
	}
	// A: the first 4 SENDs were acknowledged (unsignaled: no completion); the 5th
	// never was and exhausted retry_cnt; the 6th is flushed.
	got := wcs[:a.cq.Poll(wcs[:])]
	if len(got) != 2 {
		t.Fatalf("A's completions %+v, want 2", got)
	}
	checkWC(t, got[0], 4, transport.WC_RETRY_EXC_ERR, transport.WC_SEND, -1)
	checkWC(t, got[1], 5, transport.WC_WR_FLUSH_ERR, transport.WC_SEND, -1)
}

// TestCQOverrunSendSide: B's CQ holds 2 completions and nobody polls it while B
// completes 4 signaled WRITEs: the 3rd and 4th completions are lost, each with
// IBV_EVENT_CQ_ERR, and B's QP stays in RTS, as rdma_rxe's requester ignores the
// failed post (rxe_comp.c do_complete): once polled, the CQ takes the 5th WRITE's
// completion. A trial found xroce's QP moved to ERR with IBV_EVENT_QP_FATAL.
func TestCQOverrunSendSide(t *testing.T) {
	p := newPair(t, pairConfig{cqDepthB: 2})
	a, b := p.a, p.b
	write := func(id uint64) transport.SendWR {
		return transport.SendWR{WRID: id, Opcode: transport.WR_RDMA_WRITE, SGList: sge(b, 0, 64), Flags: transport.SendSignaled,
			RemoteAddr: a.mr.Addr(), RKey: a.mr.RKey()}
	}
	must(t, postSend(b, write(0), write(1), write(2), write(3)))
	for i := 0; b.cq.Err() == nil; i++ { // the ACKs come (one may cover all four)
		if i > 100000 {
			t.Fatalf("B: %v, CQ %v", b.counters(), b.cq.Err())
		}
		progress(t, a.dev)
		progress(t, b.dev)
		p.clock.Advance(time.Microsecond)
	}
	for range 10 {
		progress(t, a.dev)
		progress(t, b.dev)
		p.clock.Advance(time.Microsecond)
	}
	if s := b.qp.State(); s != transport.QPS_RTS {
		t.Errorf("B's QP %v after losing send completions, want IBV_QPS_RTS", s)
	}
	var wcs [8]transport.WorkCompletion
	got := wcs[:b.cq.Poll(wcs[:])]
	if len(got) != 2 {
		t.Fatalf("B polled %+v, want the 2 completions the CQ held", got)
	}
	for i, wc := range got {
		checkWC(t, wc, uint64(i), transport.WC_SUCCESS, transport.WC_RDMA_WRITE, 64)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	for i := range 3 {
		ev, err := b.dev.GetAsyncEvent(ctx)
		if i < 2 && (err != nil || ev.Type != transport.EVENT_CQ_ERR || ev.CQ != b.cq) {
			t.Errorf("event %d: %+v %v, want IBV_EVENT_CQ_ERR on B's CQ", i, ev, err)
		}
		if i == 2 && err == nil {
			t.Errorf("a third event %+v", ev)
		}
	}
	must(t, postSend(b, write(4)))
	checkWC(t, p.waitWCs(b, 1, time.Second)[0], 4, transport.WC_SUCCESS, transport.WC_RDMA_WRITE, 64)
}

// TestCountersString: the non-zero counters, by rdma_rxe's names, in table order.
func TestCountersString(t *testing.T) {
	p := newPair(t, pairConfig{})
	if s := p.a.qp.Counters().String(); s != "none" {
		t.Errorf("fresh QP: %q", s)
	}
	must(t, postRecv(p.b, 1, 0, 64))
	must(t, postSend(p.a, transport.SendWR{WRID: 1, Opcode: transport.WR_SEND, SGList: sge(p.a, 0, 64), Flags: transport.SendSignaled}))
	p.waitWCs(p.a, 1, time.Second)
	if s, want := p.a.qp.Counters().String(), "sent_pkts=1 rcvd_pkts=1 rdma_sends=1"; s != want {
		t.Errorf("after one SEND: %q, want %q", s, want)
	}
}

// TestSQDrained: a QP moved from RTS to SQD raises IBV_EVENT_SQ_DRAINED once, when
// the requests it had sent are all acknowledged, as rdma_rxe does (rxe_comp.c
// complete_ack); a WR posted in SQD waits, and goes out once the QP is back in RTS.
// A QP with nothing outstanding raises it at the transition. A trial found no
// event at all.
func TestSQDrained(t *testing.T) {
	p := newPair(t, pairConfig{})
	a := p.a
	event := func(limit time.Duration) (transport.AsyncEvent, error) {
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		defer cancel()
		return a.dev.GetAsyncEvent(ctx)
	}
	write := func(id uint64) transport.SendWR {
		return transport.SendWR{WRID: id, Opcode: transport.WR_RDMA_WRITE, SGList: sge(a, 0, 8192), Flags: transport.SendSignaled,
			RemoteAddr: p.b.mr.Addr(), RKey: p.b.mr.RKey()}
	}
	must(t, postSend(a, write(1), write(2), write(3)))
	progress(t, a.dev) // the WRITEs go out; their ACKs have not come
	if a.qp.Counters().Get(transport.CntSentPkts) != 24 {
		t.Fatalf("sent %d packets before SQD, want 24", a.qp.Counters().Get(transport.CntSentPkts))
	}
	must(t, a.qp.Modify(transport.QPAttr{State: transport.QPS_SQD}, transport.QP_STATE))
	if ev, err := event(10 * time.Millisecond); err == nil {
		t.Fatalf("event %+v with requests outstanding", ev)
	}
	must(t, postSend(a, write(4)))
	wcs := p.waitWCs(a, 3, time.Second)
	for i, wc := range wcs {
		checkWC(t, wc, uint64(i+1), transport.WC_SUCCESS, transport.WC_RDMA_WRITE, 8192)
	}
	if ev, err := event(100 * time.Millisecond); err != nil || ev.Type != transport.EVENT_SQ_DRAINED || ev.QPN != a.qp.QPN() {
		t.Fatalf("event %+v, %v; want IBV_EVENT_SQ_DRAINED of QP 0x%x", ev, err, a.qp.QPN())
	}
	for range 10 { // passes in which WR 4 could go out
		progress(t, a.dev)
		progress(t, p.b.dev)
		p.clock.Advance(time.Microsecond)
	}
	if ev, err := event(10 * time.Millisecond); err == nil {
		t.Fatalf("a second event %+v", ev)
	}
	if n := a.qp.Counters().Get(transport.CntSentPkts); n != 24 {
		t.Fatalf("sent %d packets in SQD, want 24: WR 4 must wait", n)
	}
	must(t, a.qp.Modify(transport.QPAttr{State: transport.QPS_RTS}, transport.QP_STATE))
	checkWC(t, p.waitWCs(a, 1, time.Second)[0], 4, transport.WC_SUCCESS, transport.WC_RDMA_WRITE, 8192)
	// Idle: the event comes with the transition.
	must(t, a.qp.Modify(transport.QPAttr{State: transport.QPS_SQD}, transport.QP_STATE))
	if ev, err := event(100 * time.Millisecond); err != nil || ev.Type != transport.EVENT_SQ_DRAINED || ev.QPN != a.qp.QPN() {
		t.Fatalf("idle QP: event %+v, %v; want IBV_EVENT_SQ_DRAINED", ev, err)
	}
}
