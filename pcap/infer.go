package pcap

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/xroce/xroce/roce"
)

// packet is a decoded RC frame of the capture.
type packet struct {
	f   *Frame
	p   roce.Packet
	bad bool // ICRC bad
}

// decodeRC returns the capture's RC frames (ICRC good or bad).
func decodeRC(frames []Frame) []*packet {
	var out []*packet
	for i := range frames {
		q := &packet{f: &frames[i]}
		err := q.p.Decode(frames[i].Data)
		if err != nil && err != roce.ErrBadICRC {
			continue
		}
		if q.p.BTH.Opcode.Service() != roce.ServiceRC {
			continue
		}
		q.bad = err == roce.ErrBadICRC
		out = append(out, q)
	}
	return out
}

func isResponse(p *roce.Packet) bool { return p.BTH.Opcode.Is(roce.ClassResponse) }

// Endpoints returns the IP addresses that send or receive RC frames in the capture,
// in order of appearance.
func Endpoints(frames []Frame) []netip.Addr {
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	for _, q := range decodeRC(frames) {
		for _, a := range []netip.Addr{q.p.SrcAddr(), q.p.DstAddr()} {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	return out
}

// InferConns finds the RC connections of endpoint as from the RoCE frames alone, for
// captures without a TCP exchange: one per (peer address, destination QPN) that the
// peer sends requests to, starting a new one when the PSN jumps by more than 2^20
// after a second of silence (a new run that reused the QPN). PSN is the first
// request's PSN; PeerQPN is the destination QPN of the first frame as sent to the
// peer after that request (a response if there is one); MTU is left to Replay.
func InferConns(frames []Frame, as netip.Addr) []Conn {
	pkts := decodeRC(frames)
	type key struct {
		peer netip.Addr
		qpn  uint32
	}
	last := map[key]*packet{} // the latest request of each connection
	var conns []Conn
	for i, q := range pkts {
		p := &q.p
		if p.DstAddr() != as || isResponse(p) || p.SrcAddr() == as {
			continue
		}
		k := key{p.SrcAddr(), p.BTH.DestQP}
		if l := last[k]; l != nil {
			d := roce.PSNDiff(p.BTH.PSN, l.p.BTH.PSN)
			if (d > 1<<20 || d < -(1<<20)) && q.f.Time.Sub(l.f.Time) > time.Second {
				delete(last, k) // a new run that reused the QPN
			}
		}
		if last[k] == nil {
			c := Conn{Peer: p.SrcAddr(), QPN: p.BTH.DestQP, PSN: p.BTH.PSN, From: q.f.Index,
				Source: fmt.Sprintf("inferred from the RoCE frames from frame %d", q.f.Index)}
			var found bool
			c.PeerQPN, found = peerQPN(pkts[i:], as, k.peer, k.qpn)
			if !found {
				c.Source += "; the peer's QPN is unknown (the endpoint never sent to it)"
			}
			conns = append(conns, c)
		}
		last[k] = q
	}
	return conns
}

// peerQPN returns the QPN the endpoint at as answers the connection (its peer at
// peer, its own QPN qpn) on, from pkts, which begin with the connection's first
// request: the destination QPN of the first response whose PSN one of the
// connection's requests before it asked for (an ACK's the request's PSN, a READ
// response's one in the READ's span). Where several QPs interleave, the first
// response after a request may be another connection's. With no such response,
// the first frame the endpoint sent to the peer; false when it sent none.
func peerQPN(pkts []*packet, as, peer netip.Addr, qpn uint32) (uint32, bool) {
	type span struct{ psn, n uint32 }
	asked := map[uint32]bool{} // the PSNs of its requests
	var reads []span           // its READs: PSN and the most responses they may have
	for _, r := range pkts {
		p := &r.p
		switch {
		case p.SrcAddr() == peer && p.DstAddr() == as && p.BTH.DestQP == qpn && !isResponse(p):
			asked[p.BTH.PSN] = true
			if p.BTH.Opcode.Is(roce.ClassRead) {
				reads = append(reads, span{p.BTH.PSN, max(1, (p.RETH.DMALen+255)/256)}) // the smallest PMTU's count
			}
		case p.SrcAddr() == as && p.DstAddr() == peer && isResponse(p):
			if asked[p.BTH.PSN] {
				return p.BTH.DestQP, true
			}
			for _, a := range reads {
				if d := roce.PSNDiff(p.BTH.PSN, a.psn); d >= 0 && uint32(d) < a.n {
					return p.BTH.DestQP, true
				}
			}
		}
	}
	for _, r := range pkts {
		if r.p.SrcAddr() == as && r.p.DstAddr() == peer {
			return r.p.BTH.DestQP, true
		}
	}
	return 0, false
}

// inferMTU returns the path MTU the connection's packets show.
func inferMTU(evs []*packet) (roce.MTU, string) {
	largest := 0
	for _, q := range evs {
		pos := q.p.BTH.Opcode.Info().Position
		if pos == roce.PosFirst || pos == roce.PosMiddle {
			if m, err := roce.MTUFromBytes(len(q.p.Payload)); err == nil {
				return m, fmt.Sprintf("path MTU %d from the payload of frame %d (%v)", m.Bytes(), q.f.Index, q.p.BTH.Opcode)
			}
		}
		largest = max(largest, len(q.p.Payload))
	}
	for _, m := range []roce.MTU{roce.MTU1024, roce.MTU2048, roce.MTU4096} {
		if largest <= m.Bytes() {
			return m, fmt.Sprintf("path MTU %d assumed: no multi-packet message shows it, and the largest payload is %d bytes", m.Bytes(), largest)
		}
	}
	return roce.MTU4096, fmt.Sprintf("path MTU 4096 assumed, though a payload of %d bytes exceeds it", largest)
}
