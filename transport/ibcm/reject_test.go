package ibcm_test

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport/ibcm"
)

// TestUnknownService: a REQ for a Service ID nobody listens on gets a REJ with
// reason Invalid Service ID in the REQ's transaction; A's connection ends.
func TestUnknownService(t *testing.T) {
	w := newWire(t)
	req := testREQ(0x11, 0x100)
	req.ServiceID = cm.IPServiceID(cm.PortSpaceTCP, 7471)
	ca, err := w.a.m.Connect(w.now, addrB, req)
	must(t, err)
	w.pump()
	rej := w.event(w.a, ibcm.EventRejected).REJ
	if rej.Reason != cm.RejInvalidServiceID || rej.MessageRejected != cm.RefREQ || rej.RemoteCommID != ca.LocalCommID() {
		t.Errorf("REJ %+v", rej)
	}
	if w.sent[1].h.TransactionID != w.sent[0].h.TransactionID {
		t.Error("REJ in another transaction")
	}
	wantState(t, ca, ibcm.StateIdle)
	if w.a.m.Conns() != 0 || w.b.m.Conns() != 0 {
		t.Errorf("connections left: %d, %d", w.a.m.Conns(), w.b.m.Conns())
	}
	if a, b := w.a.m.Stats().Unlistened, w.b.m.Stats().Unlistened; a != 0 || b != 1 {
		t.Errorf("Unlistened: A %d, B %d; want 0, 1", a, b)
	}
	w.noEvents()
}

// TestConsumerReject: B refuses the REQ (rdma_reject): the REJ carries the reason,
// ARI and private data; both sides forget the connection.
func TestConsumerReject(t *testing.T) {
	w := newWire(t)
	_, err := w.a.m.Connect(w.now, addrB, testREQ(0x11, 0x100))
	must(t, err)
	w.pump()
	cb := w.event(w.b, ibcm.EventREQ).Conn
	must(t, w.b.m.Reject(cb, cm.RejConsumerReject, []byte{1, 2}, []byte("busy")))
	w.pump()
	rej := w.event(w.a, ibcm.EventRejected).REJ
	if rej.Reason != cm.RejConsumerReject || !bytes.Equal(rej.ARIBytes(), []byte{1, 2}) ||
		!bytes.HasPrefix(rej.PrivateData[:], []byte("busy")) || rej.LocalCommID != cb.LocalCommID() {
		t.Errorf("REJ %+v", rej)
	}
	if w.a.m.Conns() != 0 || w.b.m.Conns() != 0 {
		t.Errorf("connections left: %d, %d", w.a.m.Conns(), w.b.m.Conns())
	}
	if _, ok := w.a.m.NextDeadline(); ok {
		t.Error("A's REQ timer still runs")
	}
}

// TestRejectREP: A refuses B's REP (say, an MTU it cannot use): B's connection
// ends and B stops sending its REP.
func TestRejectREP(t *testing.T) {
	w := newWire(t)
	ca, err := w.a.m.Connect(w.now, addrB, testREQ(0x11, 0x100))
	must(t, err)
	w.pump()
	cb := w.event(w.b, ibcm.EventREQ).Conn
	must(t, w.b.m.Accept(w.now, cb, testREP(0x22, 0x200)))
	w.pump()
	w.event(w.a, ibcm.EventREP)
	must(t, w.a.m.Reject(ca, cm.RejInvalidPathMTU, []byte{0x30}, nil))
	w.pump()
	rej := w.event(w.b, ibcm.EventRejected).REJ
	if rej.MessageRejected != cm.RefREP || rej.Reason != cm.RejInvalidPathMTU {
		t.Errorf("REJ %+v", rej)
	}
	if w.a.m.Conns() != 0 || w.b.m.Conns() != 0 {
		t.Errorf("connections left: %d, %d", w.a.m.Conns(), w.b.m.Conns())
	}
	if _, ok := w.b.m.NextDeadline(); ok {
		t.Error("B's REP timer still runs")
	}
}

// TestREPTimeout: the RTU never comes and nothing tells B of traffic: after 1 +
// Max CM Retries REPs, B rejects with reason Timeout.
func TestREPTimeout(t *testing.T) {
	w := newWire(t)
	w.lose = func(_ netip.Addr, h cm.Header) bool {
		return h.AttributeID == cm.AttrRTU || h.AttributeID == cm.AttrREP
	}
	_, err := w.a.m.Connect(w.now, addrB, testREQ(0x11, 0x100))
	must(t, err)
	w.pump()
	cb := w.event(w.b, ibcm.EventREQ).Conn
	must(t, w.b.m.Accept(w.now, cb, testREP(0x22, 0x200)))
	w.pump()
	for w.b.m.Conns() > 0 {
		w.toNextDeadline()
	}
	w.event(w.b, ibcm.EventTimeout)
	if n := w.count(addrB, cm.AttrREP); n < 16 {
		t.Errorf("%d REPs, want at least 16", n)
	}
	rejs := w.madsOf(addrB, cm.AttrREJ)
	if len(rejs) != 1 {
		t.Fatalf("%d REJs from B", len(rejs))
	}
}
