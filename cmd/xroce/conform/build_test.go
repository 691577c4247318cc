package conform

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/xroce/xroce/roce"
)

func testConn() *Conn {
	return &Conn{
		LocalMAC: [6]byte{2, 0, 0, 0, 0, 1}, PeerMAC: [6]byte{2, 0, 0, 0, 0, 2},
		LocalIP: netip.MustParseAddr("10.0.0.2"), PeerIP: netip.MustParseAddr("10.0.0.1"), LocalQPN: 0x100,
		Peer: Peer{QPN: 0x11, RKey: 0x101, Base: 0x7f0000001000, RegionLen: 8192},
		EPSN: 0xFFFFFE, MTU: roce.MTU1024,
	}
}

func mustParse(t *testing.T, frame string) *Frame {
	t.Helper()
	s, err := Parse("t.yaml", []byte("setup: {server: write_bw}\nsend:\n  - "+frame+"\nexpect: {usable: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	return &s.Send[0]
}

// TestBuild: a frame is what the scenario says, addressed to the peer's QP, with
// the PSN offset across the 24-bit wrap and a good ICRC; overrides and corruption
// change exactly what they name.
func TestBuild(t *testing.T) {
	c := testConn()
	decode := func(f *Frame) (*roce.Packet, error) {
		b, err := c.Build(f)
		if err != nil {
			t.Fatal(err)
		}
		var p roce.Packet
		return &p, p.Decode(b)
	}
	p, err := decode(mustParse(t, "{opcode: RC_RDMA_WRITE_ONLY, psn: 3, reth: {va: end-8, rkey: rkey, len: 5}, payload: {hex: '0102030405'}}"))
	if err != nil {
		t.Fatal(err)
	}
	want := roce.BTH{Opcode: roce.RC_RDMA_WRITE_ONLY, PKey: 0xFFFF, DestQP: 0x11, PSN: 1, AckReq: true, PadCnt: 3}
	if p.BTH != want || p.RETH != (roce.RETH{VA: 0x7f0000001000 + 8192 - 8, RKey: 0x101, DMALen: 5}) || string(p.Payload) != "\x01\x02\x03\x04\x05" {
		t.Fatalf("BTH %+v RETH %+v payload %x", p.BTH, p.RETH, p.Payload)
	}
	if p.SrcAddr() != c.LocalIP || p.DstAddr() != c.PeerIP || p.Eth.Dst != c.PeerMAC || p.UDP.SrcPort != roce.UDPSourcePort(0, 0x100, 0x11) || p.IPv4.TTL != 64 || p.IPv4.FlagsFrag != 0x4000 {
		t.Fatalf("addressing %+v %+v %+v", p.Eth, p.IPv4, p.UDP)
	}

	// pad_count 1 on 8 bytes: the receiver sees 7 bytes of data; the ICRC is good.
	p, err = decode(mustParse(t, "{opcode: RC_RDMA_WRITE_ONLY, psn: 0, reth: {va: base, rkey: rkey, len: 8}, payload: {size: 8, fill: 0x42}, bth: {pad_count: 1}}"))
	if err != nil || p.BTH.PadCnt != 1 || len(p.Payload) != 7 || p.BTH.PSN != 0xFFFFFE {
		t.Fatalf("pad override: %v pad %d payload %d PSN %#x", err, p.BTH.PadCnt, len(p.Payload), p.BTH.PSN)
	}
	// Reserved bits, MigReq, P_Key, a QPN expression and AckReq cleared.
	p, err = decode(mustParse(t, "{opcode: RC_SEND_FIRST, psn: -1, ackreq: true, payload: {size: 1024}, bth: {resv6: 0x3f, resv7: 0x7f, migreq: true, fecn: true, pkey: 0x7fff, dest_qp: qpn^0x400000, se: true}}"))
	want = roce.BTH{Opcode: roce.RC_SEND_FIRST, SE: true, MigReq: true, PKey: 0x7FFF, FECN: true, Resv6: 0x3F, DestQP: 0x400011, AckReq: true, Resv7: 0x7F, PSN: 0xFFFFFD}
	if err != nil || p.BTH != want {
		t.Fatalf("BTH edits: %v %+v\nwant %+v", err, p.BTH, want)
	}
	// A FIRST does not ask for an ACK by default; an atomic does.
	if p, _ := decode(mustParse(t, "{opcode: RC_SEND_FIRST, payload: {size: 1024}}")); p.BTH.AckReq {
		t.Error("SEND_FIRST with AckReq by default")
	}
	p, err = decode(mustParse(t, "{opcode: RC_COMPARE_SWAP, atomic: {va: base+8, rkey: rkey, swap_add: 7, compare: 9}}"))
	if err != nil || !p.BTH.AckReq || p.AtomicETH != (roce.AtomicETH{VA: 0x7f0000001008, RKey: 0x101, SwapAdd: 7, Compare: 9}) {
		t.Fatalf("atomic: %v %+v %+v", err, p.BTH, p.AtomicETH)
	}
	// swap_add and compare from an earlier answer's original remote data.
	c.Peer.Orig = []uint64{^uint64(0) - 1}
	cas := mustParse(t, "{opcode: RC_COMPARE_SWAP, atomic: {va: base, rkey: rkey}}")
	cas.Atomic.SwapAdd, _ = ParseExpr("orig1+7")
	cas.Atomic.Compare, _ = ParseExpr("orig1")
	p, err = decode(cas)
	c.Peer.Orig = nil
	if err != nil || p.AtomicETH != (roce.AtomicETH{VA: 0x7f0000001000, RKey: 0x101, SwapAdd: 5, Compare: ^uint64(0) - 1}) {
		t.Fatalf("atomic from orig1: %v %+v", err, p.AtomicETH)
	}
	p, err = decode(mustParse(t, "{opcode: RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, reth: {va: base, rkey: rkey, len: 0}, imm: 0x1234}"))
	if err != nil || p.ImmDt != 0x1234 || p.Headers&roce.HdrImmDt == 0 {
		t.Fatalf("immediate: %v %#x", err, p.ImmDt)
	}
	// Corruption.
	if _, err := decode(mustParse(t, "{opcode: RC_SEND_ONLY, corrupt: {icrc: true}}")); err != roce.ErrBadICRC {
		t.Errorf("corrupt.icrc: %v", err)
	}
	p, err = decode(mustParse(t, "{opcode: RC_SEND_ONLY, corrupt: {dest_gid: 192.0.2.1, src_gid: 192.0.2.2}}"))
	if err != nil || p.DstAddr().String() != "192.0.2.1" || p.SrcAddr().String() != "192.0.2.2" || p.Eth.Dst != c.PeerMAC {
		t.Fatalf("GIDs: %v %v %v", err, p.DstAddr(), p.SrcAddr())
	}
	if _, err := decode(mustParse(t, "{opcode: RC_SEND_ONLY, bth: {tver: 1}}")); err != roce.ErrBadVersion {
		t.Errorf("tver 1: %v", err)
	}
	// A ghost ACK: the AETH as given, no AckReq.
	p, err = decode(mustParse(t, "{opcode: RC_ACKNOWLEDGE, psn: 1, aeth: {syndrome: 0x1f, msn: 0xabcdef}}"))
	if err != nil || p.AETH != (roce.AETH{Syndrome: roce.SyndromeACK, MSN: 0xabcdef}) || p.BTH.AckReq || p.BTH.PSN != 0xFFFFFF {
		t.Fatalf("ACK: %v %+v %+v", err, p.AETH, p.BTH)
	}
	p, err = decode(mustParse(t, "{opcode: CNP}"))
	if err != nil || !p.BTH.BECN || p.BTH.AckReq || p.BTH.DestQP != 0x11 {
		t.Fatalf("CNP: %v %+v", err, p.BTH)
	}
}

// answers encodes packets from the peer as the link would deliver them.
func answers(t *testing.T, c *Conn, pkts ...roce.Packet) []*Answer {
	var out []*Answer
	for _, p := range pkts {
		p.Eth = roce.Ethernet{Dst: c.LocalMAC, Src: c.PeerMAC}
		p.IPv4 = roce.IPv4{TTL: 64, Src: c.PeerIP.As4(), Dst: c.LocalIP.As4()}
		p.BTH.DestQP, p.BTH.PKey = c.LocalQPN, 0xFFFF
		b := make([]byte, p.Len())
		if _, err := p.Encode(b); err != nil {
			t.Fatal(err)
		}
		x := &exchange{c: c}
		a := x.answer(b)
		if a == nil {
			t.Fatalf("answer dropped: %+v", p.BTH)
		}
		out = append(out, a)
	}
	return out
}

// TestJudge: exact comparison of answers with expectations, and what a requester
// learns from them.
func TestJudge(t *testing.T) {
	c := testConn()
	ack := func(op roce.Opcode, off int, syn roce.Syndrome, msn uint32, data []byte) roce.Packet {
		return roce.Packet{BTH: roce.BTH{Opcode: op, PSN: c.PSN(off)}, AETH: roce.AETH{Syndrome: syn, MSN: msn}, Payload: data}
	}
	got := answers(t, c,
		ack(roce.RC_ACKNOWLEDGE, 0, roce.SyndromeNAKPSNSequenceError, 0, nil),
		ack(roce.RC_RDMA_READ_RESPONSE_ONLY, 0, roce.SyndromeACK, 1, []byte{1, 2, 3, 4}),
		ack(roce.RC_ACKNOWLEDGE, 2, roce.SyndromeNAKRemoteAccessError, 1, nil),
	)
	s, err := Parse("t.yaml", []byte(`setup: {server: read_bw}
send: [{opcode: RC_RDMA_READ_REQUEST, reth: {va: base, rkey: rkey, len: 4}}]
expect:
  usable: true
  responses:
    - {opcode: RC_ACKNOWLEDGE, psn: 0, syndrome: NAK_PSN_SEQUENCE_ERROR, msn: 0}
    - {opcode: RC_RDMA_READ_RESPONSE_ONLY, psn: 0, syndrome: ACK, msn: 2, data: {hex: "01020305"}}
`))
	if err != nil {
		t.Fatal(err)
	}
	bad := c.judge(s.Expect.Responses, got)
	want := []string{
		"response 2: MSN 1, want 2",
		"response 2: data 4 bytes 01020304, want 4 bytes 01020305",
		"unexpected response 3: ACKNOWLEDGE +2 NAK_REMOTE_ACCESS_ERROR msn=1",
	}
	if strings.Join(bad, "\n") != strings.Join(want, "\n") {
		t.Fatalf("judge:\n%s\nwant:\n%s", strings.Join(bad, "\n"), strings.Join(want, "\n"))
	}
	bad = c.judge(s.Expect.Responses[:1], nil)
	if len(bad) != 1 || bad[0] != "response 1 (ACKNOWLEDGE +0 NAK_PSN_SEQUENCE_ERROR msn=0) did not come" {
		t.Fatalf("missing: %q", bad)
	}
	// Coalesced ACKs: one ACK for PSN +2 (MSN 3) stands for the expected ACKs of +0
	// and +1 before it; an ACK for a PSN no expected ACK names covers nothing.
	three, err := Parse("t.yaml", []byte(`setup: {server: write_bw}
send: [{opcode: RC_RDMA_WRITE_ONLY, reth: {va: base, rkey: rkey, len: 4}, payload: {hex: "01020304"}}]
expect:
  usable: true
  responses:
    - {opcode: RC_ACKNOWLEDGE, psn: 0, syndrome: ACK, msn: 1}
    - {opcode: RC_ACKNOWLEDGE, psn: 1, syndrome: ACK, msn: 2}
    - {opcode: RC_ACKNOWLEDGE, psn: 2, syndrome: ACK, msn: 3}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		got  []roce.Packet
		want string
	}{
		{[]roce.Packet{ack(roce.RC_ACKNOWLEDGE, 2, roce.SyndromeACK, 3, nil)}, ""},
		{[]roce.Packet{ack(roce.RC_ACKNOWLEDGE, 0, roce.SyndromeACK, 1, nil), ack(roce.RC_ACKNOWLEDGE, 2, roce.SyndromeACK, 3, nil)}, ""},
		{[]roce.Packet{ack(roce.RC_ACKNOWLEDGE, 2, roce.SyndromeACK, 2, nil)}, "response 3: MSN 2, want 3"},
		{[]roce.Packet{ack(roce.RC_ACKNOWLEDGE, 3, roce.SyndromeACK, 4, nil)},
			fmt.Sprintf("response 1: PSN %#06x (offset +3), want offset +0\nresponse 1: MSN 4, want 1\nresponse 2 (ACKNOWLEDGE +1 ACK msn=2) did not come\nresponse 3 (ACKNOWLEDGE +2 ACK msn=3) did not come", c.PSN(3))},
		{[]roce.Packet{ack(roce.RC_ACKNOWLEDGE, 1, roce.SyndromeNAKPSNSequenceError, 0, nil)},
			fmt.Sprintf("response 1: PSN %#06x (offset +1), want offset +0\nresponse 1: syndrome 0x60 (NAK_PSN_SEQUENCE_ERROR), want ACK\nresponse 1: MSN 0, want 1\nresponse 2 (ACKNOWLEDGE +1 ACK msn=2) did not come\nresponse 3 (ACKNOWLEDGE +2 ACK msn=3) did not come", c.PSN(1))},
	} {
		if bad := strings.Join(c.judge(three.Expect.Responses, answers(t, c, tc.got...)), "\n"); bad != tc.want {
			t.Errorf("coalesced ACKs %v: judged\n%s\nwant\n%s", tc.got, bad, tc.want)
		}
	}
	// An alternative opcode: either matches, a third is named against both.
	alt, err := Parse("t.yaml", []byte(`setup: {server: read_bw}
send: [{opcode: RC_RDMA_READ_REQUEST, reth: {va: base, rkey: rkey, len: 4}}]
expect:
  usable: true
  responses:
    - {opcode: RC_RDMA_READ_RESPONSE_ONLY, or_opcodes: [RC_RDMA_READ_RESPONSE_LAST], psn: 0, syndrome: ACK, len: 4}
`))
	if err != nil {
		t.Fatal(err)
	}
	for op, want := range map[roce.Opcode]string{
		roce.RC_RDMA_READ_RESPONSE_ONLY:  "",
		roce.RC_RDMA_READ_RESPONSE_LAST:  "",
		roce.RC_RDMA_READ_RESPONSE_FIRST: "response 1: opcode RC_RDMA_READ_RESPONSE_FIRST, want RC_RDMA_READ_RESPONSE_ONLY|RC_RDMA_READ_RESPONSE_LAST",
	} {
		bad := c.judge(alt.Expect.Responses, answers(t, c, ack(op, 0, roce.SyndromeACK, 1, []byte{1, 2, 3, 4})))
		if strings.Join(bad, "\n") != want {
			t.Errorf("%v: %q, want %q", op, bad, want)
		}
	}
	if d := alt.Expect.Responses[0].describe(); d != "RDMA_READ_RESPONSE_ONLY|RDMA_READ_RESPONSE_LAST +0 ACK 4B" {
		t.Errorf("describe: %q", d)
	}
	// An original value relative to an earlier response's.
	atomic := func(off int, msn uint32, orig uint64) roce.Packet {
		p := ack(roce.RC_ATOMIC_ACKNOWLEDGE, off, roce.SyndromeACK, msn, nil)
		p.AtomicAckETH.OrigRemData = orig
		return p
	}
	a, err := Parse("a.yaml", []byte(atomicScenario))
	if err != nil {
		t.Fatal(err)
	}
	if bad := c.judge(a.Expect.Responses, answers(t, c, atomic(0, 1, 0xe6317bbc3925d5d9), atomic(1, 2, 0xe6317bbc3925d5d9))); len(bad) != 0 {
		t.Errorf("orig1 matched: %q", bad)
	}
	bad = c.judge(a.Expect.Responses, answers(t, c, atomic(0, 1, 0xe6317bbc3925d5d9), atomic(1, 2, 0xe6317bbc3925d5de)))
	if len(bad) != 1 || bad[0] != "response 2: original remote data 0xe6317bbc3925d5de, want 0xe6317bbc3925d5d9 (orig1)" {
		t.Errorf("orig1 differs: %q", bad)
	}
	// The NAK names PSN +0; the READ response moves the expected PSN to +1 and the
	// MSN to 1; the remote access NAK changes neither.
	if epsn, msn := c.progress(got, 0, 0); epsn != 1 || msn != 1 {
		t.Fatalf("progress: PSN offset %d MSN %d, want 1 and 1", epsn, msn)
	}
	// A packet from another address or to another QPN is not an answer.
	other := roce.Packet{Eth: roce.Ethernet{}, IPv4: roce.IPv4{Src: [4]byte{10, 0, 0, 9}, Dst: c.LocalIP.As4()},
		BTH: roce.BTH{Opcode: roce.RC_ACKNOWLEDGE, DestQP: c.LocalQPN}}
	b := make([]byte, other.Len())
	if _, err := other.Encode(b); err != nil {
		t.Fatal(err)
	}
	if (&exchange{c: c}).answer(b) != nil {
		t.Error("a packet from another address was taken as an answer")
	}
}
