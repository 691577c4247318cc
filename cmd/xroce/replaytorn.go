package main

import (
	"net/netip"

	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/roce"
)

// completes reports whether an answer of the emulated side finishes what it
// answers: an ACKNOWLEDGE (a coalesced ACK or a NAK, for every PSN up to its own),
// an ATOMIC_ACKNOWLEDGE, or the last packet of a READ response (IBTA Vol 1
// §9.7.5.1: responses come in PSN order).
func completes(op roce.Opcode) bool {
	switch op {
	case roce.RC_ACKNOWLEDGE, roce.RC_ATOMIC_ACKNOWLEDGE, roce.RC_RDMA_READ_RESPONSE_LAST, roce.RC_RDMA_READ_RESPONSE_ONLY:
		return true
	}
	return false
}

// trimUnanswered drops, from a recording cut short, the RC requests to as whose
// answer the recording lost: those after the last PSN an answer of as finished
// on their connection (a READ's whole response, an ACK), and the packets of a READ
// response torn midway. Requests the peer pipelined before the emulated side's
// last answer (outstanding READs) would otherwise be answered in the replay and
// found missing from the recording. It returns what is left and how many
// requests it dropped, and renumbers the connections' From to match.
func trimUnanswered(frames []pcap.Frame, conns []pcap.Conn, as netip.Addr) ([]pcap.Frame, int) {
	var p roce.Packet
	owner := make([]int, len(frames)) // the conns index of each RC frame of a connection, or -1
	done := make([]uint32, len(conns))
	answered := make([]bool, len(conns))
	for i, f := range frames {
		owner[i] = -1
		if p.Decode(f.Data) != nil || p.BTH.Opcode.Service() != roce.ServiceRC {
			continue
		}
		k := connOf(conns, &p, as, i)
		owner[i] = k
		if k >= 0 && p.SrcAddr() == as && completes(p.BTH.Opcode) {
			if !answered[k] || roce.PSNAfter(p.BTH.PSN, done[k]) {
				done[k] = p.BTH.PSN
			}
			answered[k] = true
		}
	}
	kept, cut := frames[:0:0], 0
	at := make([]int, len(frames)) // each frame's index in kept
	for i, f := range frames {
		at[i] = len(kept)
		if k := owner[i]; k >= 0 && p.Decode(f.Data) == nil && (!answered[k] || roce.PSNAfter(p.BTH.PSN, done[k])) {
			if p.DstAddr() == as {
				cut++
			}
			continue
		}
		kept = append(kept, f)
	}
	for k := range conns { // From names a frame that stays (the TCP exchange's)
		if c := &conns[k]; c.From > 0 && c.From <= len(frames) {
			c.From = at[c.From-1] + 1
		}
	}
	return kept, cut
}

// connOf returns the index in conns of the connection the RC packet p (frame
// index i) belongs to: a request to as on the connection's QP, or an answer of as
// to its peer's QP; the latest connection that starts at or before the frame
// wins. -1 if none.
func connOf(conns []pcap.Conn, p *roce.Packet, as netip.Addr, i int) int {
	best := -1
	for k, c := range conns {
		req := p.SrcAddr() == c.Peer && p.DstAddr() == as && p.BTH.DestQP == c.QPN
		ans := p.SrcAddr() == as && p.DstAddr() == c.Peer && p.BTH.DestQP == c.PeerQPN
		if (req || ans) && (c.From == 0 || c.From-1 <= i) && (best < 0 || c.From > conns[best].From) {
			best = k
		}
	}
	return best
}
