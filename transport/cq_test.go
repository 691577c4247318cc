package transport_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/xroce/xroce/transport"
)

// TestCQOverrun: B's receive CQ holds 4 completions and nobody polls it while A sends
// 6 SENDs. The 5th completion finds it full: the CQ enters error
// (IBV_EVENT_CQ_ERR), B's QP moves to ERR (IBV_EVENT_QP_FATAL) without
// acknowledging the 5th SEND, the 4 queued completions can still be polled, and
// Wait reports the overrun instead of waiting. A, unanswered, runs out of retries.
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
	ev, err = b.dev.GetAsyncEvent(ctx)
	if err != nil || ev.Type != transport.EVENT_QP_FATAL || ev.QPN != b.qp.QPN() {
		t.Errorf("second event %v %v, want IBV_EVENT_QP_FATAL for QP 0x%x", ev, err, b.qp.QPN())
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

// TestCountersString: the non-zero counters, by rdma_rxe's names, in table order.
func TestCountersString(t *testing.T) {
	p := newPair(t, pairConfig{})
	if s := p.a.qp.Counters().String(); s != "none" {
		t.Errorf("fresh QP: %q", s)
	}
	must(t, postRecv(p.b, 1, 0, 64))
	must(t, postSend(p.a, transport.SendWR{WRID: 1, Opcode: transport.WR_SEND, SGList: sge(p.a, 0, 64), Flags: transport.SendSignaled}))
	p.waitWCs(p.a, 1, time.Second)
	if s, want := p.a.qp.Counters().String(), "sent_pkts=1 rcvd_pkts=1"; s != want {
		t.Errorf("after one SEND: %q, want %q", s, want)
	}
}
