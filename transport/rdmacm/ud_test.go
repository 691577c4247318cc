package rdmacm_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/transport/rdmacm"
)

// TestUDResolution: RDMA_PS_UDP (udaddy's port space). The client's SIDR_REQ
// carries the Service ID 0x0000000001110000 | port, P_Key 0xFFFF, the IP CM header
// and its private data; the server's SIDR_REP (AcceptUD) names its UD QP and
// rdma_cm's Q_Key 0x01234567; a UD SEND then reaches that QP through an address
// handle made from what the client learnt. An unlistened port answers status 1.
func TestUDResolution(t *testing.T) {
	a, b, _, _ := newPair(t, pairConfig{})
	l, err := b.svc.ListenPS(cm.PortSpaceUDP, 7174, 0)
	if err != nil {
		t.Fatal(err)
	}
	ud := func(n *node) *transport.QueuePair {
		qp, err := n.pd.CreateQP(transport.QPInitAttr{Type: transport.QPT_UD, SendCQ: n.cq, RecvCQ: n.cq,
			Cap: transport.QPCap{MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if err := transport.BringUp(qp, transport.QPS_RESET, transport.QPS_RTS,
			transport.ConnectParams{Type: transport.QPT_UD, QKey: rdmacm.UDPQKey}); err != nil {
			t.Fatal(err)
		}
		return qp
	}
	qa, qb := ud(a), ud(b)
	c, err := a.svc.ConnectUD(netip.AddrPortFrom(ipB, 7174), []byte("who"), rdmacm.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.Accept(ctx5(t))
	if err != nil {
		t.Fatal(err)
	}
	if !r.UD() || r.Remote.Addr() != ipA || string(r.Param.PrivateData[:3]) != "who" || len(r.Param.PrivateData) != rdmacm.MaxSIDRPrivateData {
		t.Errorf("request %+v", r)
	}
	if _, err := r.Accept(qb, rdmacm.Param{}); !errors.Is(err, rdmacm.ErrParam) {
		t.Errorf("Accept on a SIDR_REQ: %v", err)
	}
	if err := r.AcceptUD(qb.QPN(), rdmacm.UDPQKey, []byte("me")); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitEstablished(ctx5(t)); err != nil {
		t.Fatal(err)
	}
	if got := c.UD(); got != (rdmacm.UDInfo{QPN: qb.QPN(), QKey: rdmacm.UDPQKey}) || string(c.PeerParam().PrivateData[:2]) != "me" {
		t.Errorf("client learnt %+v %q", got, c.PeerParam().PrivateData[:2])
	}
	_, ms, _ := a.tap.cmSent(t)
	req, ok := ms[0].(*cm.SIDRREQ)
	if !ok || req.ServiceID != 0x0000000001111C06 || req.PKey != 0xFFFF || string(req.PrivateData[cm.IPCMHeaderLen:cm.IPCMHeaderLen+3]) != "who" {
		t.Errorf("SIDR_REQ %+v", ms[0])
	}
	if h, err := cm.DecodeIPCMHeader(req.PrivateData[:]); err != nil || h.SourceIP != ipA || h.DestinationIP != ipB || h.SourcePort != c.LocalAddr().Port() {
		t.Errorf("IP CM header %+v %v", h, err)
	}

	// A UD SEND to what the SIDR_REP named.
	ah, err := a.pd.CreateAH(transport.AddressHandle{DGID: roce.GIDFromAddr(ipB), SGIDIndex: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := qb.PostRecv(transport.RecvWR{WRID: 5, SGList: b.sge(0, transport.GRHLen+64)}); err != nil {
		t.Fatal(err)
	}
	copy(a.buf[:5], "hello")
	if _, err := qa.PostSend(transport.SendWR{WRID: 6, Opcode: transport.WR_SEND, SGList: a.sge(0, 5), Flags: transport.SendSignaled,
		AH: ah, RemoteQPN: c.UD().QPN, RemoteQKey: c.UD().QKey}); err != nil {
		t.Fatal(err)
	}
	if wc := b.wc(t); wc.Status != transport.WC_SUCCESS || wc.ByteLen != transport.GRHLen+5 || wc.SrcQP != qa.QPN() ||
		string(b.buf[transport.GRHLen:transport.GRHLen+5]) != "hello" {
		t.Errorf("server receive %+v", wc)
	}

	// Nobody on the port: status 1, EventUnreachable's error.
	c2, err := a.svc.ConnectUD(netip.AddrPortFrom(ipB, 7175), nil, rdmacm.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c2.WaitEstablished(ctx5(t)); !errors.Is(err, rdmacm.ErrUnreachable) || !strings.Contains(err.Error(), "status 1") {
		t.Errorf("unlistened port: %v", err)
	}
	l.Close()
	waitDrained(t, a.svc, b.svc)
}
