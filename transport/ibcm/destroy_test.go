package ibcm_test

import (
	"testing"

	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport/ibcm"
)

// TestDestroy: destroying a connection tells the peer as Linux's cm_destroy_id
// does: a REJ (Timeout, ARI = our CA GUID) for a REQ in flight, a REJ (Consumer
// Reject) for an unanswered REQ, a DREQ once established (then TimeWait, no
// retransmission), the DREP for a DREQ received.
func TestDestroy(t *testing.T) {
	t.Run("REQ Sent", func(t *testing.T) {
		w := newWire(t)
		ca, err := w.a.m.Connect(w.now, addrB, testREQ(0x11, 0x100))
		must(t, err)
		w.a.m.Destroy(w.now, ca) // before B's REP: the REQ is withdrawn
		w.pump()
		rejs := w.madsOf(addrA, cm.AttrREJ)
		if len(rejs) != 1 {
			t.Fatalf("%d REJs", len(rejs))
		}
		_, msg, _ := cm.Decode(rejs[0])
		rej := msg.(*cm.REJ)
		if rej.Reason != cm.RejTimeout || rej.MessageRejected != cm.RefREQ || rej.RejectedInfoLength != 8 ||
			rej.ARI[7] != 0x01 || rej.LocalCommID != ca.LocalCommID() {
			t.Errorf("REJ %+v", rej)
		}
		wantState(t, ca, ibcm.StateIdle)
		if w.a.m.Conns() != 0 {
			t.Errorf("A holds %d connections", w.a.m.Conns())
		}
		// B saw the REQ, then the REJ ended it.
		w.event(w.b, ibcm.EventREQ)
		w.event(w.b, ibcm.EventRejected)
	})
	t.Run("REQ Rcvd", func(t *testing.T) {
		w := newWire(t)
		_, err := w.a.m.Connect(w.now, addrB, testREQ(0x11, 0x100))
		must(t, err)
		w.pump()
		cb := w.event(w.b, ibcm.EventREQ).Conn
		w.b.m.Destroy(w.now, cb)
		w.pump()
		if e := w.event(w.a, ibcm.EventRejected); e.REJ.Reason != cm.RejConsumerReject {
			t.Errorf("REJ %+v", e.REJ)
		}
	})
	t.Run("Established", func(t *testing.T) {
		w := newWire(t)
		ca, cb := w.connect()
		w.a.m.Destroy(w.now, ca)
		wantState(t, ca, ibcm.StateTimeWait)
		w.pump()
		w.event(w.a, ibcm.EventTimeWait)
		w.event(w.b, ibcm.EventDREQ)
		w.b.m.Destroy(w.now, cb) // answers with the DREP
		wantState(t, cb, ibcm.StateTimeWait)
		w.pump()
		if w.count(addrA, cm.AttrDREQ) != 1 || w.count(addrB, cm.AttrDREP) != 1 {
			t.Errorf("DREQs %d, DREPs %d", w.count(addrA, cm.AttrDREQ), w.count(addrB, cm.AttrDREP))
		}
		w.toNextDeadline()
		if w.a.m.Conns() != 0 || w.count(addrA, cm.AttrDREQ) != 1 {
			t.Errorf("A: %d connections, %d DREQs", w.a.m.Conns(), w.count(addrA, cm.AttrDREQ))
		}
	})
}
