package rdmacm_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/transport/rdmacm"
)

// TestRejectUnknownPort: a REQ for a port nobody listens on gets a REJ with reason
// Invalid Service ID (IBTA Vol 1 §12.6.7, Table 108 reason 8); Dial says so at once.
func TestRejectUnknownPort(t *testing.T) {
	a, b, _, _ := newPair(t, pairConfig{})
	start := time.Now()
	_, err := a.svc.Dial(ctx5(t), a.newQP(t), netip.AddrPortFrom(ipB, 7471), rdmacm.Param{}, rdmacm.DialOptions{})
	var rej *rdmacm.RejectError
	if !errors.As(err, &rej) || !errors.Is(err, rdmacm.ErrRejected) || rej.Reason != cm.RejInvalidServiceID ||
		!strings.Contains(err.Error(), "nothing listens on port 7471") {
		t.Fatalf("Dial: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the REJ took %v", d)
	}
	_, ms, _ := b.tap.cmSent(t)
	if r, ok := ms[0].(*cm.REJ); len(ms) != 1 || !ok || r.MessageRejected != cm.RefREQ || r.LocalCommID != 0 {
		t.Errorf("server sent %+v", ms)
	}
	if conns, ports := a.svc.Conns(); conns != 0 || ports != 0 {
		t.Errorf("client holds %d connections, %d ports", conns, ports)
	}
}

// TestConsumerReject: rdma_reject's REJ (reason 28, Consumer Reject) reaches the
// client with its private data.
func TestConsumerReject(t *testing.T) {
	a, b, _, _ := newPair(t, pairConfig{})
	l, err := b.svc.Listen(5000, 0)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		if r, err := l.Accept(ctx5(t)); err == nil {
			r.Reject([]byte("busy"))
		}
	}()
	_, err = a.svc.Dial(ctx5(t), a.newQP(t), netip.AddrPortFrom(ipB, 5000), rdmacm.Param{}, rdmacm.DialOptions{})
	var rej *rdmacm.RejectError
	if !errors.As(err, &rej) || rej.Reason != cm.RejConsumerReject || string(rej.PrivateData[:4]) != "busy" ||
		len(rej.PrivateData) != cm.REJPrivateDataLen {
		t.Fatalf("Dial: %v", err)
	}
}

// TestLostMessages: a lost REQ, REP or RTU is recovered by the CM's retransmission
// (§12.9.5 timeouts; a duplicate REQ gets the same REP, a duplicate REP the same
// RTU) and the connection carries data. A lost REP is recovered by whichever timer
// fires first: the server's REP retransmission, or the client's REQ retransmission,
// which the server answers with the same REP (a duplicate, not a retransmission; it
// happened under load).
func TestLostMessages(t *testing.T) {
	for _, tc := range []struct {
		name        string
		toA, toB    []uint64
		wantRetrans uint64 // Retransmits on the side that lost
		client      bool   // the client retransmits
		orDuplicate bool   // or the side that lost answered a duplicate instead
	}{
		{"REQ", nil, []uint64{1}, 1, true, false},
		{"REP", []uint64{1}, nil, 1, false, true},
		{"RTU", nil, []uint64{2}, 1, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, _, _ := newPair(t, pairConfig{opts: fastCM, faultsA: transport.Faults{Drop: tc.toA}, toB: transport.Faults{Drop: tc.toB}})
			c := connect(t, a, b, 18515, rdmacm.Param{RetryCount: 7, RNRRetryCount: 7}, rdmacm.Param{})
			sendPing(t, a, b, c)
			st := b.svc.Stats()
			if tc.client {
				st = a.svc.Stats()
			}
			if st.Retransmits != tc.wantRetrans && !(tc.orDuplicate && st.Retransmits == 0 && st.Stats.Duplicates == 1) {
				t.Errorf("retransmits %+v, want %d", st, tc.wantRetrans)
			}
		})
	}
}

// sendPing sends 4 bytes from the client to the server over c.
func sendPing(t *testing.T, a, b *node, c connected) {
	t.Helper()
	copy(a.buf[:4], "ping")
	if _, err := c.server.QP().PostRecv(transport.RecvWR{WRID: 7, SGList: b.sge(100, 64)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.client.QP().PostSend(transport.SendWR{WRID: 1, Opcode: transport.WR_SEND, SGList: a.sge(0, 4), Flags: transport.SendSignaled}); err != nil {
		t.Fatal(err)
	}
	if wc := b.wc(t); wc.Status != transport.WC_SUCCESS || wc.ByteLen != 4 || string(b.buf[100:104]) != "ping" {
		t.Fatalf("server receive %+v %q", wc, b.buf[100:104])
	}
	if wc := a.wc(t); wc.Status != transport.WC_SUCCESS {
		t.Fatalf("client send %+v", wc)
	}
}

// TestUnreachable: a peer that never answers ends Dial with ErrUnreachable after
// Max CM Retries, and the client's REJ (reason Timeout) withdraws the REQ.
func TestUnreachable(t *testing.T) {
	a, _, _, endB := newPair(t, pairConfig{opts: fastCM})
	endB.SetCut(true)
	start := time.Now()
	_, err := a.svc.Dial(ctx5(t), a.newQP(t), netip.AddrPortFrom(ipB, 18515), rdmacm.Param{}, rdmacm.DialOptions{})
	if !errors.Is(err, rdmacm.ErrUnreachable) || !strings.Contains(err.Error(), "did not answer our REQ through 3 retries") {
		t.Fatalf("Dial: %v", err)
	}
	ms := waitMADs(t, a.tap, 5)
	if len(ms) != 5 {
		t.Fatalf("client sent %d MADs, want 4 REQs and a REJ", len(ms))
	}
	if r, ok := ms[4].(*cm.REJ); !ok || r.Reason != cm.RejTimeout {
		t.Errorf("last MAD %+v", ms[4])
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestUnreachableByICMP: Unreachable (what the daemon calls when ICMP errors
// answer the REQs) ends a dial to that address at once with its error, withdraws
// the REQ (REJ Timeout) and frees the port; a dial to another address goes on.
func TestUnreachableByICMP(t *testing.T) {
	a, _, _, endB := newPair(t, pairConfig{})
	endB.SetCut(true)
	type res struct{ err error }
	ch := make(chan res, 1)
	go func() {
		_, err := a.svc.Dial(ctx5(t), a.newQP(t), netip.AddrPortFrom(ipB, 18515), rdmacm.Param{}, rdmacm.DialOptions{})
		ch <- res{err}
	}()
	waitMADs(t, a.tap, 1) // the REQ is out
	if n := a.svc.Unreachable(netip.MustParseAddr("10.99.0.1"), rdmacm.ErrUnreachable); n != 0 {
		t.Errorf("Unreachable of another address ended %d dials", n)
	}
	why := fmt.Errorf("ICMP port unreachable from %v: %w", ipB, rdmacm.ErrUnreachable)
	if n := a.svc.Unreachable(ipB, why); n != 1 {
		t.Fatalf("Unreachable ended %d dials, want 1", n)
	}
	select {
	case r := <-ch:
		if r.err != why {
			t.Errorf("Dial: %v, want the error given to Unreachable", r.err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Dial still waiting 2 s after Unreachable")
	}
	ms := waitMADs(t, a.tap, 2)
	if r, ok := ms[len(ms)-1].(*cm.REJ); !ok || r.Reason != cm.RejTimeout {
		t.Errorf("MADs %+v", ms)
	}
	if conns, ports := a.svc.Conns(); conns != 0 || ports != 0 {
		t.Errorf("client holds %d connections, %d ports", conns, ports)
	}
}

// TestDialCancelled: ctx ending during Dial withdraws the REQ with a REJ (reason
// Timeout, as ib_destroy_cm_id in REQ Sent) and frees the port.
func TestDialCancelled(t *testing.T) {
	a, _, _, endB := newPair(t, pairConfig{})
	endB.SetCut(true)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := a.svc.Dial(ctx, a.newQP(t), netip.AddrPortFrom(ipB, 18515), rdmacm.Param{}, rdmacm.DialOptions{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial: %v", err)
	}
	ms := waitMADs(t, a.tap, 2)
	if r, ok := ms[len(ms)-1].(*cm.REJ); !ok || r.Reason != cm.RejTimeout {
		t.Errorf("MADs %+v", ms)
	}
	if conns, ports := a.svc.Conns(); conns != 0 || ports != 0 {
		t.Errorf("client holds %d connections, %d ports", conns, ports)
	}
}

// TestBadParams: parameters librdmacm refuses are refused before anything is sent.
func TestBadParams(t *testing.T) {
	a, _, _, _ := newPair(t, pairConfig{})
	dst := netip.AddrPortFrom(ipB, 1)
	for _, p := range []rdmacm.Param{
		{PrivateData: make([]byte, rdmacm.MaxREQPrivateData+1)},
		{ResponderResources: 129},
		{InitiatorDepth: 200},
	} {
		if _, err := a.svc.Dial(ctx5(t), a.newQP(t), dst, p, rdmacm.DialOptions{}); !errors.Is(err, rdmacm.ErrParam) {
			t.Errorf("Dial %+v: %v", p, err)
		}
	}
	if _, err := a.svc.Dial(ctx5(t), a.newQP(t), dst, rdmacm.Param{}, rdmacm.DialOptions{Src: netip.MustParseAddr("10.1.1.1")}); !errors.Is(err, rdmacm.ErrAddress) {
		t.Errorf("Dial from a foreign address: %v", err)
	}
	if _, ms, _ := a.tap.cmSent(t); len(ms) != 0 {
		t.Errorf("sent %d MADs", len(ms))
	}
	if _, err := a.svc.Listen(9, 0); err != nil {
		t.Fatal(err)
	}
	_, err := a.svc.Listen(9, 0)
	if want := "rdmacm: port 9 is already listened on for every address of this device (rdma_cm refuses a second such listener too): stop that one, or choose another port"; !errors.Is(err, rdmacm.ErrPortShared) || err.Error() != want {
		t.Errorf("second Listen: %v, want ErrPortShared and %q", err, want)
	}
}

// waitMADs waits up to 2 s for n CM MADs to have left through tp (the engine sends
// after the call that posted them returns) and returns those sent.
func waitMADs(t *testing.T, tp *tap, n int) []cm.Message {
	t.Helper()
	end := time.Now().Add(2 * time.Second)
	for {
		_, ms, _ := tp.cmSent(t)
		if len(ms) >= n || time.Now().After(end) {
			return ms
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSlowAccept (MRA): a consumer that takes longer to accept than the client's
// REQ retries last (3 × about 25 ms with fastCM) still connects. As rdma_cm
// (CMA_CM_MRA_SETTING), the server's CM answers the client's second REQ with an MRA
// for the REQ with service timeout 24 (69 s), the client then waits instead of
// giving up, and the REP comes when the consumer accepts. The MRA is sent once, for
// the duplicate REQ only: a consumer that answers in time sends none.
func TestSlowAccept(t *testing.T) {
	a, b, _, _ := newPair(t, pairConfig{opts: fastCM})
	l, err := b.svc.Listen(18515, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	qa, qb := a.newQP(t), b.newQP(t)
	ch := dialAsync(t, a, qa, 18515, rdmacm.Param{RetryCount: 7, RNRRetryCount: 7})
	req, err := l.Accept(ctx5(t))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // past the client's REQ retries without an MRA
	sc, err := req.Accept(qb, rdmacm.Param{})
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatalf("Dial: %v", r.err)
	}
	if err := sc.WaitEstablished(ctx5(t)); err != nil {
		t.Fatal(err)
	}
	sendPing(t, a, b, connected{client: r.c, server: sc, req: req})
	count := func(n *node) (reqs, mras, reps int, mra *cm.MRA) {
		_, ms, _ := n.tap.cmSent(t)
		for _, m := range ms {
			switch m := m.(type) {
			case *cm.REQ:
				reqs++
			case *cm.MRA:
				mras++
				mra = m
			case *cm.REP:
				reps++
			}
		}
		return
	}
	reqs, _, _, _ := count(a)
	_, mras, reps, mra := count(b)
	if reqs != 2 || mras != 1 || reps != 1 {
		t.Fatalf("client sent %d REQs, server %d MRAs and %d REPs; want 2, 1, 1", reqs, mras, reps)
	}
	if mra.MessageMRAed != cm.RefREQ || mra.ServiceTimeout != 24 {
		t.Errorf("MRA %+v: want the REQ MRAed, service timeout 24", mra)
	}
	if st := a.svc.Stats(); st.Retransmits != 1 {
		t.Errorf("client retransmits %d, want 1 (the REQ the MRA answered)", st.Retransmits)
	}
}
