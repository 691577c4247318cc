package conform

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/xroce/xroce/roce"
)

// Answer is one packet the peer sent to this side's QP, as received.
type Answer struct {
	Pkt     roce.Packet // decoded; Payload aliases Frame
	Frame   []byte
	BadICRC bool
}

// describe renders an answer compactly: its opcode without RC_, the PSN offset, the
// AETH, the data length and the atomic original value, e.g.
// "ACKNOWLEDGE +0 NAK_PSN_SEQUENCE_ERROR msn=0".
func (c *Conn) describe(a *Answer) string {
	p := &a.Pkt
	var b strings.Builder
	fmt.Fprintf(&b, "%s %+d", shortOp(p.BTH.Opcode), c.Offset(p.BTH.PSN))
	if p.Headers&roce.HdrAETH != 0 {
		fmt.Fprintf(&b, " %s msn=%d", syndromeName(p.AETH.Syndrome), p.AETH.MSN)
	}
	if p.BTH.Opcode.Info().Payload {
		fmt.Fprintf(&b, " %dB", len(p.Payload))
	}
	if p.Headers&roce.HdrAtomicAckETH != 0 {
		fmt.Fprintf(&b, " orig=%#x", p.AtomicAckETH.OrigRemData)
	}
	if a.BadICRC {
		b.WriteString(" BAD-ICRC")
	}
	return b.String()
}

// describe renders an expected response in the form Conn.describe uses.
func (r *Response) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %+d", r.opcodeNames(false), r.PSN)
	if r.Syndrome != nil {
		b.WriteString(" " + r.Syndrome.Name)
		if r.MSN != nil {
			fmt.Fprintf(&b, " msn=%d", *r.MSN)
		}
	}
	switch {
	case r.Data != nil:
		fmt.Fprintf(&b, " %dB", len(r.Data.Bytes()))
	case r.Len != nil:
		fmt.Fprintf(&b, " %dB", *r.Len)
	}
	if r.SameAs > 0 {
		fmt.Fprintf(&b, " =#%d", r.SameAs)
	}
	if r.Orig != nil {
		fmt.Fprintf(&b, " orig=%s", r.Orig)
	}
	return b.String()
}

func shortOp(op roce.Opcode) string { return strings.TrimPrefix(op.String(), "RC_") }

// syndromeName names a received syndrome as scenarios do: ACK, RNR_NAK or the NAK.
func syndromeName(s roce.Syndrome) string {
	switch s.Kind() {
	case roce.KindACK:
		return "ACK"
	case roce.KindRNRNAK:
		return fmt.Sprintf("RNR_NAK(timer=%d)", s.Value())
	}
	for name, v := range syndromeNames {
		if v.Exact && v.Match(s) {
			return name
		}
	}
	return fmt.Sprintf("syndrome(%#02x)", uint8(s))
}

// match compares one answer with one expected response and returns what differs;
// prev are the answers before it.
func (c *Conn) match(r *Response, a *Answer, prev []*Answer) []string {
	p := &a.Pkt
	var bad []string
	if a.BadICRC {
		bad = append(bad, "the answer's ICRC is wrong")
	}
	if !r.allows(p.BTH.Opcode) {
		bad = append(bad, fmt.Sprintf("opcode %v, want %s", p.BTH.Opcode, r.opcodeNames(true)))
		return bad
	}
	if got := c.Offset(p.BTH.PSN); got != r.PSN {
		bad = append(bad, fmt.Sprintf("PSN %#06x (offset %+d), want offset %+d", p.BTH.PSN, got, r.PSN))
	}
	if r.Syndrome != nil && !r.Syndrome.Match(p.AETH.Syndrome) {
		bad = append(bad, fmt.Sprintf("syndrome %#02x (%s), want %s", uint8(p.AETH.Syndrome), syndromeName(p.AETH.Syndrome), r.Syndrome.Name))
	}
	if r.MSN != nil && p.AETH.MSN != *r.MSN {
		bad = append(bad, fmt.Sprintf("MSN %d, want %d", p.AETH.MSN, *r.MSN))
	}
	if r.Data != nil {
		want := r.Data.Bytes()
		if !bytes.Equal(p.Payload, want) {
			bad = append(bad, fmt.Sprintf("data %s, want %s", short(p.Payload), short(want)))
		}
	}
	if r.Len != nil && len(p.Payload) != *r.Len {
		bad = append(bad, fmt.Sprintf("%d bytes of data, want %d", len(p.Payload), *r.Len))
	}
	if r.SameAs > 0 && r.SameAs <= len(prev) && !bytes.Equal(p.Payload, prev[r.SameAs-1].Pkt.Payload) {
		bad = append(bad, fmt.Sprintf("data %s, want response %d's %s", short(p.Payload), r.SameAs, short(prev[r.SameAs-1].Pkt.Payload)))
	}
	if r.Orig != nil {
		if want := r.Orig.Eval(Peer{Orig: origs(prev)}); p.AtomicAckETH.OrigRemData != want {
			bad = append(bad, fmt.Sprintf("original remote data %#x, want %#x (%s)", p.AtomicAckETH.OrigRemData, want, r.Orig))
		}
	}
	return bad
}

// origs are the answers' original remote data, in order (0 where an answer has
// no AtomicAckETH), for origK expressions.
func origs(got []*Answer) []uint64 {
	out := make([]uint64, len(got))
	for i, a := range got {
		out[i] = a.Pkt.AtomicAckETH.OrigRemData
	}
	return out
}

// short renders bytes for a message: the length and the first 16 in hex.
func short(b []byte) string {
	if len(b) > 16 {
		return fmt.Sprintf("%d bytes %x…", len(b), b[:16])
	}
	return fmt.Sprintf("%d bytes %x", len(b), b)
}

// judge compares the answers with the expected responses, in order, after
// leaving out the positive ACKs that a later positive ACK among the answers covers
// (coalesced). A message names an expected response by its number in the
// scenario, an unexpected answer by its number among the answers.
func (c *Conn) judge(want []Response, got []*Answer) []string {
	keep := c.coalesced(want, got)
	var bad []string
	for g, i := range keep {
		if g >= len(got) {
			bad = append(bad, fmt.Sprintf("response %d (%s) did not come", i+1, want[i].describe()))
			continue
		}
		for _, m := range c.match(&want[i], got[g], got[:g]) {
			bad = append(bad, fmt.Sprintf("response %d: %s", i+1, m))
		}
	}
	for g := len(keep); g < len(got); g++ {
		bad = append(bad, fmt.Sprintf("unexpected response %d: %s", g+1, c.describe(got[g])))
	}
	return bad
}

// progress is what a requester learns from the answers: the next PSN the
// responder expects (after the last one acknowledged or answered; a NAK PSN
// sequence error names it) and the last MSN.
func (c *Conn) progress(got []*Answer, epsn int, msn uint32) (int, uint32) {
	for _, a := range got {
		p := &a.Pkt
		off := c.Offset(p.BTH.PSN)
		next := off + 1
		if p.Headers&roce.HdrAETH != 0 {
			switch p.AETH.Syndrome.Kind() {
			case roce.KindNAK:
				if p.AETH.Syndrome.Value() != roce.NAKPSNSequenceError {
					continue
				}
				next = off
			case roce.KindRNRNAK:
				continue
			}
			if roce.PSNAfter(p.AETH.MSN, msn) {
				msn = p.AETH.MSN
			}
		}
		if next > epsn {
			epsn = next
		}
	}
	return epsn, msn
}

// coalesced returns the indexes of the expected responses that answers should
// match, in order: all of want but the positive ACKs that an answer acknowledges
// together with a later request. A responder may answer several requests with one
// ACK, whose PSN acknowledges every request before it too (IBTA Vol 1 9.7.5.1, ACK
// coalescing; the section number from memory). rdma_rxe acknowledges each request
// that asks; xroce answers the requests that arrived in one batch with one ACK, so
// a scenario's requests sent 5 ms apart meet one ACK when the responder ran late.
// Where answer g is a positive ACK for a later PSN than expected response i, and
// expected responses i..k-1 are positive ACKs followed by one for exactly that PSN
// at k, responses i..k-1 are left out.
func (c *Conn) coalesced(want []Response, got []*Answer) []int {
	keep := make([]int, 0, len(want))
	for i, g := 0, 0; i < len(want); i, g = i+1, g+1 {
		if g < len(got) && positiveACK(&want[i]) && got[g].Pkt.BTH.Opcode == roce.RC_ACKNOWLEDGE &&
			got[g].Pkt.AETH.Syndrome.Kind() == roce.KindACK {
			off := c.Offset(got[g].Pkt.BTH.PSN)
			for k := i + 1; k < len(want) && off > want[i].PSN && positiveACK(&want[k-1]); k++ {
				if positiveACK(&want[k]) && want[k].PSN == off {
					i = k
					break
				}
			}
		}
		keep = append(keep, i)
	}
	return keep
}

// positiveACK reports whether r expects an ACKNOWLEDGE with an ACK syndrome.
func positiveACK(r *Response) bool {
	return r.Opcode.Opcode == roce.RC_ACKNOWLEDGE && len(r.OrOpcodes) == 0 && r.Syndrome != nil && r.Syndrome.Kind == roce.KindACK
}
