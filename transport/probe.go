package transport

import (
	"time"

	"github.com/xroce/xroce/roce"
)

// The tail-loss probe (after RFC 8985 §7, TCP's TLP), for SEND and RDMA WRITE.
//
// Under random loss a flight can end in silence that no NAK reports, and go-back-N
// then waited the adaptive RTO (200 µs at least) and sent the whole flight again.
// The silence has four causes: the flight's last packet (the one with AckReq) was
// lost; the ACK for it was; every packet after a gap was, so nothing drew a NAK; or
// the responder NAKed a gap and that NAK, or the first packet sent again after it,
// was lost — then the responder drops everything until the missing PSN comes
// (IBTA Vol 1 §9.7.5.1.1, rxe_resp.c's check_psn), and that PSN is the oldest
// unacknowledged one unless a coalesced ACK is still owed. The probe sends the
// oldest unacknowledged packet and the flight's last packet again, each with
// AckReq, about two round trips after the responder last answered (PTO = 2 SRTT +
// G, only when that is earlier than the RTO). To the responder they are ordinary
// packets: in sequence one is executed and ACKed; a duplicate is ACKed with the
// responder's latest PSN (C9-105, rxe_resp.c's duplicate_request); beyond a gap not
// yet NAKed it draws the NAK PSN sequence error. Each answer moves the requester on
// about one round trip later instead of an RTO.
//
// One probe per flight: the next needs an acknowledgement of new data or a NAK PSN
// sequence error, so a responder answering only with duplicates cannot keep the RTO
// from firing, and a silent one gets no probe between RTOs (RFC 8985 §7.2: no probe
// in RTO recovery). Like the adaptive RTO it runs only while the QP or another QP
// to its peer is lossy (peerpath.go), never while a READ's old answer streams, and
// a clean link never sees a probe.

// armProbe starts the probe timer when it may run and would come before the RTO.
func (r *requester) armProbe(now time.Time, ackTimeout time.Duration) {
	if !r.probeAt.IsZero() || r.probed || !r.rtt.sampled || r.readGap || !r.adaptive(now) {
		return
	}
	pto := 2*r.rtt.srtt + rtoGranularity
	if pto < r.rto(ackTimeout) {
		r.probeAt = now.Add(pto)
	}
}

// tailProbe sends the oldest unacknowledged packet and the last packet of the
// flight again, each with AckReq, where they are SEND or RDMA WRITE packets (a READ
// or atomic asked again is the RTO's: the responder would answer it whole).
func (r *requester) tailProbe(qp *QueuePair) {
	r.probeAt, r.probed = timeZero, true
	last, ok := r.flightLast(qp)
	if !ok {
		return
	}
	sent := r.probe(qp, r.compPSN)
	if last != r.compPSN && r.probe(qp, last) {
		sent = true
	}
	if sent {
		qp.count(CntRoceTailProbe)
	}
}

// probe sends the SEND or RDMA WRITE packet with PSN psn again, with AckReq, and
// reports whether it did.
func (r *requester) probe(qp *QueuePair, psn uint32) bool {
	i := r.find(qp, psn)
	if i < 0 {
		return false
	}
	w := *qp.sq.at(i)
	if w.wr.Opcode.isReadOrAtomic() {
		return false
	}
	k := int(roce.PSNDiff(psn, w.firstPSN))
	op := dataOpcode(w.wr.Opcode, k, w.npkts)
	p := qp.dev.start(qp, op, psn)
	qp.dev.fillData(p, qp, w, k, op)
	p.BTH.AckReq = true
	r.emit(qp, psn)
	return true
}

// flightLast returns the PSN of the last packet sent since the oldest
// unacknowledged one (after a go-back: of the packets sent again), and false when
// none is outstanding.
func (r *requester) flightLast(qp *QueuePair) (uint32, bool) {
	next := r.psn // one past the last PSN assigned
	if r.next < qp.sq.len() {
		w := *qp.sq.at(r.next)
		if w.assigned && w.wr.Opcode.isReadOrAtomic() {
			return 0, false // its sent counts segments or the request, not packets
		}
		if w.assigned {
			next = roce.PSNAdd(w.firstPSN, w.sent)
		}
	}
	if roce.PSNDiff(next, r.compPSN) <= 0 {
		return 0, false
	}
	return roce.PSNAdd(next, -1), true
}
