package transport_test

import (
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// Several QPs of one device towards one peer (docs/congestion.md, "Many QPs after a
// loss"): the queueing signal, the retransmit timers, AckReq at the end of a turn,
// idle restarts and spurious RTOs.

// sibling creates a second RC QP on the raw harness's engine, connected to the same
// peer address (remote QPN rawQPN+1), its requester starting at sqPSN.
func (r *raw) sibling(c pairConfig, sqPSN uint32) *transport.QueuePair {
	r.t.Helper()
	qp, err := r.e.pd.CreateQP(transport.QPInitAttr{SendCQ: r.e.cq, RecvCQ: r.e.cq,
		Cap: transport.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 1, MaxRecvSGE: 1}})
	must(r.t, err)
	must(r.t, transport.BringUp(qp, transport.QPS_RESET, transport.QPS_RTS,
		defaults(c).connectParams(addrB, roce.MTU1024, rawQPN+1, sqPSN, 0)))
	return qp
}

// writes posts n unsignaled WRITEs of size bytes on qp from the harness's buffer.
func (r *raw) writes(qp *transport.QueuePair, n, size int) {
	r.t.Helper()
	for range n {
		_, err := qp.PostSend(transport.SendWR{Opcode: transport.WR_RDMA_WRITE, SGList: sge(r.e, 0, size),
			RemoteAddr: 0x10000, RKey: 0x77})
		must(r.t, err)
	}
}

// ackTo sends qp an ACK of every PSN up to psn.
func (r *raw) ackTo(qp *transport.QueuePair, psn uint32) {
	op, psn, fill := ack(psn, roce.SyndromeACK, 0)
	r.send(op, psn, func(p *roce.Packet) { fill(p); p.BTH.DestQP = qp.QPN() })
}

// byQP splits packets by destination QPN, counting each QP's packets and listing the
// PSNs that carry AckReq.
func byQP(ps []roce.Packet) (n map[uint32]int, ackReq map[uint32][]uint32) {
	n, ackReq = map[uint32]int{}, map[uint32][]uint32{}
	for _, p := range ps {
		n[p.BTH.DestQP]++
		if p.BTH.AckReq {
			ackReq[p.BTH.DestQP] = append(ackReq[p.BTH.DestQP], p.BTH.PSN)
		}
	}
	return n, ackReq
}

// TestQueueSignalShare: a lossy QP's RTT samples far above its target cut its window
// only when it has at least the mean of its siblings' PSNs in flight towards the same
// peer (queueing.go). With a sibling that never lost a packet holding 128 PSNs in
// flight, a 5 ms sample leaves the window at 89; alone on the path, the same sample
// halves it (89 → 44), as TestQueueingDelayCutsWindow has it.
func TestQueueSignalShare(t *testing.T) {
	c := pairConfig{timeout: 14}
	r := newRaw(t, 10, 500, c)
	qp := r.e.qp
	r.writeAnswered(10, 100*time.Microsecond) // the smallest RTT: the target is 600 µs
	r.lose(11)
	wantWindow(t, "after the NAK", qp.CongestionState(), 89, 89)
	sib := r.sibling(c, 1000)
	r.writes(sib, 2, 1<<16)
	n, _ := byQP(r.step())
	if n[rawQPN+1] != 128 || len(n) != 1 {
		t.Fatalf("the sibling sent %v, want 128 packets to 0x%x", n, rawQPN+1)
	}
	r.writeAnswered(13, 5*time.Millisecond)
	wantWindow(t, "a 5 ms sample beside a sibling with 128 in flight", qp.CongestionState(), 89, 89)
	r.ackTo(sib, 1127)
	if out := r.step(); len(out) != 0 {
		t.Fatalf("sent %v after the sibling's ACK", summary(out))
	}
	r.writeAnswered(14, 5*time.Millisecond)
	wantWindow(t, "a 5 ms sample alone on the path", qp.CongestionState(), 44, 44)
	if !qp.CongestionState().Lossy || sib.CongestionState().Lossy {
		t.Fatalf("lossy: QP %v, sibling %v; want true, false", qp.CongestionState().Lossy, sib.CongestionState().Lossy)
	}
}

// TestTimersOnlyWhilePSNsInFlight: the retransmit timers run only while PSNs are in
// flight (requester.awaiting, as rxe_comp.c re-arms its timer only while req.psn is
// past comp.psn). A lossy QP (RTO 300 µs) paced by DCQCN at about 5 Mb/s sends a
// burst of 16 of its 20 packets; an ACK of all 16 leaves nothing in flight while the
// rest of the WRITE waits 1.5 ms for the pacer. No adaptive RTO fires meanwhile: the
// next packet is PSN 19 at the pacer's time, the window still 89, and no go-back.
func TestTimersOnlyWhilePSNsInFlight(t *testing.T) {
	r := newRaw(t, 0, 500, pairConfig{timeout: 14, cc: transport.CCDCQCN, dcqcn: transport.DCQCNParams{MaxRate: 10_000_000},
		bufSize: 1 << 20})
	qp := r.e.qp
	r.writeAnswered(0, 100*time.Microsecond)
	r.lose(1)
	checkRTT(t, "measured", qp.CongestionState(), 100*time.Microsecond, 50*time.Microsecond, 300*time.Microsecond)
	r.sendCNP(qp.QPN())
	r.step()
	r.write(20 * 1024)
	start := r.clock.Now()
	expectRun(t, "the burst", r.step(), 3, 16)
	r.clock.Set(start.Add(100 * time.Microsecond))
	r.send(ack(18, roce.SyndromeACK, 0))
	if out := r.step(); len(out) != 0 {
		t.Fatalf("sent %v after the ACK, before the pacer's time", summary(out))
	}
	var out []roce.Packet
	for len(out) == 0 && r.clock.Now().Sub(start) < 5*time.Millisecond {
		out = r.advance() // DCQCN's increase timer, then the pacer's time
	}
	if at := r.clock.Now().Sub(start); at < time.Millisecond {
		t.Fatalf("sent %v %v after the burst: a retransmit timer ran with nothing in flight", summary(out), at)
	}
	expectRun(t, "the paced packet", out, 19, 1)
	wantWindow(t, "after the wait", qp.CongestionState(), 89, 89)
	wantCounters(t, "after the wait", qp.Counters(), map[int]uint64{transport.CntRoceAdpRetrans: 0,
		transport.CntCompleterRetryErr: 1, transport.CntRoceTailProbe: 0}) // the go-back of lose()
}

// TestTurnEndAsksForACK: a QP whose turn ends with the pass's transmit budget asks
// for an ACK on its last packet (sendData's pause), since its next turn may come
// only after the other ready QPs have had theirs. The harness's QP, ready first,
// sends its 100-packet WRITE (AckReq on the 64th and the last); the sibling gets the
// 28 packets left of the budget of 128, the last with AckReq, where its window (ACK
// every 64) would ask for none.
func TestTurnEndAsksForACK(t *testing.T) {
	c := pairConfig{timeout: 14, bufSize: 1 << 20}
	r := newRaw(t, 0, 500, c)
	sib := r.sibling(c, 1000)
	r.writes(sib, 1, 100*1024)
	r.writes(r.e.qp, 1, 100*1024)
	progress(t, r.e.dev)
	n, ackReq := byQP(r.sent())
	if n[rawQPN] != 100 || n[rawQPN+1] != 28 {
		t.Fatalf("one pass sent %v packets, want 100 to 0x%x and 28 to the sibling's peer 0x%x", n, rawQPN, rawQPN+1)
	}
	if got := ackReq[rawQPN]; len(got) != 2 || got[0] != 63 || got[1] != 99 {
		t.Errorf("the QP's AckReq on %v, want 63 and 99", got)
	}
	if got := ackReq[rawQPN+1]; len(got) != 1 || got[0] != 1027 {
		t.Errorf("the sibling's AckReq on %v, want 1027 (its turn's last packet)", got)
	}
}

// TestWaitingForTurnIsNotIdle: a lossy QP whose next WRITE was queued while its
// previous one was answered is not idle while it waits for its turn, however long
// the other ready QPs keep it waiting: no slow restart (roce_slow_restart), its
// window stays 89. The sibling takes the pass's whole budget; the pass after runs a
// millisecond later (more than the QP's RTO of 300 µs) and the QP sends first.
func TestWaitingForTurnIsNotIdle(t *testing.T) {
	c := pairConfig{timeout: 14, bufSize: 1 << 20}
	r := newRaw(t, 0, 500, c)
	qp := r.e.qp
	r.writeAnswered(0, 100*time.Microsecond)
	r.lose(1)
	sib := r.sibling(c, 1000)
	r.write(2 * 1024)
	expectRun(t, "WRITE", r.step(), 3, 2, 4)
	r.writes(sib, 1, 200*1024)
	r.writes(qp, 1, 2*1024)
	r.clock.Advance(100 * time.Microsecond)
	r.send(ack(4, roce.SyndromeACK, 0))
	progress(t, r.e.dev)
	if n, _ := byQP(r.sent()); n[rawQPN+1] != 128 || len(n) != 1 {
		t.Fatalf("the pass with the ACK sent %v, want the sibling's 128", n)
	}
	r.clock.Advance(time.Millisecond)
	progress(t, r.e.dev)
	n, _ := byQP(r.sent())
	if n[rawQPN] != 2 {
		t.Fatalf("the next pass sent %v, want the QP's 2 packets", n)
	}
	wantWindow(t, "after waiting for its turn", qp.CongestionState(), 89, 89)
	wantCounters(t, "after waiting for its turn", qp.Counters(), map[int]uint64{transport.CntRoceSlowRestart: 0})
}

// spuriousSetup makes the QP lossy (RTO 303 µs, smallest RTT 101 µs), sends an
// n-packet WRITE from PSN 13 at the returned time and lets the tail probe (13 and the
// last packet again, at 212 µs) and then the adaptive RTO (at 303 µs) fire: the RTO
// cuts the window to 62 and sends the oldest packet, 13, alone with AckReq.
func spuriousSetup(t *testing.T, n int) (*raw, time.Time) {
	r := newRaw(t, 10, 500, pairConfig{timeout: 14})
	qp := r.e.qp
	r.writeAnswered(10, 101*time.Microsecond)
	r.lose(11)
	r.write(n * 1024)
	left := r.clock.Now()
	last := uint32(13 + n - 1)
	expectRun(t, "the WRITE", r.step(), 13, n, last)
	probe := []any{roce.RC_RDMA_WRITE_FIRST, 13, roce.RC_RDMA_WRITE_LAST, int(last)}
	if n == 1 {
		probe = []any{roce.RC_RDMA_WRITE_ONLY, 13}
	}
	expect(t, "tail probe", r.advance(), probe...)
	if at := r.e.dev.NextDeadline().Sub(left); at != 303*time.Microsecond {
		t.Fatalf("RTO due %v after the WRITE, want 303µs", at)
	}
	expectRun(t, "RTO: the oldest packet alone", r.advance(), 13, 1, 13)
	wantWindow(t, "after the RTO", qp.CongestionState(), 62, 62)
	return r, left
}

// TestSpuriousRTOUndone: the first answer after an adaptive RTO tells whether it was
// spurious (spurious.go). A four-packet WRITE (13-16): an ACK of 16, which covers
// every PSN sent before the RTO and last left (in the probe) before it, shows that
// the originals arrived: the window is 89 again, roce_adp_retrans_spurious counts it,
// the RTT estimate takes the late answer's 188 µs (SRTT 188 µs, RTTVAR 94 µs, RTO
// 564 µs), and nothing is sent again. An ACK of 15 says nothing about 16: the cut
// stays and go-back-N sends 16; an ACK of 13 147 µs after its copy (more than the
// smallest RTT) answers the copy: the cut stays, 14-16 go again. A one-packet WRITE
// whose ACK comes 47 µs after the copy (less than the smallest RTT of 101 µs) can
// only answer the original: undone.
func TestSpuriousRTOUndone(t *testing.T) {
	const us = time.Microsecond
	for _, c := range []struct {
		what         string
		n            int           // packets of the WRITE
		at           time.Duration // when the ACK comes, after the WRITE left
		psn          uint32        // the PSN it acknowledges
		resent       int           // packets sent after it, the last of the WRITE's included
		cwnd         int
		spurious     uint64
		srtt, rttvar time.Duration
		rto          time.Duration
	}{
		{"an ACK of 16, the last PSN sent before the RTO", 4, 400 * us, 16, 0, 89, 1, 188 * us, 94 * us, 564 * us},
		{"an ACK of 15, 16 not acknowledged", 4, 400 * us, 15, 1, 62, 0, 101 * us, 50500 * time.Nanosecond, 303 * us},
		{"an ACK of 13, 147 µs after its copy", 4, 450 * us, 13, 3, 62, 0, 101 * us, 50500 * time.Nanosecond, 303 * us},
		{"a one-packet WRITE's ACK, 47 µs after its copy", 1, 350 * us, 13, 0, 89, 1, 101 * us, 50500 * time.Nanosecond, 303 * us},
	} {
		r, left := spuriousSetup(t, c.n)
		qp := r.e.qp
		r.clock.Set(left.Add(c.at))
		r.send(ack(c.psn, roce.SyndromeACK, 0))
		out := r.step()
		if last := uint32(13 + c.n - 1); c.resent > 0 {
			expectRun(t, c.what, out, last-uint32(c.resent)+1, c.resent, last)
		} else if len(out) != 0 {
			t.Fatalf("%s: sent %v", c.what, summary(out))
		}
		cs := qp.CongestionState()
		wantWindow(t, c.what, cs, c.cwnd, c.cwnd)
		checkRTT(t, c.what, cs, c.srtt, c.rttvar, c.rto)
		wantCounters(t, c.what, qp.Counters(), map[int]uint64{transport.CntRoceAdpRetrans: 1,
			transport.CntRoceAdpRetransSpurious: c.spurious})
		if !cs.Lossy {
			t.Fatalf("%s: not lossy: the NAK of lose() is still its last loss", c.what)
		}
	}
}

// TestPathLossArmsSiblings: a loss signal at one QP turns on the tail probe and the
// adaptive RTO of the device's other QPs to the same peer (peerpath.go), which then
// move a silent flight on in about two round trips instead of the local ACK
// timeout; the window rules stay the QP's own. The sibling, with RTT samples of
// 100 µs, waits the full local ACK timeout (67.108864 ms at timeout 14) for a
// silent flight while the path is clean. When the harness's QP meets a NAK PSN
// sequence error, the sibling's flight already out gets its probe 2 SRTT + 10 µs
// after the NAK (armPath: a full window sends nothing that would start the
// timer); the answer to the probe ends it. Its next silent flight gets the probe
// 2 SRTT + 10 µs after it left, its window still 128, and then the adaptive RTO
// (the oldest packet alone), which makes the sibling lossy itself; no local ACK
// timeout.
func TestPathLossArmsSiblings(t *testing.T) {
	c := pairConfig{timeout: 14}
	r := newRaw(t, 10, 500, c)
	sib := r.sibling(c, 1000)
	silent := func(what string, first uint32) time.Time {
		t.Helper()
		r.writes(sib, 1, 2048)
		left := r.clock.Now()
		expectRun(t, what, r.step(), first, 2, first+1)
		return left
	}
	answer := func(at time.Time, psn uint32) {
		t.Helper()
		r.clock.Set(at)
		r.ackTo(sib, psn)
		if out := r.step(); len(out) != 0 {
			t.Fatalf("sent %v after the ACK of %d", summary(out), psn)
		}
	}
	left := silent("the sibling's first WRITE", 1000)
	answer(left.Add(100*time.Microsecond), 1001)
	left = silent("a flight on a clean path", 1002)
	if d := r.e.dev.NextDeadline().Sub(left); d != 67108864*time.Nanosecond {
		t.Fatalf("clean path: the next timer is due %v after the flight left, want the local ACK timeout 67.108864ms", d)
	}
	answer(left.Add(100*time.Microsecond), 1003)
	cs := sib.CongestionState()
	if cs.Lossy || cs.PathLossy {
		t.Fatalf("on the clean path: the sibling lossy %v, path lossy %v; want false, false", cs.Lossy, cs.PathLossy)
	}
	pto := 2*cs.SRTT + 10*time.Microsecond

	silent("a flight out when the path turns lossy", 1004)
	r.writeAnswered(10, 100*time.Microsecond)
	r.write(2 * 1024)
	expectRun(t, "the harness QP's WRITE", r.step(), 11, 2, 12)
	nak := r.clock.Now()
	r.send(ack(12, roce.SyndromeNAKPSNSequenceError, 0))
	expectRun(t, "the harness QP's go-back", r.step(), 12, 1, 12)
	r.send(ack(12, roce.SyndromeACK, 0))
	r.step()
	if cs := sib.CongestionState(); cs.Lossy || !cs.PathLossy {
		t.Fatalf("after the NAK of its sibling: the sibling lossy %v, path lossy %v; want false, true", cs.Lossy, cs.PathLossy)
	}
	if d := r.e.dev.NextDeadline().Sub(nak); d != pto {
		t.Fatalf("the sibling's probe is due %v after the NAK, want %v (SRTT %v)", d, pto, cs.SRTT)
	}
	out := r.advance()
	expectRun(t, "the probe of the flight already out", out, 1004, 2, 1004, 1005)
	answer(r.clock.Now().Add(100*time.Microsecond), 1005)

	cs = sib.CongestionState()
	left = silent("a flight on the lossy path", 1006)
	if d, want := r.e.dev.NextDeadline().Sub(left), 2*cs.SRTT+10*time.Microsecond; d != want {
		t.Fatalf("lossy path: the probe is due %v after the flight left, want %v (SRTT %v)", d, want, cs.SRTT)
	}
	out = r.advance()
	expectRun(t, "the sibling's probe", out, 1006, 2, 1006, 1007)
	if n, _ := byQP(out); n[rawQPN+1] != 2 {
		t.Fatalf("probe went to %v, want the sibling's peer QP 0x%x", n, rawQPN+1)
	}
	if got := sib.CongestionState(); got.Lossy || got.Cwnd != 128 {
		t.Fatalf("after the probe: the sibling lossy %v, window %d; want false and 128", got.Lossy, got.Cwnd)
	}
	if d := r.e.dev.NextDeadline().Sub(left); d != cs.RTO {
		t.Fatalf("the RTO is due %v after the flight left, want %v", d, cs.RTO)
	}
	expectRun(t, "the sibling's RTO: the oldest packet alone", r.advance(), 1006, 1, 1006)
	if !sib.CongestionState().Lossy {
		t.Fatal("its own RTO did not make the sibling lossy")
	}
	wantCounters(t, "the sibling", sib.Counters(), map[int]uint64{transport.CntRoceTailProbe: 2,
		transport.CntRoceAdpRetrans: 1, transport.CntLocalAckTimeoutErr: 0, transport.CntCompleterRetryErr: 1, // the RTO's go-back
		transport.CntSentPkts: 13})
}

// TestSharedStart: a QP whose first work goes out while the device's other QPs to
// the same peer have a full window in flight starts at the restart window in slow
// start (peerpath.go's sharedStart); one that starts beside less takes the full
// window at once. With the harness's QP holding 128 PSNs in flight, a sibling's
// 100-packet WRITE (PMTU 1024) sends 4 packets (AckReq on 1001 and 1003), and their
// ACK opens 8 more (1004-1011, AckReq on 1007 and 1011). Once the harness's QP is
// acknowledged, a third QP sends its whole 100-packet WRITE in one pass (AckReq on
// 2063 and 2099).
func TestSharedStart(t *testing.T) {
	c := pairConfig{timeout: 14, bufSize: 1 << 20}
	r := newRaw(t, 0, 500, c)
	r.writes(r.e.qp, 2, 64*1024)
	expectRun(t, "the harness QP's window", r.step(), 0, 128, 63, 127)
	sib := r.sibling(c, 1000)
	r.writes(sib, 1, 100*1024)
	expectRun(t, "the sibling's first flight", r.step(), 1000, 4, 1001, 1003)
	wantWindow(t, "the sibling at its start", sib.CongestionState(), 4, 128)
	r.ackTo(sib, 1003)
	expectRun(t, "the sibling's second flight", r.step(), 1004, 8, 1007, 1011)
	wantWindow(t, "the sibling after one round trip", sib.CongestionState(), 8, 128)

	r.send(ack(127, roce.SyndromeACK, 0))
	r.step()
	third := r.sibling(c, 2000)
	r.writes(third, 1, 100*1024)
	expectRun(t, "the third QP, beside 8 PSNs in flight", r.step(), 2000, 100, 2063, 2099)
	wantWindow(t, "the third QP", third.CongestionState(), 128, 128)
}
