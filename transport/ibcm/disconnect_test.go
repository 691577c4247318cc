package ibcm_test

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport/ibcm"
)

// disconnect runs a DREQ from one side, the DREP from the other, and both
// TimeWaits to their end.
func disconnectFrom(t *testing.T, w *wire, from *side, c *ibcm.Conn) {
	t.Helper()
	to := w.other(from)
	must(t, from.m.Disconnect(w.now, c, nil))
	w.pump()
	e := w.event(to, ibcm.EventDREQ)
	if e.DREQ.RemoteQPNEECN != e.Conn.REP().LocalQPN && e.DREQ.RemoteQPNEECN != e.Conn.REQ().LocalQPN {
		t.Errorf("DREQ names QP 0x%x", e.DREQ.RemoteQPNEECN)
	}
	must(t, to.m.DREP(w.now, e.Conn, nil))
	w.pump()
	w.event(to, ibcm.EventTimeWait)
	w.event(from, ibcm.EventTimeWait)
	wantState(t, c, ibcm.StateTimeWait)
	wantState(t, e.Conn, ibcm.StateTimeWait)
	// TimeWait lasts the path's Local ACK Timeout (19: ≈ 2.1 s).
	d, _ := from.m.NextDeadline()
	if d.Sub(w.now) != cm.Timeout(19) {
		t.Errorf("TimeWait %v, want %v", d.Sub(w.now), cm.Timeout(19))
	}
	w.advance(cm.Timeout(19))
	w.event(to, ibcm.EventTimeWaitExit)
	w.event(from, ibcm.EventTimeWaitExit)
	if w.a.m.Conns() != 0 || w.b.m.Conns() != 0 {
		t.Errorf("connections left: %d, %d", w.a.m.Conns(), w.b.m.Conns())
	}
	w.noEvents()
}

func TestDisconnectActive(t *testing.T) {
	w := newWire(t)
	ca, _ := w.connect()
	disconnectFrom(t, w, w.a, ca)
	// The DREQ names B's QP, in a transaction of A's; the DREP echoes it.
	dreq := w.madsOf(addrA, cm.AttrDREQ)
	drep := w.madsOf(addrB, cm.AttrDREP)
	h1, m1, _ := cm.Decode(dreq[0])
	h2, _, _ := cm.Decode(drep[0])
	if m1.(*cm.DREQ).RemoteQPNEECN != 0x22 || h1.TransactionID != h2.TransactionID {
		t.Errorf("DREQ %+v %+v, DREP %+v", h1, m1, h2)
	}
}

func TestDisconnectPassive(t *testing.T) {
	w := newWire(t)
	_, cb := w.connect()
	disconnectFrom(t, w, w.b, cb)
	_, m, _ := cm.Decode(w.madsOf(addrB, cm.AttrDREQ)[0])
	if m.(*cm.DREQ).RemoteQPNEECN != 0x11 {
		t.Errorf("B's DREQ names QP 0x%x", m.(*cm.DREQ).RemoteQPNEECN)
	}
}

// TestLostDREP: A sends its DREQ again, and B answers with the same DREP bytes:
// from TimeWait when it outlasts A's DREQ timeout (Local ACK Timeout 24, ≈ 69 s),
// and from nothing at all after it (19, ≈ 2.1 s), as Linux does.
func TestLostDREP(t *testing.T) {
	for _, ackTimeout := range []uint8{24, 19} {
		w := newWire(t)
		req := testREQ(0x11, 0x100)
		req.Primary.LocalACKTimeout = ackTimeout
		ca, err := w.a.m.Connect(w.now, addrB, req)
		must(t, err)
		w.pump()
		cb := w.event(w.b, ibcm.EventREQ).Conn
		must(t, w.b.m.Accept(w.now, cb, testREP(0x22, 0x200)))
		w.pump()
		w.event(w.a, ibcm.EventREP)
		must(t, w.a.m.RTU(ca, nil))
		w.pump()
		w.event(w.b, ibcm.EventEstablished)

		w.lose = loseFirst(addrB, cm.AttrDREP, 1)
		must(t, w.a.m.Disconnect(w.now, ca, nil))
		w.pump()
		must(t, w.b.m.DREP(w.now, w.event(w.b, ibcm.EventDREQ).Conn, nil))
		w.pump()
		w.event(w.b, ibcm.EventTimeWait)
		for w.count(addrA, cm.AttrDREQ) < 2 {
			w.toNextDeadline()
		}
		wantState(t, cb, map[uint8]ibcm.State{24: ibcm.StateTimeWait, 19: ibcm.StateIdle}[ackTimeout])
		dreps := w.madsOf(addrB, cm.AttrDREP)
		if len(dreps) != 2 || !bytes.Equal(dreps[0], dreps[1]) {
			t.Fatalf("Local ACK Timeout %d: %d DREPs", ackTimeout, len(dreps))
		}
		w.event(w.a, ibcm.EventTimeWait)
		wantState(t, ca, ibcm.StateTimeWait)
	}
}

// TestDREQUnanswered: the peer is gone: A sends its DREQ 1 + Max CM Retries times,
// then enters TimeWait anyway.
func TestDREQUnanswered(t *testing.T) {
	w := newWire(t)
	ca, _ := w.connect()
	w.lose = func(netip.Addr, cm.Header) bool { return true }
	must(t, w.a.m.Disconnect(w.now, ca, nil))
	w.pump()
	for ca.State() == ibcm.StateDREQSent {
		w.a.m.Advance(w.now.Add(24 * 3600e9)) // far enough for any timer
		w.now = w.now.Add(24 * 3600e9)
		w.pump()
	}
	if n := w.count(addrA, cm.AttrDREQ); n != 16 {
		t.Errorf("%d DREQs, want 16", n)
	}
	w.event(w.a, ibcm.EventTimeWait)
}

// TestCrossedDREQs: both sides disconnect at once: each answers the other's DREQ
// and both end in TimeWait.
func TestCrossedDREQs(t *testing.T) {
	w := newWire(t)
	ca, cb := w.connect()
	must(t, w.a.m.Disconnect(w.now, ca, nil))
	must(t, w.b.m.Disconnect(w.now, cb, nil))
	w.pump()
	w.event(w.a, ibcm.EventTimeWait)
	w.event(w.b, ibcm.EventTimeWait)
	w.noEvents()
	if _, ok := w.a.m.NextDeadline(); !ok {
		t.Error("no TimeWait timer")
	}
	w.advance(cm.Timeout(19))
	w.event(w.a, ibcm.EventTimeWaitExit)
	w.event(w.b, ibcm.EventTimeWaitExit)
}

// TestStrayDREQ: a DREQ for a connection B does not have gets a DREP (Linux does
// the same); one that names another QP is dropped.
func TestStrayDREQ(t *testing.T) {
	w := newWire(t)
	_, cb := w.connect()
	dreq := cm.DREQ{LocalCommID: 0x77, RemoteCommID: 0x12345678, RemoteQPNEECN: 5}
	mad := make([]byte, cm.MADLen)
	cm.Encode(mad, cm.CMHeader(0x99, 0), &dreq)
	w.b.m.Receive(w.now, addrA, mad)
	sends := w.b.m.Sends()
	if len(sends) != 1 {
		t.Fatalf("%d answers", len(sends))
	}
	h, m, _ := cm.Decode(sends[0].MAD)
	if d, ok := m.(*cm.DREP); !ok || h.TransactionID != 0x99 || d.LocalCommID != 0x12345678 || d.RemoteCommID != 0x77 {
		t.Errorf("answer %+v %+v", h, m)
	}
	dreq = cm.DREQ{LocalCommID: cb.RemoteCommID(), RemoteCommID: cb.LocalCommID(), RemoteQPNEECN: 0x99}
	cm.Encode(mad, cm.CMHeader(0x9a, 0), &dreq)
	w.b.m.Receive(w.now, addrA, mad)
	if len(w.b.m.Sends()) != 0 || len(w.b.m.Events()) != 0 {
		t.Error("a DREQ for another QP was taken")
	}
	wantState(t, cb, ibcm.StateEstablished)
	if st := w.b.m.Stats(); st.Dropped != 2 {
		t.Errorf("stats %+v", st)
	}
}

// TestStaleREQ: a REQ whose IDs match a connection in TimeWait gets a REJ with
// reason Stale Connection.
func TestStaleREQ(t *testing.T) {
	w := newWire(t)
	ca, _ := w.connect()
	must(t, w.a.m.Disconnect(w.now, ca, nil))
	w.pump()
	e := w.event(w.b, ibcm.EventDREQ)
	must(t, w.b.m.DREP(w.now, e.Conn, nil))
	w.pump()
	w.b.m.Receive(w.now, addrA, w.madsOf(addrA, cm.AttrREQ)[0])
	sends := w.b.m.Sends()
	if len(sends) != 1 {
		t.Fatalf("%d answers", len(sends))
	}
	if _, m, _ := cm.Decode(sends[0].MAD); m.(*cm.REJ).Reason != cm.RejStaleConnection {
		t.Errorf("answer %+v", m)
	}
}
