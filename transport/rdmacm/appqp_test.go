package rdmacm_test

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/transport/rdmacm"
)

// modifyWith moves qp through INIT, RTR and RTS with the connection's attributes,
// as rping -q does with rdma_init_qp_attr and ibv_modify_qp.
func modifyWith(t *testing.T, qp *transport.QueuePair, attrs func(transport.QPState) (transport.QPAttr, transport.QPAttrMask, error)) {
	t.Helper()
	for _, st := range []transport.QPState{transport.QPS_INIT, transport.QPS_RTR, transport.QPS_RTS} {
		a, m, err := attrs(st)
		if err != nil {
			t.Fatalf("attributes for %v: %v", st, err)
		}
		if err := qp.Modify(a, m); err != nil {
			t.Fatalf("modify to %v (%v): %v", st, m, err)
		}
	}
}

// TestAppManagedQP: rdma_init_qp_attr and rdma_establish's exchange. The client's
// REQ names a QP the Service never touches; its REP comes as EventConnectResponse
// (no ESTABLISHED, no RTU) with the attributes ib_cm gives; the client moves its QP
// with them and sends the RTU (Establish). The server moves its QP with the
// request's attributes before AcceptQPN, whose REP names that QP and the PSN the
// attributes gave. Data then flows with the negotiated PSNs both ways.
func TestAppManagedQP(t *testing.T) {
	endA, endB := transport.NewPipe(
		transport.PipeConfig{MAC: [6]byte{2, 0, 0, 0, 9, 1}, Addrs: []netip.Addr{ipA}},
		transport.PipeConfig{MAC: [6]byte{2, 0, 0, 0, 9, 2}, Addrs: []netip.Addr{ipB}})
	events := make(chan rdmacm.Event, 8)
	a := openNode(t, endA, rdmacm.Options{OnEvent: func(e rdmacm.Event) { events <- e }})
	b := openNode(t, endB, rdmacm.Options{})
	l, err := b.svc.Listen(7174, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	qa, qb := a.newQP(t), b.newQP(t)

	if _, err := a.svc.ConnectQPN(0, netip.AddrPortFrom(ipB, 7174), rdmacm.Param{}, rdmacm.DialOptions{}); !errors.Is(err, rdmacm.ErrParam) {
		t.Errorf("ConnectQPN(0): %v, want ErrParam", err)
	}
	cp := rdmacm.Param{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}
	ca, err := a.svc.ConnectQPN(qa.QPN(), netip.AddrPortFrom(ipB, 7174), cp, rdmacm.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ca.QPAttrs(transport.QPS_RTR); !errors.Is(err, transport.ErrQPState) {
		t.Errorf("client's RTR attributes before the REP: %v, want ErrQPState", err)
	}
	if a, m, err := ca.QPAttrs(transport.QPS_INIT); err != nil || m != transport.QP_STATE|transport.QP_ACCESS_FLAGS|transport.QP_PKEY_INDEX|transport.QP_PORT ||
		a.AccessFlags != transport.AccessRemoteWrite|transport.AccessRemoteRead|transport.AccessRemoteAtomic {
		t.Errorf("client's INIT attributes before the REP: %+v %v %v", a, m, err)
	}
	req, err := l.Accept(ctx5(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := req.QPAttrs(transport.QPS_SQD); !errors.Is(err, rdmacm.ErrParam) {
		t.Errorf("attributes for SQD: %v, want ErrParam", err)
	}
	modifyWith(t, qb, req.QPAttrs)
	sc, err := req.AcceptQPN(qb.QPN(), rdmacm.Param{ResponderResources: 1, InitiatorDepth: 1, RNRRetryCount: 7})
	if err != nil {
		t.Fatal(err)
	}

	select {
	case e := <-events:
		if e.Type != rdmacm.EventConnectResponse || e.Conn != ca {
			t.Fatalf("client event %v, want CONNECT_RESPONSE", e.Type)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no CONNECT_RESPONSE")
	}
	if ca.QP() != nil || sc.QP() != nil {
		t.Errorf("the connections hold QPs: %v %v", ca.QP(), sc.QP())
	}
	modifyWith(t, qa, ca.QPAttrs)
	if err := ca.Establish(); err != nil {
		t.Fatal(err)
	}
	if err := ca.Establish(); !errors.Is(err, transport.ErrQPState) {
		t.Errorf("second Establish: %v, want ErrQPState", err)
	}
	if err := sc.WaitEstablished(ctx5(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-events:
		t.Errorf("client event %v after Establish: rdma_cm reports none", e.Type)
	case <-time.After(50 * time.Millisecond):
	}

	// The attributes are the exchange's: each side receives from its own
	// message's Starting PSN and sends from the peer's.
	_, ms, _ := a.tap.cmSent(t)
	_, mb, _ := b.tap.cmSent(t)
	if len(ms) != 2 || len(mb) != 1 {
		t.Fatalf("client sent %d CM MADs (want REQ, RTU), server %d (want REP)", len(ms), len(mb))
	}
	reqm, rep := ms[0].(*cm.REQ), mb[0].(*cm.REP)
	if _, ok := ms[1].(*cm.RTU); !ok || reqm.LocalQPN != qa.QPN() || rep.LocalQPN != qb.QPN() {
		t.Fatalf("MADs %T %T: REQ QPN 0x%x (QP 0x%x), REP QPN 0x%x (QP 0x%x)", ms[0], ms[1], reqm.LocalQPN, qa.QPN(), rep.LocalQPN, qb.QPN())
	}
	ar, _, _ := ca.QPAttrs(transport.QPS_RTR)
	as, _, _ := ca.QPAttrs(transport.QPS_RTS)
	br, brm, _ := sc.QPAttrs(transport.QPS_RTR)
	bs, _, _ := sc.QPAttrs(transport.QPS_RTS)
	bi, bim, _ := sc.QPAttrs(transport.QPS_INIT)
	if ar.DestQPN != qb.QPN() || ar.RQPSN != reqm.StartingPSN || as.SQPSN != rep.StartingPSN || ar.PathMTU != roce.MTU1024 ||
		ar.AH.DGID != roce.GIDFromAddr(ipB) || as.Timeout != reqm.Primary.LocalACKTimeout || as.RetryCnt != 7 || as.RNRRetry != 7 {
		t.Errorf("client attributes: RTR %+v, RTS %+v", ar, as)
	}
	if br.DestQPN != qa.QPN() || br.RQPSN != rep.StartingPSN || bs.SQPSN != reqm.StartingPSN || br.MaxDestRdAtomic != 1 ||
		br.MinRNRTimer != 0 || br.AH.DGID != roce.GIDFromAddr(ipA) {
		t.Errorf("server attributes: RTR %+v, RTS %+v", br, bs)
	}
	wantRTR := transport.QP_STATE | transport.QP_AV | transport.QP_PATH_MTU | transport.QP_DEST_QPN | transport.QP_RQ_PSN |
		transport.QP_MAX_DEST_RD_ATOMIC | transport.QP_MIN_RNR_TIMER
	if brm != wantRTR || bim != transport.QP_STATE|transport.QP_ACCESS_FLAGS|transport.QP_PKEY_INDEX|transport.QP_PORT ||
		bi.AccessFlags != transport.AccessRemoteWrite|transport.AccessRemoteRead|transport.AccessRemoteAtomic {
		t.Errorf("masks: RTR %v, INIT %v (access %v)", brm, bim, bi.AccessFlags)
	}

	// Data both ways.
	copy(a.buf[:4], "ping")
	if _, err := qb.PostRecv(transport.RecvWR{WRID: 7, SGList: b.sge(100, 64)}); err != nil {
		t.Fatal(err)
	}
	if _, err := qa.PostSend(transport.SendWR{WRID: 1, Opcode: transport.WR_SEND, SGList: a.sge(0, 4), Flags: transport.SendSignaled}); err != nil {
		t.Fatal(err)
	}
	if wc := b.wc(t); wc.Status != transport.WC_SUCCESS || wc.WRID != 7 || string(b.buf[100:104]) != "ping" {
		t.Errorf("server receive %+v %q", wc, b.buf[100:104])
	}
	if wc := a.wc(t); wc.Status != transport.WC_SUCCESS || wc.WRID != 1 {
		t.Errorf("client send %+v", wc)
	}
	copy(b.buf[200:205], "pong!")
	if _, err := qb.PostSend(transport.SendWR{WRID: 2, Opcode: transport.WR_RDMA_WRITE, SGList: b.sge(200, 5),
		RemoteAddr: a.mr.Addr() + 300, RKey: a.mr.RKey(), Flags: transport.SendSignaled}); err != nil {
		t.Fatal(err)
	}
	if wc := b.wc(t); wc.Status != transport.WC_SUCCESS || wc.WRID != 2 || string(a.buf[300:305]) != "pong!" {
		t.Errorf("server write %+v %q", wc, a.buf[300:305])
	}

	// A disconnect leaves the application's QP alone (rping -q moves it to ERR
	// itself).
	if err := ca.Disconnect(); err != nil {
		t.Fatal(err)
	}
	if st := qa.State(); st != transport.QPS_RTS {
		t.Errorf("client QP after Disconnect: %v, want RTS", st)
	}
}
