package transport_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// Tests of the congestion window and the RTT-timed retransmission (cwnd.go, rtt.go,
// docs/congestion.md), with a hand-driven peer on the fake clock and exact values.

// expectRun checks that ps are n request packets with consecutive PSNs from first,
// and that exactly the PSNs ackReq carry AckReq.
func expectRun(t *testing.T, what string, ps []roce.Packet, first uint32, n int, ackReq ...uint32) {
	t.Helper()
	var got []uint32
	for i, p := range ps {
		if want := roce.PSNAdd(first, i); p.BTH.PSN != want {
			t.Fatalf("%s: packet %d has PSN %d, want %d (%d packets from %d)", what, i, p.BTH.PSN, want, n, first)
		}
		if p.BTH.AckReq {
			got = append(got, p.BTH.PSN)
		}
	}
	if len(ps) != n {
		t.Fatalf("%s: %d packets from PSN %d, want %d", what, len(ps), first, n)
	}
	if !slices.Equal(got, ackReq) {
		t.Fatalf("%s: AckReq on PSNs %v, want %v", what, got, ackReq)
	}
}

func wantWindow(t *testing.T, what string, got transport.CongestionState, cwnd, ssthresh int) {
	t.Helper()
	if got.Cwnd != cwnd || got.Ssthresh != ssthresh {
		t.Fatalf("%s: cwnd %d ssthresh %d, want %d and %d (%+v)", what, got.Cwnd, got.Ssthresh, cwnd, ssthresh, got)
	}
}

func wantCounters(t *testing.T, what string, c *transport.Counters, want map[int]uint64) {
	t.Helper()
	for i, v := range want {
		if got := c.Get(i); got != v {
			t.Errorf("%s: %s = %d, want %d (%v)", what, transport.CounterNames[i], got, v, c)
		}
	}
}

// TestWindowCutOnNAK: a 200-packet WRITE goes out as the fixed window always sent it
// (128 packets, AckReq every 64); an ACK slides the window. A NAK PSN sequence error
// cuts the window to 0.7 of itself (128 → 89), and go-back-N resends only what fits
// in it, with AckReq every ceil(89/2) = 45 packets and on the packet that fills the
// window (sendData). A second NAK for the same window
// of data cuts nothing more (the recover point), and the window grows on the PSNs
// acknowledged meanwhile (4 packets per window acknowledged).
func TestWindowCutOnNAK(t *testing.T) {
	r := newRaw(t, 0, 500, pairConfig{bufSize: 1 << 20})
	qp := r.e.qp
	r.write(200 * 1024)
	expectRun(t, "first window", r.step(), 0, 128, 63, 127)
	wantWindow(t, "at start", qp.CongestionState(), 128, 128)
	r.send(ack(63, roce.SyndromeACK, 0))
	expectRun(t, "window slid by 64", r.step(), 128, 64, 191)
	r.send(ack(100, roce.SyndromeNAKPSNSequenceError, 0)) // 100 was lost
	expectRun(t, "go-back-N within the cut window", r.step(), 100, 89, 144, 188)
	wantWindow(t, "after the NAK", qp.CongestionState(), 89, 89)
	wantCounters(t, "after the NAK", qp.Counters(), map[int]uint64{transport.CntRcvdSeqErr: 1, transport.CntCompleterRetryErr: 1})
	// 150 of the resent packets is lost too: no second cut (it was sent before the
	// cut's recover point, 192). The 50 PSNs 100..149 acknowledged by the NAK grow
	// the window: 50 × 4 ≥ 89 adds one (acked 50 - 23 = 27), 27 × 4 ≥ 90 another.
	r.send(ack(150, roce.SyndromeNAKPSNSequenceError, 0))
	expectRun(t, "go-back-N to the end of the message", r.step(), 150, 50, 195, 199)
	wantWindow(t, "after the second NAK", qp.CongestionState(), 91, 89)
	r.send(ack(199, roce.SyndromeACK, 1))
	if out := r.step(); len(out) != 0 {
		t.Fatalf("sent %v after the last ACK", summary(out))
	}
	if wcs := r.wcs(); len(wcs) != 1 || wcs[0].Status != transport.WC_SUCCESS {
		t.Fatalf("completions %+v", wcs)
	}
	// The window did not limit the last 50 packets: it did not grow.
	wantWindow(t, "at the end", qp.CongestionState(), 91, 89)
	wantCounters(t, "at the end", qp.Counters(), map[int]uint64{transport.CntRcvdSeqErr: 2, transport.CntCompleterRetryErr: 2,
		transport.CntRoceAdpRetrans: 0, transport.CntLocalAckTimeoutErr: 0})
}

// writeAnswered posts a one-packet WRITE (PSN psn) and answers it rtt after it left;
// it returns when the answer has been taken in.
func (r *raw) writeAnswered(psn uint32, rtt time.Duration) {
	r.t.Helper()
	r.write(100)
	left := r.clock.Now()
	expectRun(r.t, "one-packet WRITE", r.step(), psn, 1, psn)
	r.clock.Set(left.Add(rtt))
	r.send(ack(psn, roce.SyndromeACK, 0))
	if out := r.step(); len(out) != 0 {
		r.t.Fatalf("sent %v after the ACK", summary(out))
	}
	if wcs := r.wcs(); len(wcs) != 1 || wcs[0].Status != transport.WC_SUCCESS {
		r.t.Fatalf("completions %+v", wcs)
	}
}

// lose makes the QP lossy with a NAK PSN sequence error: a two-packet WRITE from PSN
// psn whose second packet is NAKed, resent and acknowledged. It gives no RTT sample:
// the NAK answers a PSN never sent, the first packet did not ask for an ACK, and the
// second was sent twice.
func (r *raw) lose(psn uint32) {
	r.t.Helper()
	r.write(2 * 1024)
	expectRun(r.t, "two-packet WRITE", r.step(), psn, 2, psn+1)
	r.send(ack(psn+1, roce.SyndromeNAKPSNSequenceError, 0))
	expectRun(r.t, "go-back-N", r.step(), psn+1, 1, psn+1)
	r.send(ack(psn+1, roce.SyndromeACK, 0))
	r.step()
	if wcs := r.wcs(); len(wcs) != 1 || wcs[0].Status != transport.WC_SUCCESS {
		r.t.Fatalf("completions %+v", wcs)
	}
}

func checkRTT(t *testing.T, what string, got transport.CongestionState, srtt, rttvar, rto time.Duration) {
	t.Helper()
	if got.SRTT != srtt || got.RTTVar != rttvar || got.RTO != rto {
		t.Fatalf("%s: SRTT %v RTTVAR %v RTO %v, want %v, %v and %v", what, got.SRTT, got.RTTVar, got.RTO, srtt, rttvar, rto)
	}
}

// TestRTOFromRTTSamples: the retransmission timeout follows RFC 6298 from the
// measured round trips (SRTT, RTTVAR, RTO = SRTT + 4 RTTVAR). Once a loss has made
// the QP lossy, a tail-loss probe goes out at 2 SRTT + 10 µs and the adaptive timer
// resends at exactly the RTO after the packet left, without spending retry_cnt, and
// doubles; an answer to a retransmitted PSN
// gives no sample (Karn) but ends the backoff (the path works again), and the next
// fresh one gives a sample.
func TestRTOFromRTTSamples(t *testing.T) {
	r := newRaw(t, 10, 500, pairConfig{timeout: 14, retryCnt: 1})
	qp := r.e.qp
	checkRTT(t, "before any sample", qp.CongestionState(), 0, 0, 67108864*time.Nanosecond) // the local ACK timeout
	r.writeAnswered(10, 101*time.Microsecond)
	// First sample R = 101 µs: SRTT = R, RTTVAR = R/2, RTO = 101 + 4 × 50.5.
	checkRTT(t, "first sample", qp.CongestionState(), 101*time.Microsecond, 50500*time.Nanosecond, 303*time.Microsecond)
	r.writeAnswered(11, 61*time.Microsecond)
	// RTTVAR = 3/4 × 50.5 + 1/4 × |101 - 61| = 47.875; SRTT = 7/8 × 101 + 1/8 × 61 = 96.
	checkRTT(t, "second sample", qp.CongestionState(), 96*time.Microsecond, 47875*time.Nanosecond, 287500*time.Nanosecond)
	if qp.CongestionState().Lossy {
		t.Fatal("lossy before any loss")
	}
	r.lose(12)
	checkRTT(t, "after the loss", qp.CongestionState(), 96*time.Microsecond, 47875*time.Nanosecond, 287500*time.Nanosecond)
	if !qp.CongestionState().Lossy {
		t.Fatal("not lossy after a NAK")
	}

	r.write(100)
	left := r.clock.Now()
	expectRun(t, "unanswered WRITE", r.step(), 14, 1, 14)
	if d := r.e.dev.NextDeadline().Sub(left); d != 202*time.Microsecond {
		t.Fatalf("probe due %v after the packet left, want 2 SRTT + 10µs = 202µs", d)
	}
	expectRun(t, "tail-loss probe", r.advance(), 14, 1, 14)
	resent := r.e.dev.NextDeadline()
	if d := resent.Sub(left); d != 287500*time.Nanosecond {
		t.Fatalf("retransmit timer due %v after the packet left, want the RTO 287.5µs", d)
	}
	expectRun(t, "adaptive retransmission", r.advance(), 14, 1, 14)
	wantCounters(t, "after the adaptive retransmission", qp.Counters(), map[int]uint64{transport.CntRoceAdpRetrans: 1,
		transport.CntLocalAckTimeoutErr: 0, transport.CntCompleterRetryErr: 2, transport.CntRoceTailProbe: 1})
	checkRTT(t, "backed off", qp.CongestionState(), 96*time.Microsecond, 47875*time.Nanosecond, 575*time.Microsecond)
	if d := r.e.dev.NextDeadline().Sub(resent); d != 575*time.Microsecond {
		t.Fatalf("next retransmission due %v after the resend, want 575µs", d)
	}
	// The answer may be to either copy: no sample, but the backoff ends.
	r.clock.Advance(10 * time.Microsecond)
	r.send(ack(14, roce.SyndromeACK, 0))
	r.step()
	if wcs := r.wcs(); len(wcs) != 1 || wcs[0].Status != transport.WC_SUCCESS {
		t.Fatalf("completions %+v", wcs)
	}
	checkRTT(t, "after the answer to a retransmission", qp.CongestionState(), 96*time.Microsecond, 47875*time.Nanosecond, 287500*time.Nanosecond)
	// A fresh packet answered after 50 µs: RTTVAR = (3 × 47.875 + 46) / 4, SRTT =
	// (7 × 96 + 50) / 8 = 90.25.
	r.writeAnswered(15, 50*time.Microsecond)
	checkRTT(t, "third sample", qp.CongestionState(), 90250*time.Nanosecond, 47406*time.Nanosecond, 279874*time.Nanosecond)
	// retry_cnt 1 was never spent: the adaptive retransmission does not count.
	wantCounters(t, "at the end", qp.Counters(), map[int]uint64{transport.CntRetryExceededErr: 0, transport.CntLocalAckTimeoutErr: 0})
}

// TestRetryCntWithAdaptiveRTO: with an RTO of 303 µs measured, a loss seen, and the
// local ACK timeout at 4.194304 ms (timeout 10), a peer that stops answering sees one
// tail-loss probe at 212 µs (2 SRTT + 10 µs: the oldest and the last packet again,
// probe.go; none after, since nothing is acknowledged), adaptive
// retransmissions at 303, 909 and 2121 µs (the RTO doubling; the window drops to one
// packet from the second), then the local ACK timeouts decide as before: retry_cnt 2
// is spent at 4.194304 and 8.388608 ms, and the WR completes with
// IBV_WC_RETRY_EXC_ERR at exactly 3 × 4.194304 ms after the packet first left — the
// same bound as without the adaptive timer.
func TestRetryCntWithAdaptiveRTO(t *testing.T) {
	r := newRaw(t, 10, 500, pairConfig{timeout: 10, retryCnt: 2})
	qp := r.e.qp
	r.writeAnswered(10, 101*time.Microsecond)
	checkRTT(t, "measured", qp.CongestionState(), 101*time.Microsecond, 50500*time.Nanosecond, 303*time.Microsecond)
	r.lose(11)
	r.write(100)
	must(t, postSend(r.e, transport.SendWR{WRID: 2, Opcode: transport.WR_SEND, SGList: sge(r.e, 0, 10)}))
	left := r.clock.Now()
	out := r.step()
	expectRun(t, "WRITE and SEND", out, 13, 2, 13, 14)
	var resends []string
	for {
		at := r.e.dev.NextDeadline().Sub(left)
		out := r.advance()
		if qp.State() == transport.QPS_ERR {
			if at != 3*4194304*time.Nanosecond {
				t.Errorf("failed %v after the packet left, want 3 × 4.194304ms", at)
			}
			break
		}
		switch len(resends) {
		case 0: // the probe: the oldest unacknowledged packet and the last, with AckReq
			expectRun(t, fmt.Sprintf("probe at %v", at), out, 13, 2, 13, 14)
		default: // an adaptive RTO sends the oldest packet alone (spurious.go), and
			// from the second timeout on the window is one packet
			expectRun(t, fmt.Sprintf("resend at %v", at), out, 13, 1, 13)
		}
		resends = append(resends, at.String())
		if len(resends) > 20 {
			t.Fatal("no end")
		}
	}
	if want := []string{"212µs", "303µs", "909µs", "2.121ms", "4.194304ms", "8.388608ms"}; !slices.Equal(resends, want) {
		t.Errorf("resent at %v, want %v", resends, want)
	}
	wcs := r.wcs()
	if len(wcs) != 2 {
		t.Fatalf("completions %+v", wcs)
	}
	checkWC(t, wcs[0], 1, transport.WC_RETRY_EXC_ERR, transport.WC_RDMA_WRITE, -1)
	checkWC(t, wcs[1], 2, transport.WC_WR_FLUSH_ERR, transport.WC_SEND, -1)
	wantCounters(t, "at the end", qp.Counters(), map[int]uint64{transport.CntRoceAdpRetrans: 3, transport.CntLocalAckTimeoutErr: 3,
		transport.CntRetryExceededErr: 1, transport.CntCompleterRetryErr: 6, transport.CntRoceTailProbe: 1})
}

// TestTimeoutsDropWindow: with nothing measured the RTO is the local ACK timeout. The
// first timeout cuts the window as a loss (128 → 89) and go-back-N resends what was
// outstanding; a second without any answer in between drops it to one packet (the
// ACK clock is lost), asking for an ACK on every packet; the answers then open it in
// slow start (one packet per PSN acknowledged) towards ssthresh 89. With no sample
// before, the first answer is timed from the last departure of the PSN it answers;
// after it, Karn's rule holds: no sample from the PSNs sent before the timeouts.
func TestTimeoutsDropWindow(t *testing.T) {
	r := newRaw(t, 0, 500, pairConfig{timeout: 12})
	qp := r.e.qp
	r.write(10 * 1024)
	expectRun(t, "write", r.step(), 0, 10, 9)
	expectRun(t, "first timeout", r.advance(), 0, 10, 9)
	wantWindow(t, "after the first timeout", qp.CongestionState(), 89, 89)
	left := r.e.dev.NextDeadline()
	expectRun(t, "second timeout", r.advance(), 0, 1, 0)
	wantWindow(t, "after the second timeout", qp.CongestionState(), 1, 89)
	r.clock.Set(left.Add(41 * time.Microsecond))
	r.send(ack(0, roce.SyndromeACK, 0))
	expectRun(t, "slow start, 2", r.step(), 1, 2, 1, 2)
	wantWindow(t, "after one PSN acknowledged", qp.CongestionState(), 2, 89)
	r.send(ack(2, roce.SyndromeACK, 0))
	expectRun(t, "slow start, 4", r.step(), 3, 4, 4, 6)
	r.send(ack(6, roce.SyndromeACK, 0))
	expectRun(t, "slow start, 8: the rest of the message", r.step(), 7, 3, 9)
	wantWindow(t, "after 7 PSNs acknowledged", qp.CongestionState(), 8, 89)
	r.send(ack(9, roce.SyndromeACK, 1))
	r.step()
	if wcs := r.wcs(); len(wcs) != 1 || wcs[0].Status != transport.WC_SUCCESS {
		t.Fatalf("completions %+v", wcs)
	}
	wantCounters(t, "at the end", qp.Counters(), map[int]uint64{transport.CntLocalAckTimeoutErr: 2, transport.CntRoceAdpRetrans: 0})
	checkRTT(t, "one sample, from the first answer", qp.CongestionState(), 41*time.Microsecond, 20500*time.Nanosecond, transport.MinRTO)
}

// gateLink refuses every frame while closed, as a full TX ring does.
type gateLink struct {
	transport.Link
	closed bool
}

func (g *gateLink) Send(frames [][]byte) (int, error) {
	if g.closed {
		return 0, nil
	}
	return g.Link.Send(frames)
}

// TestTimerStartsWhenPacketLeaves: a packet the link refuses for 10 ms (a full TX
// ring, a slow host) waits in the engine; the retransmit timer starts when the link
// takes it, not when it was built, so the local ACK timeout (16.777216 ms, timeout
// 12) runs from then.
func TestTimerStartsWhenPacketLeaves(t *testing.T) {
	var g *gateLink
	r := newRawLink(t, 0, 500, pairConfig{timeout: 12}, func(l transport.Link) transport.Link {
		g = &gateLink{Link: l, closed: true}
		return g
	})
	d := r.e.dev
	r.write(100)
	built := r.clock.Now()
	progress(t, d)
	for r.clock.Now().Sub(built) < 10*time.Millisecond {
		next := d.NextDeadline()
		if next.Sub(r.clock.Now()) > time.Millisecond {
			t.Fatalf("a deadline %v ahead while the link refuses the packet: a retransmit timer runs", next.Sub(r.clock.Now()))
		}
		r.clock.Set(next)
		progress(t, d)
	}
	if n := r.end.Pending(); n != 0 {
		t.Fatalf("%d frames passed the closed gate", n)
	}
	g.closed = false
	r.clock.Set(d.NextDeadline())
	left := r.clock.Now()
	progress(t, d)
	expectRun(t, "the packet, once the link takes it", r.step(), 0, 1, 0)
	if due := d.NextDeadline().Sub(left); due != 16777216*time.Nanosecond {
		t.Fatalf("retransmit timer due %v after the packet left (%v after it was built), want 16.777216ms", due, d.NextDeadline().Sub(built))
	}
	expectRun(t, "the retransmission", r.advance(), 0, 1, 0)
	wantCounters(t, "at the end", r.e.qp.Counters(), map[int]uint64{transport.CntLocalAckTimeoutErr: 1})
}

// TestSlowRestartAfterIdle: a QP whose window a loss has cut (128 → 89) and that then
// sends nothing for longer than the RTO (half a second here) restarts at the restart
// window, 4 packets at path MTU 1024 (RFC 3390's initial window), and slow-starts
// back towards ssthresh 89; roce_slow_restart counts it. After more than a second
// without a loss the QP is no longer lossy and gets the fixed window of 128 back; a
// QP that never saw a loss keeps it after any idle time.
func TestSlowRestartAfterIdle(t *testing.T) {
	r := newRaw(t, 0, 500, pairConfig{bufSize: 1 << 20})
	qp := r.e.qp
	r.write(3 * 1024)
	expectRun(t, "write", r.step(), 0, 3, 2)
	r.send(ack(1, roce.SyndromeNAKPSNSequenceError, 0))
	expectRun(t, "go-back-N", r.step(), 1, 2, 2)
	r.send(ack(2, roce.SyndromeACK, 1))
	r.step()
	r.wcs()
	wantWindow(t, "after the loss", qp.CongestionState(), 89, 89)
	r.clock.Advance(500 * time.Millisecond)
	r.write(20 * 1024)
	expectRun(t, "after idle", r.step(), 3, 4, 4, 6)
	wantWindow(t, "restarted", qp.CongestionState(), 4, 89)
	wantCounters(t, "restarted", qp.Counters(), map[int]uint64{transport.CntRoceSlowRestart: 1})
	r.send(ack(4, roce.SyndromeACK, 1))
	expectRun(t, "slow start", r.step(), 7, 4, 9, 10) // 10 fills the window of 6 from PSN 5
	wantWindow(t, "slow start", qp.CongestionState(), 6, 89)
	r.send(ack(10, roce.SyndromeACK, 1)) // 6 PSNs acknowledged: 6 + 6 = 12
	expectRun(t, "the rest", r.step(), 11, 12, 16, 22)
	wantWindow(t, "slow start", qp.CongestionState(), 12, 89)
	r.send(ack(22, roce.SyndromeACK, 2))
	r.step()
	r.clock.Advance(1500 * time.Millisecond) // 2 s after the loss
	r.write(200 * 1024)
	expectRun(t, "no longer lossy", r.step(), 23, 128, 86, 150)
	wantWindow(t, "no longer lossy", qp.CongestionState(), 128, 128)
	wantCounters(t, "no longer lossy", qp.Counters(), map[int]uint64{transport.CntRoceSlowRestart: 1})

	r = newRaw(t, 0, 500, pairConfig{bufSize: 1 << 20})
	r.write(3 * 1024)
	expectRun(t, "write", r.step(), 0, 3, 2)
	r.send(ack(2, roce.SyndromeACK, 1))
	r.step()
	r.clock.Advance(time.Second)
	r.write(200 * 1024)
	expectRun(t, "after idle, never a loss", r.step(), 3, 128, 66, 130)
	wantCounters(t, "never a loss", r.e.qp.Counters(), map[int]uint64{transport.CntRoceSlowRestart: 0})
}

// TestStaleStreamTailLost: after an implied NAK the responder streams the rest of
// what was asked before, a packet every 100 µs, and the stream's last packets are
// lost, as is the request asked again. Four mean spacings (400 µs and the harness's
// step) after the last packet that came, the requester asks again from the gap: the
// wait is the stream's pacing, not the local ACK timeout (67 ms at perftest's
// timeout 14, which under 5 % loss took most of a READ run's time).
func TestStaleStreamTailLost(t *testing.T) {
	r := newRaw(t, 100, 500, pairConfig{timeout: 14})
	const n = 40
	src := make([]byte, n*1024)
	fill(src, 22)
	must(t, postSend(r.e, transport.SendWR{WRID: 9, Opcode: transport.WR_RDMA_READ, SGList: sge(r.e, 0, len(src)),
		Flags: transport.SendSignaled, RemoteAddr: 0x5000, RKey: 0x1234}))
	expectRun(t, "read request", r.step(), 100, 1, 100)
	resp := func(i int) { r.readResponse(src, 100, i, n) }
	r.clock.Advance(100 * time.Microsecond)
	resp(0)
	resp(1) // 2 is lost
	resp(3)
	gapAt := r.clock.Now()
	expectRun(t, "asked again from the gap", r.step(), 102, 1, 102) // and this request is lost
	last := 30                                                      // 31 to 39, the stream's tail, are lost
	var lastAt time.Time
	for i := 4; i <= last; i++ {
		r.clock.Advance(100 * time.Microsecond)
		resp(i)
		lastAt = r.clock.Now()
		if out := r.step(); len(out) != 0 {
			t.Fatalf("after response %d: sent %v while the stream is still coming", i, summary(out))
		}
	}
	wait := 4 * lastAt.Sub(gapAt) / time.Duration(last-3) // 4 × (100 µs and the step's microsecond)
	if due := r.e.dev.NextDeadline().Sub(lastAt); due != wait {
		t.Fatalf("timer due %v after the stream's last packet, want four mean spacings, %v", due, wait)
	}
	r.clock.Set(lastAt.Add(wait))
	r.readAskedAgain("after the silence", r.step(), src)
}

// TestImpliedNAKWindowAndStaleStream: a gap in a READ's responses (an implied NAK)
// cuts the window like a NAK. While the responder still streams what was asked
// before, the adaptive timer waits four of the stream's mean packet spacings after
// each packet, and only the local ACK timeout runs before its first packet (an
// RTO-timed re-request would only queue another copy behind the stream); once the
// last PSN of that stream has arrived the adaptive timer runs from the RTO again,
// and a re-request that was lost is asked again one RTO later rather than one local
// ACK timeout.
func TestImpliedNAKWindowAndStaleStream(t *testing.T) {
	r := newRaw(t, 100, 500, pairConfig{timeout: 10})
	qp := r.e.qp
	const n = 40
	src := make([]byte, n*1024)
	fill(src, 21)
	must(t, postSend(r.e, transport.SendWR{WRID: 9, Opcode: transport.WR_RDMA_READ, SGList: sge(r.e, 0, len(src)),
		Flags: transport.SendSignaled, RemoteAddr: 0x5000, RKey: 0x1234}))
	left := r.clock.Now()
	expectRun(t, "read request", r.step(), 100, 1, 100)
	resp := func(i int) { r.readResponse(src, 100, i, n) }
	r.clock.Set(left.Add(100 * time.Microsecond))
	resp(0) // the first response: an RTT sample of 100 µs
	resp(1) // 2 is lost
	resp(3)
	at := r.clock.Now()
	gapAt := at
	expectRun(t, "asked again from the gap", r.step(), 102, 1, 102)
	wantWindow(t, "after the implied NAK", qp.CongestionState(), 89, 89)
	checkRTT(t, "after the implied NAK", qp.CongestionState(), 100*time.Microsecond, 50*time.Microsecond, 300*time.Microsecond)
	if due := r.e.dev.NextDeadline().Sub(at); due != 4194304*time.Nanosecond {
		t.Fatalf("timer due %v after the gap, want only the local ACK timeout 4.194304ms", due)
	}
	for i := 4; i < n; i++ { // the rest of the stream asked before, a packet every 500 µs
		r.clock.Advance(500 * time.Microsecond)
		resp(i)
		at = r.clock.Now()
		if out := r.step(); len(out) != 0 {
			t.Fatalf("after response %d: sent %v while the stream is still coming", i, summary(out))
		}
		want := 4 * at.Sub(gapAt) / time.Duration(i-3) // 4 × 500 µs and the step's microseconds
		if i == n-1 {
			want = 300 * time.Microsecond // the stream has ended: the RTO runs again
		}
		if due := r.e.dev.NextDeadline().Sub(at); due != want {
			t.Fatalf("after response %d: timer due %v, want %v", i, due, want)
		}
	}
	r.readAskedAgain("one RTO after the stream ended", r.advance(), src)
}

// readAskedAgain checks that out asks again for the n-packet READ of src (WR 9,
// first response PSN 100) from its lost packet 2 on the adaptive timer (one
// implied NAK, no local ACK timeout), answers it, and checks the READ's completion
// and data.
func (r *raw) readAskedAgain(what string, out []roce.Packet, src []byte) {
	t := r.t
	t.Helper()
	expectRun(t, "asked again "+what, out, 102, 1, 102)
	wantCounters(t, "asked again", r.e.qp.Counters(), map[int]uint64{transport.CntImpliedNak: 1, transport.CntRoceAdpRetrans: 1,
		transport.CntLocalAckTimeoutErr: 0})
	n := len(src) / 1024
	for i := 2; i < n; i++ {
		r.readResponse(src, 100, i, n)
	}
	r.step()
	wcs := r.wcs()
	if len(wcs) != 1 {
		t.Fatalf("completions %+v", wcs)
	}
	checkWC(t, wcs[0], 9, transport.WC_SUCCESS, transport.WC_RDMA_READ, len(src))
	checkBytes(t, "read data", r.e.buf[:len(src)], src)
}

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
