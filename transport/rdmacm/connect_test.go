package rdmacm_test

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/transport/rdmacm"
)

// TestConnectExchange: Listen, Dial and Accept over a Pipe. The REQ, REP and RTU on
// the wire carry what rdma_cm puts there on RoCEv2 (IBTA Vol 1 §12.6 Tables 106,
// 110, 112; Annex A11; values as testdata's rdma_rxe capture shows), the
// resources are negotiated as librdmacm's rdma_accept does, both QPs end in RTS
// with each other's QPN and PSNs, and a SEND and an RDMA WRITE then flow with the
// PSNs the REQ and REP named.
func TestConnectExchange(t *testing.T) {
	a, b, _, _ := newPair(t, pairConfig{})
	cp := rdmacm.Param{PrivateData: []byte("hello"), ResponderResources: 1, InitiatorDepth: 2, RetryCount: 6, RNRRetryCount: 5}
	sp := rdmacm.Param{PrivateData: []byte("world"), ResponderResources: 4, InitiatorDepth: 4, RNRRetryCount: 3}
	c := connect(t, a, b, 18515, cp, sp)

	// What each side learnt of the other.
	r := c.req
	if r.Local != netip.AddrPortFrom(ipB, 18515) || r.Remote.Addr() != ipA || r.Remote.Port() < 32768 || r.Remote.Port() > 60999 ||
		r.RemoteQPN != c.client.QP().QPN() {
		t.Errorf("request: local %v remote %v QPN 0x%x", r.Local, r.Remote, r.RemoteQPN)
	}
	wantReq := rdmacm.Param{PrivateData: pad("hello", rdmacm.MaxREQPrivateData), ResponderResources: 2, InitiatorDepth: 1,
		RetryCount: 6, RNRRetryCount: 5}
	if !equalParam(r.Param, wantReq) {
		t.Errorf("request param %+v, want %+v", r.Param, wantReq)
	}
	// The REP carries the accept's values as given (cma_accept_ib), seen swapped.
	wantRep := rdmacm.Param{PrivateData: pad("world", rdmacm.MaxREPPrivateData), ResponderResources: 4, InitiatorDepth: 4, RNRRetryCount: 3}
	if got := c.client.PeerParam(); !equalParam(got, wantRep) {
		t.Errorf("client's peer param %+v, want %+v", got, wantRep)
	}
	if c.client.RemoteAddr() != netip.AddrPortFrom(ipB, 18515) || c.client.LocalAddr() != r.Remote || c.server.RemoteAddr() != r.Remote {
		t.Errorf("addresses: client %v → %v, server ← %v", c.client.LocalAddr(), c.client.RemoteAddr(), c.server.RemoteAddr())
	}

	// The MADs.
	hs, ms, ps := a.tap.cmSent(t)
	if len(ms) != 2 {
		t.Fatalf("client sent %d CM MADs, want REQ and RTU", len(ms))
	}
	req, ok1 := ms[0].(*cm.REQ)
	rtu, ok2 := ms[1].(*cm.RTU)
	hb, mb, pb := b.tap.cmSent(t)
	if !ok1 || !ok2 || len(mb) != 1 {
		t.Fatalf("client sent %T %T, server %d MADs", ms[0], ms[1], len(mb))
	}
	rep, ok := mb[0].(*cm.REP)
	if !ok {
		t.Fatalf("server sent %T", mb[0])
	}
	checkREQ(t, req, c, r)
	if rep.LocalQPN != c.server.QP().QPN() || rep.RemoteCommID != req.LocalCommID || rep.ResponderResources != 4 ||
		rep.InitiatorDepth != 4 || rep.TargetACKDelay != 15 || rep.RNRRetryCount != 3 || rep.LocalCAGUID != 0x000000fffe000902 ||
		!bytes.Equal(rep.PrivateData[:5], []byte("world")) {
		t.Errorf("REP %+v", rep)
	}
	if rtu.LocalCommID != req.LocalCommID || rtu.RemoteCommID != rep.LocalCommID {
		t.Errorf("RTU %+v", rtu)
	}
	if hs[0].TransactionID != hb[0].TransactionID || hs[1].TransactionID != hs[0].TransactionID {
		t.Errorf("transaction IDs REQ 0x%x REP 0x%x RTU 0x%x", hs[0].TransactionID, hb[0].TransactionID, hs[1].TransactionID)
	}
	// QP1's datagrams as rdma_rxe's: UDP source port 0xD872, P_Key 0xFFFF, PSNs
	// counting from 0 per sender (REQ 0, RTU 1; REP 0), DETH source QP 1.
	for i, p := range append(ps, pb...) {
		wantPSN := []uint32{0, 1, 0}[i]
		if p.UDP.SrcPort != cm.RxeGSISourcePort || p.BTH.PSN != wantPSN || p.DETH.SrcQP != 1 || p.BTH.PKey != 0xFFFF || !p.BTH.AckReq {
			t.Errorf("QP1 frame %d: sport 0x%x PSN %d (want %d) P_Key 0x%x AckReq %v DETH %+v", i, p.UDP.SrcPort, p.BTH.PSN, wantPSN,
				p.BTH.PKey, p.BTH.AckReq, p.DETH)
		}
	}

	// Data with the negotiated PSNs.
	copy(a.buf[:4], "ping")
	if _, err := c.server.QP().PostRecv(transport.RecvWR{WRID: 7, SGList: b.sge(100, 64)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.client.QP().PostSend(transport.SendWR{WRID: 1, Opcode: transport.WR_SEND, SGList: a.sge(0, 4), Flags: transport.SendSignaled}); err != nil {
		t.Fatal(err)
	}
	if wc := b.wc(t); wc.Status != transport.WC_SUCCESS || wc.WRID != 7 || wc.ByteLen != 4 || string(b.buf[100:104]) != "ping" {
		t.Errorf("server receive %+v %q", wc, b.buf[100:104])
	}
	copy(b.buf[200:205], "pong!")
	if _, err := c.server.QP().PostSend(transport.SendWR{WRID: 2, Opcode: transport.WR_RDMA_WRITE, SGList: b.sge(200, 5),
		RemoteAddr: a.mr.Addr() + 300, RKey: a.mr.RKey(), Flags: transport.SendSignaled}); err != nil {
		t.Fatal(err)
	}
	if wc := a.wc(t); wc.Status != transport.WC_SUCCESS || wc.WRID != 1 {
		t.Errorf("client send %+v", wc)
	}
	if wc := b.wc(t); wc.Status != transport.WC_SUCCESS || wc.WRID != 2 || string(a.buf[300:305]) != "pong!" {
		t.Errorf("server write %+v %q", wc, a.buf[300:305])
	}
	firstData := func(tp *tap, qpn uint32) uint32 {
		for _, p := range tp.sent(t) {
			if p.BTH.DestQP == qpn && p.BTH.Opcode.Service() == roce.ServiceRC && p.BTH.Opcode.Is(roce.ClassRequest) {
				return p.BTH.PSN
			}
		}
		t.Fatalf("no RC request to QP 0x%x", qpn)
		return 0
	}
	if got := firstData(a.tap, rep.LocalQPN); got != rep.StartingPSN {
		t.Errorf("client's first request PSN 0x%06x, REP's Starting PSN 0x%06x", got, rep.StartingPSN)
	}
	if got := firstData(b.tap, req.LocalQPN); got != req.StartingPSN {
		t.Errorf("server's first request PSN 0x%06x, REQ's Starting PSN 0x%06x", got, req.StartingPSN)
	}
}

// checkREQ compares a REQ on the wire with what rdma_cm sends on RoCEv2.
func checkREQ(t *testing.T, req *cm.REQ, c connected, r *rdmacm.Request) {
	t.Helper()
	want := cm.REQ{
		LocalCommID: req.LocalCommID, ServiceID: 0x0000000001064853, LocalCAGUID: 0x000000fffe000901,
		LocalQPN: c.client.QP().QPN(), ResponderResources: 1, InitiatorDepth: 2, RemoteCMResponseTimeout: 20,
		StartingPSN: req.StartingPSN, LocalCMResponseTimeout: 20, RetryCount: 6, PKey: 0xFFFF, PathMTU: roce.MTU1024,
		RNRRetryCount: 5, MaxCMRetries: 15,
		Primary: cm.Path{LocalPortLID: 0xFFFF, RemotePortLID: 0xFFFF, LocalPortGID: roce.GIDFromAddr(ipA),
			RemotePortGID: roce.GIDFromAddr(ipB), FlowLabel: cm.RoCEFlowLabel(r.Remote.Port(), 18515), HopLimit: 64,
			LocalACKTimeout: 19},
	}
	h := cm.NewIPCMHeader(r.Remote, ipB)
	h.Put(want.PrivateData[:])
	copy(want.PrivateData[cm.IPCMHeaderLen:], "hello")
	if *req != want {
		t.Errorf("REQ\n%+v\nwant\n%+v", *req, want)
	}
	if req.LocalCommID == 0 || req.StartingPSN > 0xFFFFFF {
		t.Errorf("REQ comm ID 0x%x PSN 0x%x", req.LocalCommID, req.StartingPSN)
	}
}

func pad(s string, n int) []byte {
	b := make([]byte, n)
	copy(b, s)
	return b
}

func equalParam(a, b rdmacm.Param) bool {
	pa, pb := a.PrivateData, b.PrivateData
	a.PrivateData, b.PrivateData = nil, nil
	return bytes.Equal(pa, pb) && a.ResponderResources == b.ResponderResources && a.InitiatorDepth == b.InitiatorDepth &&
		a.FlowControl == b.FlowControl && a.RetryCount == b.RetryCount && a.RNRRetryCount == b.RNRRetryCount && a.SRQ == b.SRQ
}

var (
	_ = errors.Is
	_ = strings.Contains
	_ = time.Second
)

// TestAcceptMaxResources: rdma_accept with a NULL conn_param (MaxResources) answers
// with what the REQ offered, at most the device's, as rping's server does.
func TestAcceptMaxResources(t *testing.T) {
	a, b, _, _ := newPair(t, pairConfig{})
	c := connect(t, a, b, 7174, rdmacm.Param{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7},
		rdmacm.Param{ResponderResources: rdmacm.MaxResources, InitiatorDepth: rdmacm.MaxResources, RNRRetryCount: 7})
	if p := c.client.PeerParam(); p.ResponderResources != 1 || p.InitiatorDepth != 1 || p.RNRRetryCount != 7 {
		t.Errorf("REP seen by the client: %+v", p)
	}
}
