package transport_test

import (
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// TestTailLossProbe: on a lossy QP (SRTT 100 µs, RTO 300 µs) the last packet of a
// three-packet WRITE is lost. At 2 SRTT + 10 µs = 210 µs after the flight left the
// oldest unacknowledged packet and the last go out again — RDMA WRITE FIRST PSN 13
// and RDMA WRITE LAST PSN 15, each with AckReq and its own bytes — and the ACK for
// 15 completes the WR: no go-back-N, no RTO. The next flight gets a probe again (an
// ACK of new data came); a silence after it gets no second probe: the RTO resends
// the flight.
func TestTailLossProbe(t *testing.T) {
	r := newRaw(t, 10, 500, pairConfig{timeout: 14})
	qp := r.e.qp
	r.writeAnswered(10, 100*time.Microsecond)
	r.lose(11)
	checkRTT(t, "measured", qp.CongestionState(), 100*time.Microsecond, 50*time.Microsecond, 300*time.Microsecond)

	r.write(3 * 1024)
	left := r.clock.Now()
	expectRun(t, "three-packet WRITE", r.step(), 13, 3, 15) // 15 is lost
	if d := r.e.dev.NextDeadline().Sub(left); d != 210*time.Microsecond {
		t.Fatalf("probe due %v after the flight left, want 210µs", d)
	}
	out := r.advance()
	if len(out) != 2 {
		t.Fatalf("probe %v, want PSNs 13 and 15", summary(out))
	}
	for i, want := range []struct {
		psn uint32
		op  roce.Opcode
		off int
	}{{13, roce.RC_RDMA_WRITE_FIRST, 0}, {15, roce.RC_RDMA_WRITE_LAST, 2048}} {
		p := out[i]
		if p.BTH.PSN != want.psn || p.BTH.Opcode != want.op || !p.BTH.AckReq {
			t.Fatalf("probe packet %d: PSN %d %v AckReq %v, want PSN %d %v with AckReq", i, p.BTH.PSN, p.BTH.Opcode, p.BTH.AckReq, want.psn, want.op)
		}
		checkBytes(t, "probe payload", p.Payload, r.e.buf[want.off:want.off+1024])
	}
	r.clock.Advance(100 * time.Microsecond)
	r.send(ack(15, roce.SyndromeACK, 0))
	if out := r.step(); len(out) != 0 {
		t.Fatalf("sent %v after the ACK", summary(out))
	}
	checkWC(t, r.wantWCs(1)[0], 1, transport.WC_SUCCESS, transport.WC_RDMA_WRITE, 3*1024)
	wantCounters(t, "after the probe", qp.Counters(), map[int]uint64{transport.CntRoceTailProbe: 1,
		transport.CntRoceAdpRetrans: 0, transport.CntCompleterRetryErr: 1}) // the go-back of lose()

	// Silence again: one probe (the ACK of new data allows it) at 2 SRTT + 10 µs of
	// the estimate the probe's answer updated, then the RTO.
	cs := qp.CongestionState()
	r.write(2 * 1024)
	left = r.clock.Now()
	expectRun(t, "two-packet WRITE", r.step(), 16, 2, 17)
	if d, want := r.e.dev.NextDeadline().Sub(left), 2*cs.SRTT+10*time.Microsecond; d != want {
		t.Fatalf("second probe due %v after the flight left, want %v (SRTT %v)", d, want, cs.SRTT)
	}
	expectRun(t, "second flight's probe", r.advance(), 16, 2, 16, 17)
	if d := r.e.dev.NextDeadline().Sub(left); d != cs.RTO {
		t.Fatalf("RTO due %v after the flight left, want %v", d, cs.RTO)
	}
	expectRun(t, "RTO: the oldest packet alone, with AckReq (spurious.go)", r.advance(), 16, 1, 16)
	wantCounters(t, "at the end", qp.Counters(), map[int]uint64{transport.CntRoceTailProbe: 2,
		transport.CntRoceAdpRetrans: 1, transport.CntCompleterRetryErr: 2})
}
