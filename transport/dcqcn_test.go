package transport_test

import (
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// Tests of DCQCN (cnp.go, dcqcn.go, pacer.go; docs/congestion.md "DCQCN") with a
// hand-driven peer on the fake clock.

// writeCE injects a one-packet WRITE of 100 bytes (PSN psn, AckReq) to the engine's
// buffer with the IP header's ECN field set to ecn.
func (r *raw) writeCE(psn uint32, ecn roce.ECN) {
	r.t.Helper()
	r.send(roce.RC_RDMA_WRITE_ONLY, psn, func(p *roce.Packet) {
		p.IPv4.TOS = uint8(ecn)
		p.BTH.AckReq = true
		p.RETH = roce.RETH{VA: r.e.mr.Addr(), RKey: r.e.mr.RKey(), DMALen: 100}
		p.Payload = make([]byte, 100)
	})
}

// split separates CNPs from the other packets.
func split(ps []roce.Packet) (cnps, others []roce.Packet) {
	for _, p := range ps {
		if p.BTH.Opcode == roce.CNP {
			cnps = append(cnps, p)
		} else {
			others = append(others, p)
		}
	}
	return cnps, others
}

// checkCNP checks a CNP's fields against IBTA Annex A17.9.3 and a ConnectX CNP: BTH
// opcode 0x81, P_Key 0xFFFF, BECN, no FECN, DestQP the engine QP's destination QPN,
// PSN 0, no AckReq, 16 zero reserved bytes, TOS DSCP 48 with ECT(1), and the UDP
// source port of the QP's other packets. Decode has verified its ICRC.
func checkCNP(t *testing.T, c roce.Packet, sport uint16) {
	t.Helper()
	b := c.BTH
	if b.Opcode != roce.CNP || b.PKey != 0xFFFF || !b.BECN || b.FECN || b.DestQP != rawQPN || b.PSN != 0 || b.AckReq ||
		b.SE || b.MigReq || b.PadCnt != 0 || b.Resv6 != 0 || b.Resv7 != 0 || c.CNPReserved != [16]byte{} || len(c.Payload) != 0 {
		t.Fatalf("CNP %+v reserved %x", b, c.CNPReserved)
	}
	if c.IPv4.TOS != 48<<2|1 || c.UDP.SrcPort != sport || c.IPv4.Src != addrA.As4() || c.IPv4.Dst != addrB.As4() {
		t.Fatalf("CNP IP/UDP %+v %+v, want TOS 0xc1 from %v to %v, source port 0x%x", c.IPv4, c.UDP, addrA, addrB, sport)
	}
	if len(c.Frame()) != 14+20+8+12+16+4 {
		t.Fatalf("CNP frame of %d bytes, want 74", len(c.Frame()))
	}
}

// TestCNPForCEMarkedFrame: with DCQCN the engine answers a CE-marked request with
// exactly one CNP to the requester's QP (rawQPN), at most one per QP in 4 µs
// (min_time_between_cnps); marked frames are all counted. Without DCQCN (rdma_rxe's
// behaviour) they are counted and nothing else is sent.
func TestCNPForCEMarkedFrame(t *testing.T) {
	r := newRaw(t, 0, 500, pairConfig{cc: transport.CCDCQCN})
	r.writeCE(500, roce.CE)
	r.writeCE(501, roce.CE) // same engine pass: within the interval
	r.writeCE(502, roce.ECT0)
	cnps, others := split(r.step())
	if len(cnps) != 1 {
		t.Fatalf("%d CNPs for two CE frames in one pass, want 1: %v", len(cnps), summary(cnps))
	}
	expect(t, "the ACK", others, roce.RC_ACKNOWLEDGE, 502)
	checkCNP(t, cnps[0], others[0].UDP.SrcPort)
	wantCounters(t, "first pass", r.e.qp.Counters(), map[int]uint64{transport.CntNpECNMarkedRoCEPackets: 2,
		transport.CntNpCNPSent: 1, transport.CntRcvdPkts: 3})
	// step left the clock 1 µs after that pass: 2 µs more is still within 4 µs.
	r.clock.Advance(2 * time.Microsecond)
	r.writeCE(503, roce.CE)
	if cnps, _ := split(r.step()); len(cnps) != 0 {
		t.Fatalf("a CNP 3 µs after the last: %v", summary(cnps))
	}
	r.clock.Advance(time.Microsecond) // 4 µs after the CNP when the pass runs
	r.writeCE(504, roce.CE)
	cnps, _ = split(r.step())
	if len(cnps) != 1 {
		t.Fatalf("%d CNPs 4 µs after the last, want 1", len(cnps))
	}
	wantCounters(t, "at the end", r.e.dev.Counters(), map[int]uint64{transport.CntNpECNMarkedRoCEPackets: 4,
		transport.CntNpCNPSent: 2, transport.CntRpCNPIgnored: 0})

	none := newRaw(t, 0, 500, pairConfig{})
	none.writeCE(500, roce.CE)
	cnps, others = split(none.step())
	if len(cnps) != 0 || len(others) != 1 {
		t.Fatalf("without DCQCN: CNPs %v, others %v", summary(cnps), summary(others))
	}
	wantCounters(t, "without DCQCN", none.e.qp.Counters(), map[int]uint64{transport.CntNpECNMarkedRoCEPackets: 1,
		transport.CntNpCNPSent: 0})
}

// sendCNP injects a CNP for QPN dqpn.
func (r *raw) sendCNP(dqpn uint32) {
	r.t.Helper()
	r.send(roce.CNP, 0, func(p *roce.Packet) { p.BTH.BECN, p.BTH.DestQP = true, dqpn })
}

func wantRateState(t *testing.T, what string, cs transport.CongestionState, rate, target int64, alpha int) {
	t.Helper()
	if !cs.RateLimited || cs.Rate != rate || cs.TargetRate != target || cs.Alpha != alpha {
		t.Fatalf("%s: limited %v rate %d target %d alpha %d, want %d, %d and %d", what, cs.RateLimited, cs.Rate, cs.TargetRate,
			cs.Alpha, rate, target, alpha)
	}
}

// TestCNPPacesRequester: a CNP cuts the QP's rate from the line rate (here 100 Mb/s)
// by DCQCN's formula, Rc = 10^8 − 10^8·1023/2^11 = 50048829 b/s, and the requester's
// packets then leave at that rate: a burst of 16 KiB (the first 16 frames of a WRITE:
// 1098 + 15 × 1082 bytes), then one frame (1082 bytes, 172.951 µs at Rc) per wake.
// The rate-increase timer fires 300 µs after the cut (fast recovery: 75024415 b/s)
// and the frames after it are spaced at the new rate (115.375 µs).
func TestCNPPacesRequester(t *testing.T) {
	r := newRaw(t, 0, 500, pairConfig{cc: transport.CCDCQCN, dcqcn: transport.DCQCNParams{MaxRate: 100_000_000},
		bufSize: 1 << 20})
	qp := r.e.qp
	cut := r.clock.Now()
	r.sendCNP(qp.QPN())
	if out := r.step(); len(out) != 0 {
		t.Fatalf("sent %v for a CNP", summary(out))
	}
	wantRateState(t, "after the CNP", qp.CongestionState(), 50048829, 100000000, 1023)
	wantCounters(t, "after the CNP", qp.Counters(), map[int]uint64{transport.CntRpCNPHandled: 1, transport.CntRpCNPIgnored: 0})
	r.write(20 * 1024)
	start := r.clock.Now()
	first := r.step()
	expectRun(t, "the burst", first, 0, 16)
	if first[0].IPv4.TOS != 2 {
		t.Fatalf("TOS 0x%02x, want ECT(0)", first[0].IPv4.TOS)
	}
	wake := start.Add(150891 * time.Nanosecond) // −16384 + 1098 + 15 × 1082 bytes at Rc
	for i, want := range []struct {
		at    time.Time
		psn   int // -1: no packet, the increase timer
		rate  int64
		label string
	}{
		{wake, 16, 50048829, "paced frame at the cut rate"},
		{cut.Add(300 * time.Microsecond), -1, 75024415, "increase timer: fast recovery"},
		{wake.Add(172951 * time.Nanosecond), 17, 75024415, "spaced at the old rate, charged at the new"},
		{wake.Add((172951 + 115375) * time.Nanosecond), 18, 75024415, "spaced at the new rate"},
	} {
		if next := r.e.dev.NextDeadline(); !next.Equal(want.at) {
			t.Fatalf("step %d (%s): next deadline %v after the write, want %v", i, want.label, next.Sub(start), want.at.Sub(start))
		}
		out := r.advance()
		if want.psn < 0 {
			if len(out) != 0 {
				t.Fatalf("%s: sent %v", want.label, summary(out))
			}
		} else {
			expectRun(t, want.label, out, uint32(want.psn), 1)
		}
		if cs := qp.CongestionState(); cs.Rate != want.rate {
			t.Fatalf("%s: rate %d, want %d", want.label, cs.Rate, want.rate)
		}
	}
}

// TestCNPIgnored: a CNP for a QPN no QP has, and any CNP to a device without DCQCN,
// is dropped and counted as rp_cnp_ignored (not as rcvd_unknown_qp), and leaves the
// rate alone.
func TestCNPIgnored(t *testing.T) {
	r := newRaw(t, 0, 500, pairConfig{cc: transport.CCDCQCN})
	r.sendCNP(0x123456)
	r.step()
	wantCounters(t, "unknown QPN", r.e.dev.Counters(), map[int]uint64{transport.CntRpCNPIgnored: 1,
		transport.CntRpCNPHandled: 0, transport.CntRcvdUnknownQP: 0})
	none := newRaw(t, 0, 500, pairConfig{})
	none.sendCNP(none.e.qp.QPN())
	none.step()
	wantCounters(t, "without DCQCN", none.e.qp.Counters(), map[int]uint64{transport.CntRpCNPIgnored: 1,
		transport.CntRpCNPHandled: 0})
	for _, x := range []*raw{r, none} {
		if cs := x.e.qp.CongestionState(); cs.RateLimited || cs.Rate != 0 {
			t.Fatalf("an ignored CNP changed the rate: %+v", cs)
		}
	}
}

// TestECNMarking: without DCQCN the engine's packets carry the traffic class as
// rdma_rxe sends it (TOS 0: Not-ECT); with DCQCN they are ECT(0), and a traffic
// class with ECN bits of its own keeps them.
func TestECNMarking(t *testing.T) {
	for _, c := range []struct {
		cc     transport.CongestionControl
		tclass uint8
		tos    uint8
	}{
		{transport.CCNone, 0, 0},
		{transport.CCNone, 0x68, 0x68},
		{transport.CCDCQCN, 0, 0x02},
		{transport.CCDCQCN, 0x68, 0x6a},
		{transport.CCDCQCN, 0x69, 0x69},
	} {
		r := newRaw(t, 0, 500, pairConfig{cc: c.cc, tclass: c.tclass})
		r.write(100)
		out := r.step()
		if len(out) != 1 || out[0].IPv4.TOS != c.tos {
			t.Fatalf("%v, --tclass 0x%02x: %v with TOS 0x%02x, want one packet with 0x%02x", c.cc, c.tclass, summary(out),
				out[0].IPv4.TOS, c.tos)
		}
	}
}

// FuzzCNPInput feeds a DCQCN engine, with a WRITE of its own outstanding, CNPs for
// arbitrary QPNs (its QP's among them), CE-marked and unmarked WRITEs, and clock
// steps in any order. Every CNP is counted exactly once, handled or ignored; every
// CE-marked WRITE is counted; the engine never sends more CNPs than it got marked
// packets, and each one it sends is well formed.
func FuzzCNPInput(f *testing.F) {
	f.Add([]byte{0, 0, 1, 3, 2, 9, 0, 1, 3, 200})
	f.Add([]byte{1, 3, 1, 3, 1, 2, 3, 255, 1, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newRaw(t, 0, 500, pairConfig{cc: transport.CCDCQCN, bufSize: 1 << 20})
		r.write(64 * 1024)
		r.step()
		var cnps, marked, sent uint64
		psn := uint32(500)
		for ; len(data) >= 2; data = data[2:] {
			switch data[0] % 4 {
			case 0:
				qpn := uint32(data[1])
				if data[1]%2 == 0 {
					qpn = r.e.qp.QPN()
				}
				r.sendCNP(qpn)
				cnps++
			case 1:
				ecn := roce.ECN(data[1] & 3)
				r.writeCE(psn, ecn)
				psn++
				if ecn == roce.CE {
					marked++
				}
			case 2:
				r.clock.Advance(time.Duration(data[1]) * time.Microsecond)
			case 3:
				if r.e.dev.NextDeadline().IsZero() {
					continue
				}
				for _, p := range r.advance() {
					if p.BTH.Opcode == roce.CNP {
						sent++
					}
				}
			}
			out, _ := split(r.step())
			for _, c := range out {
				checkCNP(t, c, c.UDP.SrcPort)
			}
			sent += uint64(len(out))
		}
		c := r.e.dev.Counters()
		if h, i := c.Get(transport.CntRpCNPHandled), c.Get(transport.CntRpCNPIgnored); h+i != cnps {
			t.Fatalf("%d CNPs: %d handled, %d ignored", cnps, h, i)
		}
		m := c.Get(transport.CntNpECNMarkedRoCEPackets) // CE frames the QP took: not after it failed
		if m > marked || (r.e.qp.State() == transport.QPS_RTS && m != marked) || c.Get(transport.CntNpCNPSent) != sent || sent > m {
			t.Fatalf("%d marked, %d CNPs sent; counters %v", marked, sent, c)
		}
	})
}
