package ibcm_test

import (
	"testing"
	"time"

	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport/ibcm"
)

const udpService = 0x0000000001111CBE // RDMA_PS_UDP, port 7358

// TestSIDR: Service ID Resolution (IBTA Vol 1 §12.11): a SIDR_REQ for a listened
// Service ID reaches the server as EventSIDRREQ, its SIDRReply carries the QPN and
// Q_Key back in a SIDR_REP with the request's Request ID, Service ID and
// transaction; an unlisted Service ID gets status 1 at once; an unanswered
// SIDR_REQ is sent again each timeout and ends in EventTimeout; a destroyed
// request is answered with status 2 (Rejected).
func TestSIDR(t *testing.T) {
	w := newWire(t)
	w.b.m.Listen(udpService)
	ca, err := w.a.m.ResolveSIDR(w.now, addrB, cm.SIDRREQ{PKey: 0xFFFF, ServiceID: udpService, PrivateData: [216]byte{1, 2, 3}}, time.Second, 3)
	must(t, err)
	w.pump()
	e := w.event(w.b, ibcm.EventSIDRREQ)
	if e.SIDRREQ.RequestID != ca.LocalCommID() || e.SIDRREQ.PrivateData[2] != 3 || e.Conn.State() != ibcm.StateSIDRReqRcvd {
		t.Fatalf("SIDR_REQ %+v", e.SIDRREQ)
	}
	must(t, w.b.m.SIDRReply(e.Conn, cm.SIDRREP{Status: cm.SIDRValid, QPN: 0x22, QKey: 0x01234567}))
	w.pump()
	r := w.event(w.a, ibcm.EventSIDRREP)
	if r.SIDRREP.RequestID != ca.LocalCommID() || r.SIDRREP.QPN != 0x22 || r.SIDRREP.QKey != 0x01234567 || r.SIDRREP.ServiceID != udpService {
		t.Errorf("SIDR_REP %+v", r.SIDRREP)
	}
	reps := w.madsOf(addrB, cm.AttrSIDRREP)
	h, _, _ := cm.Decode(reps[0])
	if h.TransactionID != w.sent[0].h.TransactionID {
		t.Errorf("SIDR_REP TID 0x%x, SIDR_REQ's 0x%x", h.TransactionID, w.sent[0].h.TransactionID)
	}
	if w.a.m.Conns() != 0 || w.b.m.Conns() != 0 {
		t.Errorf("connections left: %d, %d", w.a.m.Conns(), w.b.m.Conns())
	}

	// Unlisted: status 1.
	_, err = w.a.m.ResolveSIDR(w.now, addrB, cm.SIDRREQ{ServiceID: udpService + 1}, time.Second, 3)
	must(t, err)
	w.pump()
	if r := w.event(w.a, ibcm.EventSIDRREP); r.SIDRREP.Status != cm.SIDRServiceIDNotSupported {
		t.Errorf("unlisted: %+v", r.SIDRREP)
	}
	if n := w.b.m.Stats().Unlistened; n != 1 {
		t.Errorf("Unlistened %d, want 1", n)
	}

	// Unanswered: 1 + 3 SIDR_REQs, then EventTimeout. B sees the first as a request
	// and drops the retransmissions as duplicates.
	before := w.count(addrA, cm.AttrSIDRREQ)
	_, err = w.a.m.ResolveSIDR(w.now, addrB, cm.SIDRREQ{ServiceID: udpService}, time.Second, 3)
	must(t, err)
	w.pump()
	pending := w.event(w.b, ibcm.EventSIDRREQ).Conn
	for range 4 {
		w.toNextDeadline()
	}
	w.event(w.a, ibcm.EventTimeout)
	if n := w.count(addrA, cm.AttrSIDRREQ) - before; n != 4 || w.b.m.Stats().Duplicates != 3 {
		t.Errorf("%d SIDR_REQs, B's duplicates %d", n, w.b.m.Stats().Duplicates)
	}
	w.b.m.Destroy(w.now, pending)
	w.pump()
	reps = w.madsOf(addrB, cm.AttrSIDRREP)
	_, msg, _ := cm.Decode(reps[len(reps)-1])
	if msg.(*cm.SIDRREP).Status != cm.SIDRRejected {
		t.Errorf("destroyed request answered %+v", msg)
	}
}
