package ibcm_test

import (
	"runtime"
	"testing"

	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport/ibcm"
)

// TestCycles: 1,000 connect/disconnect cycles (alternating who disconnects) leave
// no connection, no timer and no growing heap behind, and never reuse a comm ID
// while the old connection could still be in TimeWait.
func TestCycles(t *testing.T) {
	w := newWire(t)
	seen := [2]map[uint32]bool{{}, {}} // per side: two CMs may use the same IDs
	var heap [2]uint64
	for i := range 1000 {
		ca, cb := w.connect()
		for j, id := range []uint32{ca.LocalCommID(), cb.LocalCommID()} {
			if seen[j][id] {
				t.Fatalf("cycle %d: comm ID 0x%08x again", i, id)
			}
			seen[j][id] = true
		}
		from, c := w.a, ca
		if i%2 == 1 {
			from, c = w.b, cb
		}
		must(t, from.m.Disconnect(w.now, c, nil))
		w.pump()
		e := w.event(w.other(from), ibcm.EventDREQ)
		must(t, w.other(from).m.DREP(w.now, e.Conn, nil))
		w.pump()
		w.advance(cm.Timeout(19))
		w.a.events, w.b.events, w.sent = nil, nil, nil
		if w.a.m.Conns() != 0 || w.b.m.Conns() != 0 {
			t.Fatalf("cycle %d: %d and %d connections left", i, w.a.m.Conns(), w.b.m.Conns())
		}
		if i == 99 || i == 999 {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			heap[i/900] = ms.HeapAlloc
		}
	}
	if _, ok := w.a.m.NextDeadline(); ok {
		t.Error("A has a timer")
	}
	// seen itself grows by two IDs a cycle; allow it and some noise.
	if heap[1] > heap[0]+256<<10 {
		t.Errorf("heap grew from %d to %d bytes over 900 cycles", heap[0], heap[1])
	}
	st := w.a.m.Stats()
	if st.Dropped != 0 || st.Retransmits != 0 {
		t.Errorf("A's stats %+v", st)
	}
}
