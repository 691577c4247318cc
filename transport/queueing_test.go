package transport_test

import (
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// TestQueueingDelayCutsWindow: RTT samples above the smallest RTT plus 500 µs shrink
// the window of a lossy QP in proportion to the excess (queueing.go), once per window
// of data; a QP that never lost a packet ignores them.
func TestQueueingDelayCutsWindow(t *testing.T) {
	r := newRaw(t, 10, 500, pairConfig{timeout: 14})
	qp := r.e.qp
	r.writeAnswered(10, 100*time.Microsecond) // the smallest RTT: the target is 600 µs
	r.writeAnswered(11, 5*time.Millisecond)
	wantWindow(t, "clean link, a 5 ms sample", qp.CongestionState(), 128, 128)

	r.lose(12) // NAK: 128 × 0.7
	wantWindow(t, "after the NAK", qp.CongestionState(), 89, 89)
	r.writeAnswered(14, 600*time.Microsecond) // at the target: nothing
	wantWindow(t, "a sample at the target", qp.CongestionState(), 89, 89)
	// 700 µs: 89 × (1 − 0.8 × 100/700) = 78.8.
	r.writeAnswered(15, 700*time.Microsecond)
	wantWindow(t, "a sample 100 µs above", qp.CongestionState(), 78, 78)
	// 5 ms: 1 − 0.8 × 4.4/5 = 0.296, at most halved: 39.
	r.writeAnswered(16, 5*time.Millisecond)
	wantWindow(t, "a sample 4.4 ms above", qp.CongestionState(), 39, 39)
	// Two one-packet WRITEs in flight, both answered after 5 ms: the first halves
	// the window (39 → 19), the second belongs to the window of data already cut.
	r.write(100)
	r.write(100)
	left := r.clock.Now()
	expectRun(t, "two WRITEs", r.step(), 17, 2, 17, 18)
	r.clock.Set(left.Add(5 * time.Millisecond))
	r.send(ack(17, roce.SyndromeACK, 0))
	r.step()
	wantWindow(t, "first answer", qp.CongestionState(), 19, 19)
	r.send(ack(18, roce.SyndromeACK, 0))
	r.step()
	wantWindow(t, "second answer, same window of data", qp.CongestionState(), 19, 19)
	r.wantWCs(2)
	if !qp.CongestionState().Lossy {
		t.Fatal("not lossy after the queueing cuts")
	}
	wantCounters(t, "at the end", qp.Counters(), map[int]uint64{transport.CntRoceAdpRetrans: 0, transport.CntCompleterRetryErr: 1})
}
