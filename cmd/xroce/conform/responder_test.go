package conform

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// sentLink is a transport.Link that keeps what is sent (only Send is used).
type sentLink struct {
	transport.Link
	frames [][]byte
}

func (l *sentLink) Send(f [][]byte) (int, error) {
	for _, b := range f {
		l.frames = append(l.frames, append([]byte(nil), b...))
	}
	return len(f), nil
}

// testResponder is a responder over testConn (its EPSN is the client's first
// PSN, 0xFFFFFE, so offsets cross the 24-bit wrap) with the given rules.
func testResponder(t *testing.T, rules string) (*responder, *sentLink) {
	t.Helper()
	s, err := Parse("r.yaml", []byte("setup: {role: responder, client: read_bw}\nanswer:\n"+rules+
		"expect: {requests: [{opcode: RC_RDMA_READ_REQUEST, psn: 0}], client: success}\n"))
	if err != nil {
		t.Fatal(err)
	}
	l := &sentLink{}
	mem := make([]byte, 8192)
	for i := range mem {
		mem[i] = byte(i)
	}
	return &responder{c: testConn(), link: l, rules: s.Answer, mem: mem, base: 0x10000, rkey: 0x77,
		start: time.Now(), atomics: map[int]uint64{}}, l
}

// req is a request packet from the client at PSN offset off.
func req(r *responder, op roce.Opcode, off int, ackreq bool) *roce.Packet {
	p := &roce.Packet{}
	p.BTH = roce.BTH{Opcode: op, PSN: r.c.PSN(off), AckReq: ackreq, DestQP: r.c.LocalQPN}
	p.Headers = op.Info().Headers
	return p
}

// sentAnswers renders what the responder sent since the last call, one packet a
// line: opcode, PSN offset, AETH, payload length, first payload byte, orig.
func sentAnswers(t *testing.T, r *responder, l *sentLink) string {
	t.Helper()
	var b strings.Builder
	for _, f := range l.frames {
		var p roce.Packet
		if err := p.Decode(f); err != nil {
			t.Fatalf("a sent frame does not decode: %v", err)
		}
		if p.BTH.DestQP != r.c.Peer.QPN {
			t.Fatalf("sent to QPN %#x, want the client's %#x", p.BTH.DestQP, r.c.Peer.QPN)
		}
		fmt.Fprintf(&b, "%s %+d", shortOp(p.BTH.Opcode), r.c.Offset(p.BTH.PSN))
		if p.Headers&roce.HdrAETH != 0 {
			fmt.Fprintf(&b, " %#02x msn=%d", uint8(p.AETH.Syndrome), p.AETH.MSN)
		}
		if len(p.Payload) > 0 {
			fmt.Fprintf(&b, " %dB@%#02x", len(p.Payload), p.Payload[0])
		}
		if p.Headers&roce.HdrAtomicAckETH != 0 {
			fmt.Fprintf(&b, " orig=%d", p.AtomicAckETH.OrigRemData)
		}
		b.WriteString("; ")
	}
	l.frames = nil
	return b.String()
}

// TestResponderNormal: a correct responder's answers, exactly: WRITEs in
// sequence ACKed where AckReq asks (the MSN counting messages), a packet
// beyond a gap NAKed once with the expected PSN and the rest dropped, a
// duplicate ACKed with the latest PSN, a READ split at the 1024-byte MTU with
// its data, a duplicate READ answered again from its own PSN, an atomic
// executed once and its duplicate answered from the saved value.
func TestResponderNormal(t *testing.T) {
	r, l := testResponder(t, "  - {reply: normal}\n")
	h := func(p *roce.Packet) {
		t.Helper()
		if err := r.handle(p, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	w := req(r, roce.RC_RDMA_WRITE_FIRST, 0, false)
	w.RETH = roce.RETH{VA: 0x10000, RKey: 0x77, DMALen: 2048}
	w.Payload = make([]byte, 1024)
	h(w)
	h(req(r, roce.RC_RDMA_WRITE_LAST, 1, true))
	h(req(r, roce.RC_RDMA_WRITE_ONLY, 4, true)) // a gap: +2, +3 lost
	h(req(r, roce.RC_RDMA_WRITE_ONLY, 5, true)) // dropped: already NAKed
	h(req(r, roce.RC_RDMA_WRITE_LAST, 1, true)) // a duplicate
	if got, want := sentAnswers(t, r, l), "ACKNOWLEDGE +1 0x1f msn=1; ACKNOWLEDGE +2 0x60 msn=1; ACKNOWLEDGE +1 0x1f msn=1; "; got != want {
		t.Fatalf("WRITEs:\n got %s\nwant %s", got, want)
	}
	// The READ from base+100 finds the WRITE's zeros in its first packet (the
	// WRITE covered base..base+1024), the buffer's pattern after.
	rd := req(r, roce.RC_RDMA_READ_REQUEST, 2, true)
	rd.RETH = roce.RETH{VA: 0x10000 + 100, RKey: 0x77, DMALen: 2500}
	h(rd)
	if got, want := sentAnswers(t, r, l), "RDMA_READ_RESPONSE_FIRST +2 0x1f msn=2 1024B@0x00; RDMA_READ_RESPONSE_MIDDLE +3 1024B@0x64; RDMA_READ_RESPONSE_LAST +4 0x1f msn=2 452B@0x64; "; got != want {
		t.Fatalf("READ:\n got %s\nwant %s", got, want)
	}
	again := req(r, roce.RC_RDMA_READ_REQUEST, 3, true) // asked again from its second packet
	again.RETH = roce.RETH{VA: 0x10000 + 1124, RKey: 0x77, DMALen: 1476}
	h(again)
	if got, want := sentAnswers(t, r, l), "RDMA_READ_RESPONSE_FIRST +3 0x1f msn=2 1024B@0x64; RDMA_READ_RESPONSE_LAST +4 0x1f msn=2 452B@0x64; "; got != want {
		t.Fatalf("READ again:\n got %s\nwant %s", got, want)
	}
	fa := req(r, roce.RC_FETCH_ADD, 5, true)
	fa.AtomicETH = roce.AtomicETH{VA: 0x10000 + 2048, RKey: 0x77, SwapAdd: 5}
	h(fa)
	h(fa) // a duplicate: the saved value, not executed again
	if got, want := sentAnswers(t, r, l), "ATOMIC_ACKNOWLEDGE +5 0x1f msn=3 orig=506097522914230528; ATOMIC_ACKNOWLEDGE +5 0x1f msn=3 orig=506097522914230528; "; got != want {
		t.Fatalf("FETCH_ADD:\n got %s\nwant %s", got, want)
	}
	if v := binary.LittleEndian.Uint64(r.mem[2048:]); v != 506097522914230528+5 {
		t.Fatalf("memory after one FETCH_ADD of 5: %d", v)
	}
	if r.ep != 6 || len(r.reqs) != 9 || r.reqs[2].PSN != 4 || r.reqs[5].PSNs != 3 || r.reqs[2].Reply != "normal" {
		t.Fatalf("ep %d, %d requests recorded: %+v", r.ep, len(r.reqs), r.reqs)
	}
}

// TestResponderRules: each reply kind's packets, exactly, on the packets its
// rule names.
func TestResponderRules(t *testing.T) {
	r, l := testResponder(t, `  - {packets: 1, reply: silence}
  - {packets: 2, reply: ghost_ack, psn: 1000, msn: 9}
  - {packets: 3, reply: rnr_nak, timer: 14}
  - {packets: 4, reply: ack_lost}
  - {packets: 5, reply: duplicate_ack}
  - {packets: 6, reply: nak_psn_sequence_error, psn: 0}
  - {packets: 7, reply: read_partial, respond: [0, 2]}
  - {packets: 8, reply: nak_remote_access_error}
`)
	for i, p := range []*roce.Packet{
		req(r, roce.RC_SEND_ONLY, 0, true),
		req(r, roce.RC_SEND_ONLY, 0, true),
		req(r, roce.RC_SEND_ONLY, 0, true),
		req(r, roce.RC_SEND_ONLY, 0, true), // executed, unanswered
		req(r, roce.RC_SEND_ONLY, 1, true), // ACK +1, then the ACK before it (+0 msn=1, unsent by ack_lost) and +1 again
		req(r, roce.RC_SEND_ONLY, 2, true), // NAK naming +0
	} {
		if err := r.handle(p, time.Now()); err != nil {
			t.Fatal(i, err)
		}
	}
	want := "ACKNOWLEDGE +1000 0x1f msn=9; ACKNOWLEDGE +0 0x2e msn=0; ACKNOWLEDGE +1 0x1f msn=2; ACKNOWLEDGE +0 0x1f msn=1; ACKNOWLEDGE +1 0x1f msn=2; ACKNOWLEDGE +0 0x60 msn=2; "
	if got := sentAnswers(t, r, l); got != want {
		t.Fatalf("rules 1-6:\n got %s\nwant %s", got, want)
	}
	if r.ep != 0 {
		t.Fatalf("after a NAK sequence error naming +0 the responder expects %+d", r.ep)
	}
	rd := req(r, roce.RC_RDMA_READ_REQUEST, 0, true)
	rd.RETH = roce.RETH{VA: 0x10000, RKey: 0x77, DMALen: 3072}
	if err := r.handle(rd, time.Now()); err != nil {
		t.Fatal(err)
	}
	bad := req(r, roce.RC_RDMA_READ_REQUEST, 3, true)
	bad.RETH = rd.RETH
	if err := r.handle(bad, time.Now()); err != nil {
		t.Fatal(err)
	}
	want = "RDMA_READ_RESPONSE_FIRST +0 0x1f msn=3 1024B@0x00; RDMA_READ_RESPONSE_LAST +2 0x1f msn=3 1024B@0x00; ACKNOWLEDGE +3 0x62 msn=3; "
	if got := sentAnswers(t, r, l); got != want {
		t.Fatalf("rules 7-8:\n got %s\nwant %s", got, want)
	}
	var replies []string
	for _, q := range r.reqs {
		replies = append(replies, q.Reply)
	}
	if got := strings.Join(replies, ","); got != "silence,ghost_ack,rnr_nak,ack_lost,duplicate_ack,nak_psn_sequence_error,read_partial,nak_remote_access_error" {
		t.Fatalf("replies recorded: %s", got)
	}
}
