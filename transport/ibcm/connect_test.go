package ibcm_test

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport/ibcm"
)

// TestConnect: REQ, REP, RTU in one transaction (the REQ's), each side's IDs in
// the other's messages, and the parameters passed through.
func TestConnect(t *testing.T) {
	w := newWire(t)
	ca, cb := w.connect()
	wantState(t, ca, ibcm.StateEstablished)
	wantState(t, cb, ibcm.StateEstablished)
	if len(w.sent) != 3 {
		t.Fatalf("%d MADs sent, want 3", len(w.sent))
	}
	req, rep, rtu := w.sent[0].msg.(*cm.REQ), w.sent[1].msg.(*cm.REP), w.sent[2].msg.(*cm.RTU)
	tid := w.sent[0].h.TransactionID
	for _, s := range w.sent {
		if s.h.TransactionID != tid || s.h.Method != cm.MethodSend || s.h.MgmtClass != cm.ClassCM {
			t.Errorf("%v header %+v", s.h.AttributeID, s.h)
		}
	}
	// Linux's transaction ID: the agent's half, then the comm ID's bytes reversed.
	if tid != 0x0000000100000011 || req.LocalCommID != 0x11000000 {
		t.Errorf("REQ transaction ID 0x%016x, comm ID 0x%08x", tid, req.LocalCommID)
	}
	if req.LocalCAGUID != 0x0200000000000001 || rep.LocalCAGUID != 0x0200000000000002 {
		t.Errorf("CA GUIDs %x %x", req.LocalCAGUID, rep.LocalCAGUID)
	}
	if rep.RemoteCommID != req.LocalCommID || rtu.LocalCommID != req.LocalCommID || rtu.RemoteCommID != rep.LocalCommID ||
		ca.RemoteCommID() != cb.LocalCommID() || cb.RemoteCommID() != ca.LocalCommID() {
		t.Errorf("comm IDs: REQ %x, REP %x/%x, RTU %x/%x", req.LocalCommID, rep.LocalCommID, rep.RemoteCommID, rtu.LocalCommID, rtu.RemoteCommID)
	}
	if cb.REQ().LocalQPN != 0x11 || cb.REQ().StartingPSN != 0x100 || ca.REP().LocalQPN != 0x22 || ca.REP().StartingPSN != 0x200 {
		t.Errorf("parameters: %+v / %+v", cb.REQ(), ca.REP())
	}
	if n, ok := w.a.m.NextDeadline(); ok {
		t.Errorf("A has a timer at %v after establishment", n)
	}
	if _, ok := w.b.m.NextDeadline(); ok {
		t.Error("B has a timer after establishment")
	}
}

// TestLostREQ: the REQ goes again, byte for byte, after 2 × packet lifetime +
// Remote CM Response Timeout, and the connection then completes.
func TestLostREQ(t *testing.T) {
	w := newWire(t)
	w.lose = loseFirst(addrA, cm.AttrREQ, 2)
	ca, err := w.a.m.Connect(w.now, addrB, testREQ(0x11, 0x100))
	if err != nil {
		t.Fatal(err)
	}
	w.pump()
	timeout := 2*cm.Timeout(ibcm.DefaultPacketLifeTime) + cm.Timeout(20)
	if d, _ := w.a.m.NextDeadline(); d.Sub(w.now) != timeout {
		t.Fatalf("REQ timeout %v, want %v", d.Sub(w.now), timeout)
	}
	w.advance(timeout - 1)
	if w.count(addrA, cm.AttrREQ) != 1 {
		t.Fatal("REQ sent again before its timeout")
	}
	w.advance(1)
	w.toNextDeadline()
	if w.count(addrA, cm.AttrREQ) != 3 || !bytes.Equal(w.sent[0].mad, w.sent[2].mad) {
		t.Fatalf("REQs sent: %d; the third equal to the first: %v", w.count(addrA, cm.AttrREQ), bytes.Equal(w.sent[0].mad, w.sent[2].mad))
	}
	cb := w.event(w.b, ibcm.EventREQ).Conn
	must(t, w.b.m.Accept(w.now, cb, testREP(0x22, 0x200)))
	w.pump()
	w.event(w.a, ibcm.EventREP)
	must(t, w.a.m.RTU(ca, nil))
	w.pump()
	w.event(w.b, ibcm.EventEstablished)
	if st := w.a.m.Stats(); st.Retransmits != 2 {
		t.Errorf("stats %+v", st)
	}
}

// TestLostREP: A sends its REQ again; B answers the duplicate REQ with the same
// REP (and does not raise a second EventREQ); the connection completes.
func TestLostREP(t *testing.T) {
	w := newWire(t)
	w.lose = loseFirst(addrB, cm.AttrREP, 1)
	ca, err := w.a.m.Connect(w.now, addrB, testREQ(0x11, 0x100))
	must(t, err)
	w.pump()
	cb := w.event(w.b, ibcm.EventREQ).Conn
	w.advance(time.Second) // B takes a second to accept: A's REQ timeout comes before B's REP timeout
	must(t, w.b.m.Accept(w.now, cb, testREP(0x22, 0x200)))
	w.pump()
	w.toNextDeadline()
	reps := w.madsOf(addrB, cm.AttrREP)
	if len(reps) != 2 || !bytes.Equal(reps[0], reps[1]) {
		t.Fatalf("%d REPs, equal: %v", len(reps), len(reps) == 2 && bytes.Equal(reps[0], reps[1]))
	}
	w.event(w.a, ibcm.EventREP)
	must(t, w.a.m.RTU(ca, nil))
	w.pump()
	w.event(w.b, ibcm.EventEstablished)
	w.noEvents()
	if st := w.b.m.Stats(); st.Duplicates != 1 {
		t.Errorf("B stats %+v", st)
	}
}

// TestLostRTU: B sends its REP again; A, established, answers the duplicate REP
// with the same RTU; B is established.
func TestLostRTU(t *testing.T) {
	w := newWire(t)
	w.lose = loseFirst(addrA, cm.AttrRTU, 1)
	ca, err := w.a.m.Connect(w.now, addrB, testREQ(0x11, 0x100))
	must(t, err)
	w.pump()
	cb := w.event(w.b, ibcm.EventREQ).Conn
	must(t, w.b.m.Accept(w.now, cb, testREP(0x22, 0x200)))
	w.pump()
	w.event(w.a, ibcm.EventREP)
	must(t, w.a.m.RTU(ca, nil))
	w.pump()
	wantState(t, cb, ibcm.StateREPSent)
	w.toNextDeadline()
	rtus := w.madsOf(addrA, cm.AttrRTU)
	if len(rtus) != 2 || !bytes.Equal(rtus[0], rtus[1]) {
		t.Fatalf("%d RTUs", len(rtus))
	}
	w.event(w.b, ibcm.EventEstablished)
	wantState(t, cb, ibcm.StateEstablished)
	w.noEvents()
}

// TestEstablishedByTraffic: the passive side's QP saw traffic before the RTU: the
// connection is established; the RTU that follows changes nothing.
func TestEstablishedByTraffic(t *testing.T) {
	w := newWire(t)
	w.lose = loseFirst(addrA, cm.AttrRTU, 1)
	ca, err := w.a.m.Connect(w.now, addrB, testREQ(0x11, 0x100))
	must(t, err)
	w.pump()
	cb := w.event(w.b, ibcm.EventREQ).Conn
	must(t, w.b.m.Accept(w.now, cb, testREP(0x22, 0x200)))
	w.pump()
	w.event(w.a, ibcm.EventREP)
	must(t, w.a.m.RTU(ca, nil))
	w.pump()
	must(t, w.b.m.NotifyEstablished(cb))
	w.pump()
	w.event(w.b, ibcm.EventEstablished)
	if _, ok := w.b.m.NextDeadline(); ok {
		t.Error("B still retransmits its REP")
	}
	must(t, w.b.m.NotifyEstablished(cb))
	w.noEvents()
}

// TestREQTimeout: nobody answers: the REQ goes 1 + Max CM Retries times, then A
// gives up with a REJ (Timeout, its CA GUID as ARI) and EventTimeout.
func TestREQTimeout(t *testing.T) {
	w := newWire(t)
	w.lose = func(from netip.Addr, h cm.Header) bool { return from == addrA }
	req := testREQ(0x11, 0x100)
	req.MaxCMRetries = 3
	ca, err := w.a.m.Connect(w.now, addrB, req)
	must(t, err)
	w.pump()
	for range 4 {
		w.toNextDeadline()
	}
	if n := w.count(addrA, cm.AttrREQ); n != 4 {
		t.Errorf("%d REQs, want 4", n)
	}
	w.event(w.a, ibcm.EventTimeout)
	last := w.sent[len(w.sent)-1]
	rej, ok := last.msg.(*cm.REJ)
	if !ok || rej.Reason != cm.RejTimeout || rej.MessageRejected != cm.RefREQ || rej.RejectedInfoLength != 8 ||
		!bytes.Equal(rej.ARIBytes(), []byte{2, 0, 0, 0, 0, 0, 0, 1}) || last.h.TransactionID != w.sent[0].h.TransactionID {
		t.Errorf("last MAD %+v %+v", last.h, last.msg)
	}
	wantState(t, ca, ibcm.StateIdle)
	if w.a.m.Conns() != 0 {
		t.Errorf("A holds %d connections", w.a.m.Conns())
	}
	if _, ok := w.a.m.NextDeadline(); ok {
		t.Error("timer left")
	}
}

// TestMRA: B needs time (MRA, service timeout 24 ≈ 69 s): A does not send its REQ
// again before then, and the connection completes when B accepts; a duplicate REQ
// meanwhile gets the MRA again.
func TestMRA(t *testing.T) {
	w := newWire(t)
	ca, err := w.a.m.Connect(w.now, addrB, testREQ(0x11, 0x100))
	must(t, err)
	w.pump()
	cb := w.event(w.b, ibcm.EventREQ).Conn
	must(t, w.b.m.SendMRA(cb, 24))
	w.pump()
	wantState(t, ca, ibcm.StateMRAREQRcvd)
	wantState(t, cb, ibcm.StateMRAREQSent)
	d, _ := w.a.m.NextDeadline()
	if want := cm.Timeout(24) + 2*cm.Timeout(ibcm.DefaultPacketLifeTime); d.Sub(w.now) != want {
		t.Fatalf("after the MRA, A waits %v, want %v", d.Sub(w.now), want)
	}
	w.advance(cm.Timeout(24)) // still waiting
	if w.count(addrA, cm.AttrREQ) != 1 {
		t.Fatal("REQ sent again within the MRA's service timeout")
	}
	w.toNextDeadline() // A gives B one more REQ: B answers with its MRA again
	if w.count(addrA, cm.AttrREQ) != 2 || w.count(addrB, cm.AttrMRA) != 2 {
		t.Fatalf("REQs %d, MRAs %d", w.count(addrA, cm.AttrREQ), w.count(addrB, cm.AttrMRA))
	}
	must(t, w.b.m.Accept(w.now, cb, testREP(0x22, 0x200)))
	w.pump()
	w.event(w.a, ibcm.EventREP)
	must(t, w.a.m.RTU(ca, nil))
	w.pump()
	w.event(w.b, ibcm.EventEstablished)
	w.noEvents()
}

// TestStateErrors: calls out of place are refused with ErrState.
func TestStateErrors(t *testing.T) {
	w := newWire(t)
	ca, cb := w.connect()
	for name, err := range map[string]error{
		"Accept":  w.b.m.Accept(w.now, cb, testREP(1, 1)),
		"RTU":     w.a.m.RTU(ca, nil),
		"Reject":  w.a.m.Reject(ca, cm.RejConsumerReject, nil, nil),
		"SendMRA": w.b.m.SendMRA(cb, 1),
		"DREP":    w.a.m.DREP(w.now, ca, nil),
	} {
		if !errors.Is(err, ibcm.ErrState) {
			t.Errorf("%s in Established: %v", name, err)
		}
	}
	if _, err := w.a.m.Connect(w.now, netip.Addr{}, testREQ(1, 1)); err == nil {
		t.Error("Connect without a peer")
	}
}
