package transport_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

const rawQPN = 0x99

// raw drives one engine (side e) against a peer the test writes by hand: it crafts
// request or response frames and reads what the engine sends.
type raw struct {
	t     *testing.T
	clock *transport.FakeClock
	e     *side
	end   *transport.PipeEnd // the hand-driven end
	tmpl  roce.Packet
	buf   []byte
}

// newRaw connects an engine QP (PMTU 1024) whose requester starts at sqPSN and whose
// responder expects rqPSN.
func newRaw(t *testing.T, sqPSN, rqPSN uint32, c pairConfig) *raw {
	return newRawLink(t, sqPSN, rqPSN, c, nil)
}

// newRawLink is newRaw with the engine's end of the pipe wrapped by wrap (nil: not
// wrapped).
func newRawLink(t *testing.T, sqPSN, rqPSN uint32, c pairConfig, wrap func(transport.Link) transport.Link) *raw {
	c = defaults(c)
	ea, eb := transport.NewPipe(
		transport.PipeConfig{MAC: macA, Addrs: []netip.Addr{addrA}},
		transport.PipeConfig{MAC: macB, Addrs: []netip.Addr{addrB}})
	r := &raw{t: t, clock: transport.NewFakeClock(), end: eb, buf: make([]byte, 9000)}
	p := &pair{t: t, clock: r.clock}
	var l transport.Link = ea
	if wrap != nil {
		l = wrap(ea)
	}
	r.e = p.newSideOn(ea, l, c, 1<<16)
	peer := &side{end: eb, qp: nil}
	_ = peer
	qp := r.e.qp
	must(t, transport.BringUp(qp, transport.QPS_RESET, transport.QPS_RTS,
		c.connectParams(addrB, roce.MTU1024, rawQPN, sqPSN, rqPSN)))
	r.tmpl.Eth = roce.Ethernet{Src: macB, Dst: macA}
	r.tmpl.IPv4 = roce.IPv4{FlagsFrag: 0x4000, TTL: 64, Src: addrB.As4(), Dst: addrA.As4()}
	r.tmpl.UDP = roce.UDP{SrcPort: 0xc000, DstPort: roce.UDPPort}
	r.tmpl.BTH = roce.BTH{PKey: 0xFFFF, DestQP: qp.QPN()}
	return r
}

// send injects one packet built by fill from the template.
func (r *raw) send(op roce.Opcode, psn uint32, fill func(p *roce.Packet)) {
	r.t.Helper()
	p := r.tmpl
	p.BTH.Opcode, p.BTH.PSN = op, psn&roce.PSNMask
	if fill != nil {
		fill(&p)
	}
	n, err := p.Encode(r.buf)
	must(r.t, err)
	if k, err := r.end.Send([][]byte{r.buf[:n]}); k != 1 || err != nil {
		r.t.Fatalf("inject: %d %v", k, err)
	}
}

func ack(psn uint32, syn roce.Syndrome, msn uint32) (roce.Opcode, uint32, func(*roce.Packet)) {
	return roce.RC_ACKNOWLEDGE, psn, func(p *roce.Packet) { p.AETH = roce.AETH{Syndrome: syn, MSN: msn} }
}

// step runs the engine until idle (no timers are advanced) and returns what it sent.
// readResponse sends response i of n (1024 bytes each, from src) to a READ whose
// request had PSN first: FIRST, MIDDLE or LAST, the AETH an ACK with MSN 1.
func (r *raw) readResponse(src []byte, first uint32, i, n int) {
	op := roce.RC_RDMA_READ_RESPONSE_MIDDLE
	switch i {
	case 0:
		op = roce.RC_RDMA_READ_RESPONSE_FIRST
	case n - 1:
		op = roce.RC_RDMA_READ_RESPONSE_LAST
	}
	r.send(op, first+uint32(i), func(p *roce.Packet) {
		p.Payload = src[i*1024 : (i+1)*1024]
		p.AETH = roce.AETH{Syndrome: roce.SyndromeACK, MSN: 1}
	})
}

func (r *raw) step() []roce.Packet {
	r.t.Helper()
	for i := 0; i < 1000 && progress(r.t, r.e.dev); i++ {
		r.clock.Advance(time.Microsecond)
	}
	return r.sent()
}

// sent returns the packets the engine has sent since the last look.
func (r *raw) sent() []roce.Packet {
	r.t.Helper()
	var out []roce.Packet
	frames := make([][]byte, 256)
	for {
		n, err := r.end.Recv(frames)
		must(r.t, err)
		if n == 0 {
			return out
		}
		for _, f := range frames[:n] {
			var p roce.Packet
			must(r.t, p.Decode(append([]byte(nil), f...)))
			out = append(out, p)
		}
	}
}

// advance moves the clock to the engine's next deadline and steps.
func (r *raw) advance() []roce.Packet {
	r.t.Helper()
	next := r.e.dev.NextDeadline()
	if next.IsZero() {
		r.t.Fatal("no timer armed")
	}
	r.clock.Set(next)
	return r.step()
}

func (r *raw) wcs() []transport.WorkCompletion {
	var buf [64]transport.WorkCompletion
	n := r.e.cq.Poll(buf[:])
	return buf[:n]
}

// wantWCs polls the completions, which must be n.
func (r *raw) wantWCs(n int) []transport.WorkCompletion {
	r.t.Helper()
	wcs := r.wcs()
	if len(wcs) != n {
		r.t.Fatalf("completions %+v, want %d; counters %v", wcs, n, r.e.counters())
	}
	return wcs
}

// expect checks the opcodes and PSNs of packets.
func expect(t *testing.T, what string, got []roce.Packet, want ...any) {
	t.Helper()
	if len(got) != len(want)/2 {
		t.Fatalf("%s: %d packets %v, want %v", what, len(got), summary(got), want)
	}
	for i := range got {
		op, psn := want[2*i].(roce.Opcode), want[2*i+1].(int)
		if got[i].BTH.Opcode != op || got[i].BTH.PSN != uint32(psn)&roce.PSNMask {
			t.Fatalf("%s: packets %v, want %v", what, summary(got), want)
		}
	}
}

func summary(ps []roce.Packet) []string {
	var s []string
	for _, p := range ps {
		x := p.BTH.Opcode.String() + "@" + itoa(p.BTH.PSN)
		if p.Headers&roce.HdrAETH != 0 {
			x += "/" + p.AETH.Syndrome.String()
		}
		s = append(s, x)
	}
	return s
}

func itoa(v uint32) string {
	const digits = "0123456789"
	if v == 0 {
		return "0"
	}
	var b []byte
	for v > 0 {
		b = append([]byte{digits[v%10]}, b...)
		v /= 10
	}
	return string(b)
}

// write3 posts a 3-packet RDMA WRITE from the engine.
func (r *raw) write(n int) {
	r.t.Helper()
	fill(r.e.buf[:n], 5)
	must(r.t, postSend(r.e, transport.SendWR{WRID: 1, Opcode: transport.WR_RDMA_WRITE, SGList: sge(r.e, 0, n),
		Flags: transport.SendSignaled, RemoteAddr: 0x10000, RKey: 0x77}))
}

func TestGhostAndStaleACKs(t *testing.T) {
	r := newRaw(t, 100, 500, pairConfig{})
	r.write(2500)
	expect(t, "write", r.step(), roce.RC_RDMA_WRITE_FIRST, 100, roce.RC_RDMA_WRITE_MIDDLE, 101, roce.RC_RDMA_WRITE_LAST, 102)
	r.send(ack(200, roce.SyndromeACK, 1)) // ghost: never sent
	r.step()
	if len(r.wcs()) != 0 || r.e.qp.Counters().Get(transport.CntGhostAck) != 1 {
		t.Fatalf("ghost ACK: completions or counter %v", r.e.counters())
	}
	r.send(ack(102, roce.SyndromeACK, 1))
	r.step()
	checkWC(t, r.wantWCs(1)[0], 1, transport.WC_SUCCESS, transport.WC_RDMA_WRITE, -1)
	r.send(ack(102, roce.SyndromeACK, 1)) // duplicate
	r.send(ack(99, roce.SyndromeACK, 0))  // stale
	if out := r.step(); len(out) != 0 || len(r.wcs()) != 0 {
		t.Fatalf("stale ACKs caused %v", summary(out))
	}
	if got := r.e.qp.Counters().Get(transport.CntStaleAck); got != 2 {
		t.Errorf("stale_ack %d, want 2", got)
	}
	if !r.e.dev.NextDeadline().IsZero() {
		t.Error("retransmit timer still armed with nothing outstanding")
	}
}

func TestNAKSequenceErrorRetry(t *testing.T) {
	r := newRaw(t, 0x10, 500, pairConfig{})
	r.write(2500)
	r.step()
	r.send(ack(0x11, roce.SyndromeNAKPSNSequenceError, 0)) // 0x10 arrived, 0x11 did not
	expect(t, "resend after NAK", r.step(), roce.RC_RDMA_WRITE_MIDDLE, 0x11, roce.RC_RDMA_WRITE_LAST, 0x12)
	if c := r.e.qp.Counters(); c.Get(transport.CntRcvdSeqErr) != 1 || c.Get(transport.CntCompleterRetryErr) != 1 {
		t.Errorf("counters %v", r.e.counters())
	}
	r.send(ack(0x12, roce.SyndromeACK, 1))
	r.step()
	if wcs := r.wcs(); len(wcs) != 1 || wcs[0].Status != transport.WC_SUCCESS {
		t.Fatalf("completions %+v", wcs)
	}
}

// TestTimeoutPartialWriteRetry: with the first two packets acknowledged, the local ACK
// timeout resends only from the third; the timeout is 4.096 µs × 2^timeout.
func TestTimeoutPartialWriteRetry(t *testing.T) {
	r := newRaw(t, 1000, 500, pairConfig{timeout: 12})
	r.write(5000)
	expect(t, "write", r.step(), roce.RC_RDMA_WRITE_FIRST, 1000, roce.RC_RDMA_WRITE_MIDDLE, 1001,
		roce.RC_RDMA_WRITE_MIDDLE, 1002, roce.RC_RDMA_WRITE_MIDDLE, 1003, roce.RC_RDMA_WRITE_LAST, 1004)
	r.send(ack(1001, roce.SyndromeACK, 0))
	r.step()
	start := r.clock.Now()
	out := r.advance()
	if el := r.clock.Now().Sub(start); el != 16777216*time.Nanosecond {
		t.Errorf("timeout after %v, want 16.777216ms", el)
	}
	expect(t, "resend after timeout", out, roce.RC_RDMA_WRITE_MIDDLE, 1002, roce.RC_RDMA_WRITE_MIDDLE, 1003, roce.RC_RDMA_WRITE_LAST, 1004)
	if !out[2].BTH.AckReq || out[0].BTH.AckReq {
		t.Error("AckReq placement on resend")
	}
	r.send(ack(1004, roce.SyndromeACK, 1))
	r.step()
	if wcs := r.wcs(); len(wcs) != 1 || wcs[0].Status != transport.WC_SUCCESS {
		t.Fatalf("completions %+v", wcs)
	}
	if got := r.e.qp.Counters().Get(transport.CntLocalAckTimeoutErr); got != 1 {
		t.Errorf("local_ack_timeout_err %d", got)
	}
}

// TestPartialReadRetry: a gap in READ responses makes the requester ask again from the
// first missing PSN, for the remaining bytes only.
func TestPartialReadRetry(t *testing.T) {
	r := newRaw(t, 0xFFFFFE, 500, pairConfig{}) // the READ's PSNs wrap past 0xFFFFFF
	src := make([]byte, 4000)
	fill(src, 11)
	must(t, postSend(r.e, transport.SendWR{WRID: 7, Opcode: transport.WR_RDMA_READ, SGList: sge(r.e, 0, 4000),
		Flags: transport.SendSignaled, RemoteAddr: 0x5000, RKey: 0x1234}))
	out := r.step()
	expect(t, "read request", out, roce.RC_RDMA_READ_REQUEST, 0xFFFFFE)
	if out[0].RETH != (roce.RETH{VA: 0x5000, RKey: 0x1234, DMALen: 4000}) {
		t.Fatalf("RETH %+v", out[0].RETH)
	}
	resp := func(op roce.Opcode, psn uint32, off, n int) {
		r.send(op, psn, func(p *roce.Packet) {
			p.Payload = src[off : off+n]
			p.AETH = roce.AETH{Syndrome: roce.SyndromeACK, MSN: 1}
		})
	}
	resp(roce.RC_RDMA_READ_RESPONSE_FIRST, 0xFFFFFE, 0, 1024)
	resp(roce.RC_RDMA_READ_RESPONSE_MIDDLE, 0xFFFFFF, 1024, 1024)
	resp(roce.RC_RDMA_READ_RESPONSE_LAST, 1, 3072, 928) // PSN 0 lost
	out = r.step()
	expect(t, "read asked again", out, roce.RC_RDMA_READ_REQUEST, 0)
	if out[0].RETH != (roce.RETH{VA: 0x5000 + 2048, RKey: 0x1234, DMALen: 4000 - 2048}) {
		t.Fatalf("RETH of the retry %+v", out[0].RETH)
	}
	if r.e.qp.Counters().Get(transport.CntImpliedNak) != 1 {
		t.Errorf("counters %v", r.e.counters())
	}
	resp(roce.RC_RDMA_READ_RESPONSE_FIRST, 0, 2048, 1024)
	resp(roce.RC_RDMA_READ_RESPONSE_LAST, 1, 3072, 928)
	r.step()
	wcs := r.wcs()
	if len(wcs) != 1 {
		t.Fatalf("completions %+v", wcs)
	}
	checkWC(t, wcs[0], 7, transport.WC_SUCCESS, transport.WC_RDMA_READ, 4000)
	checkBytes(t, "read data", r.e.buf[:4000], src)
}

// TestResponderSequence covers the responder's PSN check: out of sequence gets one
// NAK per sequence, duplicates are re-acknowledged without re-executing, and an
// unexpected opcode in the middle of a message gets NAK invalid request.
func TestResponderSequence(t *testing.T) {
	r := newRaw(t, 100, 0xFFFFFF, pairConfig{})
	must(t, postRecv(r.e, 1, 0, 2048))
	must(t, postRecv(r.e, 2, 4096, 2048))
	data := make([]byte, 1500)
	fill(data, 3)
	send := func(op roce.Opcode, psn uint32, b []byte, ackreq bool) {
		r.send(op, psn, func(p *roce.Packet) { p.Payload = b; p.BTH.AckReq = ackreq })
	}
	// Out of sequence: PSN 1 and 2 while 0xFFFFFF is expected: one NAK only.
	send(roce.RC_SEND_ONLY, 1, data[:10], true)
	send(roce.RC_SEND_ONLY, 2, data[:10], true)
	expect(t, "out of sequence", r.step(), roce.RC_ACKNOWLEDGE, 0xFFFFFF)
	if c := r.e.qp.Counters().Get(transport.CntOutOfSeqRequest); c != 2 {
		t.Errorf("out_of_seq_request %d", c)
	}
	// In sequence across the PSN wrap: FIRST at 0xFFFFFF, LAST at 0.
	send(roce.RC_SEND_FIRST, 0xFFFFFF, data[:1024], false)
	send(roce.RC_SEND_LAST, 0, data[1024:1500], true)
	out := r.step()
	expect(t, "send", out, roce.RC_ACKNOWLEDGE, 0)
	if out[0].AETH != (roce.AETH{Syndrome: roce.SyndromeACK, MSN: 1}) {
		t.Errorf("AETH %+v", out[0].AETH)
	}
	wcs := r.wcs()
	if len(wcs) != 1 {
		t.Fatalf("completions %+v", wcs)
	}
	checkWC(t, wcs[0], 1, transport.WC_SUCCESS, transport.WC_RECV, 1500)
	checkBytes(t, "received", r.e.buf[:1500], data)
	// Duplicate of the LAST: re-acknowledged (PSN 0, MSN 1), not executed again.
	send(roce.RC_SEND_LAST, 0, data[1024:1500], true)
	out = r.step()
	expect(t, "duplicate", out, roce.RC_ACKNOWLEDGE, 0)
	if out[0].AETH.MSN != 1 || len(r.wcs()) != 0 || r.e.qp.Counters().Get(transport.CntDuplicateRequest) != 1 {
		t.Fatalf("duplicate handling: %+v %v", out[0].AETH, r.e.counters())
	}
	// A WRITE_MIDDLE in the middle of a SEND: NAK invalid request, QP to ERR.
	send(roce.RC_SEND_FIRST, 1, data[:1024], false)
	r.send(roce.RC_RDMA_WRITE_MIDDLE, 2, func(p *roce.Packet) { p.Payload = data[:1024] })
	out = r.step()
	expect(t, "unexpected opcode", out, roce.RC_ACKNOWLEDGE, 2)
	if out[0].AETH.Syndrome != roce.SyndromeNAKInvalidRequest {
		t.Fatalf("syndrome %v", out[0].AETH.Syndrome)
	}
	if r.e.qp.State() != transport.QPS_ERR {
		t.Errorf("state %v", r.e.qp.State())
	}
	wcs = r.wcs()
	if len(wcs) != 1 || wcs[0].WRID != 2 || wcs[0].Status != transport.WC_WR_FLUSH_ERR {
		t.Errorf("completions %+v", wcs)
	}
}

// TestResponderMalformed: lengths that break the PMTU rules get NAK invalid request;
// a payload longer than the PMTU (the requester's path MTU is larger) also counts
// rcvd_oversize, which the tools' error messages read, and a FIRST or MIDDLE one
// shorter than it (the requester's path MTU is smaller) rcvd_undersize, which the
// daemon logs.
func TestResponderMalformed(t *testing.T) {
	for _, c := range []struct {
		name     string
		op       roce.Opcode
		n        int
		reth     uint32
		oversize uint64
		under    uint64
	}{
		{"WRITE_FIRST shorter than PMTU", roce.RC_RDMA_WRITE_FIRST, 1000, 3000, 0, 1},
		{"WRITE_ONLY longer than PMTU", roce.RC_RDMA_WRITE_ONLY, 1028, 1028, 1, 0},
		{"WRITE_ONLY length differs from DMA length", roce.RC_RDMA_WRITE_ONLY, 100, 200, 0, 0},
		{"SEND_FIRST longer than PMTU", roce.RC_SEND_FIRST, 1028, 0, 1, 0},
		{"SEND_FIRST shorter than PMTU", roce.RC_SEND_FIRST, 512, 0, 0, 1},
		{"SEND_MIDDLE without FIRST", roce.RC_SEND_MIDDLE, 1024, 0, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRaw(t, 1, 50, pairConfig{})
			must(t, postRecv(r.e, 1, 0, 4096))
			before := append([]byte(nil), r.e.buf...)
			r.send(c.op, 50, func(p *roce.Packet) {
				p.Payload = make([]byte, c.n)
				p.RETH = roce.RETH{VA: r.e.mr.Addr(), RKey: r.e.mr.RKey(), DMALen: c.reth}
			})
			out := r.step()
			expect(t, c.name, out, roce.RC_ACKNOWLEDGE, 50)
			if out[0].AETH.Syndrome != roce.SyndromeNAKInvalidRequest {
				t.Fatalf("syndrome %v", out[0].AETH.Syndrome)
			}
			if got := r.e.dev.Counters().Get(transport.CntRcvdOversize); got != c.oversize {
				t.Errorf("rcvd_oversize %d, want %d", got, c.oversize)
			}
			if got := r.e.dev.Counters().Get(transport.CntRcvdUndersize); got != c.under {
				t.Errorf("rcvd_undersize %d, want %d", got, c.under)
			}
			checkBytes(t, "memory", r.e.buf, before)
		})
	}
}

// TestDuplicateAtomicAndRead: a duplicate atomic gets its saved result and is not
// executed again; a duplicate READ is executed again from the PSN asked for.
func TestDuplicateAtomicAndRead(t *testing.T) {
	r := newRaw(t, 1, 700, pairConfig{})
	b := r.e.buf
	b[64] = 10
	fa := func(psn uint32) {
		r.send(roce.RC_FETCH_ADD, psn, func(p *roce.Packet) {
			p.AtomicETH = roce.AtomicETH{VA: r.e.mr.Addr() + 64, RKey: r.e.mr.RKey(), SwapAdd: 5}
			p.BTH.AckReq = true
		})
	}
	fa(700)
	out := r.step()
	expect(t, "fetch-add", out, roce.RC_ATOMIC_ACKNOWLEDGE, 700)
	fa(700)
	out2 := r.step()
	expect(t, "duplicate fetch-add", out2, roce.RC_ATOMIC_ACKNOWLEDGE, 700)
	if out[0].AtomicAckETH.OrigRemData != 10 || out2[0].AtomicAckETH.OrigRemData != 10 || b[64] != 15 {
		t.Fatalf("orig %d and %d, target %d: want 10, 10 and 15", out[0].AtomicAckETH.OrigRemData, out2[0].AtomicAckETH.OrigRemData, b[64])
	}
	fill(b[1000:4000], 8)
	rd := func(psn uint32, off, n int) {
		r.send(roce.RC_RDMA_READ_REQUEST, psn, func(p *roce.Packet) {
			p.RETH = roce.RETH{VA: r.e.mr.Addr() + uint64(off), RKey: r.e.mr.RKey(), DMALen: uint32(n)}
			p.BTH.AckReq = true
		})
	}
	rd(701, 1000, 3000)
	out = r.step()
	expect(t, "read", out, roce.RC_RDMA_READ_RESPONSE_FIRST, 701, roce.RC_RDMA_READ_RESPONSE_MIDDLE, 702, roce.RC_RDMA_READ_RESPONSE_LAST, 703)
	rd(703, 3048, 952) // asked again from its third packet
	out = r.step()
	expect(t, "duplicate read", out, roce.RC_RDMA_READ_RESPONSE_ONLY, 703)
	checkBytes(t, "re-read bytes", out[0].Payload, b[3048:4000])
	if out[0].AETH.MSN != 2 {
		t.Errorf("MSN %d, want the original READ's 2", out[0].AETH.MSN)
	}
	// Zero-length READ and WRITE.
	rd(704, 0, 0)
	expect(t, "zero-length read", r.step(), roce.RC_RDMA_READ_RESPONSE_ONLY, 704)
	r.send(roce.RC_RDMA_WRITE_ONLY, 705, func(p *roce.Packet) { p.BTH.AckReq = true; p.RETH = roce.RETH{RKey: 0xbad} })
	expect(t, "zero-length write", r.step(), roce.RC_ACKNOWLEDGE, 705)
}

// TestRNRNAKTimerCode: the RNR NAK carries the QP's min_rnr_timer.
func TestRNRNAKTimerCode(t *testing.T) {
	r := newRaw(t, 1, 10, pairConfig{minRNRTimer: 18})
	r.send(roce.RC_SEND_ONLY, 10, func(p *roce.Packet) { p.Payload = []byte("x"); p.BTH.AckReq = true })
	out := r.step()
	expect(t, "RNR", out, roce.RC_ACKNOWLEDGE, 10)
	if out[0].AETH.Syndrome != roce.RNRNAKSyndrome(18) || out[0].AETH.Syndrome.Kind() != roce.KindRNRNAK {
		t.Fatalf("syndrome %v", out[0].AETH.Syndrome)
	}
}

// TestRNRThenSequenceNAK: a responder out of receives sends an RNR NAK and then a
// NAK PSN sequence error for the same PSN (the packets behind it arrive out of
// sequence), round after round until it reposts receives, as rdma_rxe under load
// does. The requester waits the RNR delay each round, then sends only the NAKed
// message's first packet with AckReq (one packet per RNR period, not the window),
// and never spends retry_cnt on those NAKs: with retry_cnt 1 it still completes.
func TestRNRThenSequenceNAK(t *testing.T) {
	r := newRaw(t, 50, 500, pairConfig{retryCnt: 1, rnrRetry: 7, timeout: 18})
	for i := 0; i < 3; i++ {
		must(t, postSend(r.e, transport.SendWR{WRID: uint64(i), Opcode: transport.WR_SEND, SGList: sge(r.e, 0, 1), Flags: transport.SendSignaled}))
	}
	expect(t, "sends", r.step(), roce.RC_SEND_ONLY, 50, roce.RC_SEND_ONLY, 51, roce.RC_SEND_ONLY, 52)
	r.send(ack(50, roce.SyndromeACK, 1))
	for round := 0; round < 8; round++ {
		r.send(ack(51, roce.RNRNAKSyndrome(12), 1))
		r.send(ack(51, roce.SyndromeNAKPSNSequenceError, 1))
		if out := r.step(); len(out) != 0 {
			t.Fatalf("round %d: resent before the RNR delay: %v", round, summary(out))
		}
		start := r.clock.Now()
		out := r.advance()
		if el := r.clock.Now().Sub(start); el != 640*time.Microsecond {
			t.Fatalf("round %d: resent after %v, want the RNR delay 640µs", round, el)
		}
		expect(t, "resend", out, roce.RC_SEND_ONLY, 51)
		if !out[0].BTH.AckReq {
			t.Fatalf("round %d: the RNR probe has no AckReq", round)
		}
		if out := r.step(); len(out) != 0 {
			t.Fatalf("round %d: more than the probe before its answer: %v", round, summary(out))
		}
	}
	r.send(ack(51, roce.SyndromeACK, 2))
	expect(t, "after the probe's ACK", r.step(), roce.RC_SEND_ONLY, 52)
	r.send(ack(52, roce.SyndromeACK, 3))
	r.step()
	wcs := r.wcs()
	if len(wcs) != 3 || wcs[2].Status != transport.WC_SUCCESS {
		t.Fatalf("completions %+v", wcs)
	}
}

// TestReadGapSlowResponder: a READ response packet goes missing while the responder
// still has much of the READ to send (rdma_rxe on a slow host, answering an 8 MiB
// READ). The rest of the stream keeps coming, out of sequence, for longer than the
// retransmit timeout; the requester asks again once and waits for the stream to end
// (the responder answers the new request after it) instead of spending retry_cnt
// on every timeout and failing with IBV_WC_RETRY_EXC_ERR.
func TestReadGapSlowResponder(t *testing.T) {
	r := newRaw(t, 100, 500, pairConfig{retryCnt: 2, timeout: 10}) // 4.2 ms
	const n = 40
	src := make([]byte, n*1024)
	fill(src, 12)
	must(t, postSend(r.e, transport.SendWR{WRID: 9, Opcode: transport.WR_RDMA_READ, SGList: sge(r.e, 0, len(src)),
		Flags: transport.SendSignaled, RemoteAddr: 0x5000, RKey: 0x1234}))
	expect(t, "read request", r.step(), roce.RC_RDMA_READ_REQUEST, 100)
	resp := func(i int) { r.readResponse(src, 100, i, n) }
	resp(0)
	resp(1) // 2 is lost
	resp(3)
	expect(t, "read asked again from the gap", r.step(), roce.RC_RDMA_READ_REQUEST, 102)
	// The rest of the first answer: a packet every 2 ms, 72 ms in all, well past
	// retry_cnt+1 timeouts of 4.2 ms.
	for i := 4; i < n; i++ {
		r.clock.Advance(2 * time.Millisecond)
		resp(i)
		if out := r.step(); len(out) != 0 {
			t.Fatalf("after response %d: sent %v while the first answer is still coming", i, summary(out))
		}
	}
	// Then the answer to the request asked again (rdma_rxe starts it with a MIDDLE).
	for i := 2; i < n; i++ {
		resp(i)
	}
	r.step()
	wcs := r.wcs()
	if len(wcs) != 1 {
		t.Fatalf("completions %+v, counters %v", wcs, r.e.counters())
	}
	checkWC(t, wcs[0], 9, transport.WC_SUCCESS, transport.WC_RDMA_READ, len(src))
	checkBytes(t, "read data", r.e.buf[:len(src)], src)
	if c := r.e.qp.Counters(); c.Get(transport.CntLocalAckTimeoutErr) != 0 || c.Get(transport.CntImpliedNak) != 1 {
		t.Errorf("counters %v", r.e.counters())
	}
}

// TestReadGapLaterReadsStreaming: two READs are outstanding and a response packet
// of the first goes missing. The responder (rdma_rxe under TCG) first streams the
// rest of the first READ and then the whole first answer of the second, all
// discarded by the requester, for longer than retry_cnt+1 timeouts. Every response
// restarts the retransmit timer, as in rxe_comp.c: the requester asks again once,
// go-back-N (the first READ from the gap, the second whole), never times out,
// and completes both from the answers to the requests asked again.
func TestReadGapLaterReadsStreaming(t *testing.T) {
	r := newRaw(t, 100, 500, pairConfig{retryCnt: 2, timeout: 10}) // 4.2 ms
	const n = 20                                                   // packets per READ
	src := make([]byte, 2*n*1024)
	fill(src, 13)
	for k := range 2 {
		must(t, postSend(r.e, transport.SendWR{WRID: uint64(k + 1), Opcode: transport.WR_RDMA_READ,
			SGList: sge(r.e, k*n*1024, n*1024), Flags: transport.SendSignaled,
			RemoteAddr: 0x5000 + uint64(k*n*1024), RKey: 0x1234}))
	}
	expect(t, "read requests", r.step(), roce.RC_RDMA_READ_REQUEST, 100, roce.RC_RDMA_READ_REQUEST, 100+n)
	// resp sends packet i of READ k's answer, which starts at packet from.
	resp := func(k, i, from int) {
		op := roce.RC_RDMA_READ_RESPONSE_MIDDLE // also the start of an answer from the middle, as rdma_rxe sends it
		switch {
		case i == n-1:
			op = roce.RC_RDMA_READ_RESPONSE_LAST
		case i == 0:
			op = roce.RC_RDMA_READ_RESPONSE_FIRST
		}
		off := (k*n + i) * 1024
		r.send(op, uint32(100+k*n+i), func(p *roce.Packet) {
			p.Payload = src[off : off+1024]
			p.AETH = roce.AETH{Syndrome: roce.SyndromeACK, MSN: uint32(k + 1)}
		})
	}
	resp(0, 0, 0)
	resp(0, 1, 0) // 2 is lost
	resp(0, 3, 0)
	out := r.step()
	expect(t, "asked again from the gap, go-back-N", out, roce.RC_RDMA_READ_REQUEST, 102, roce.RC_RDMA_READ_REQUEST, 100+n)
	if out[0].RETH.VA != 0x5000+2*1024 || out[0].RETH.DMALen != (n-2)*1024 || out[1].RETH.VA != 0x5000+n*1024 || out[1].RETH.DMALen != n*1024 {
		t.Fatalf("RETHs %+v %+v", out[0].RETH, out[1].RETH)
	}
	// The rest of the first READ's answer, then the second's, a packet every 2 ms:
	// 70 ms in all, well past retry_cnt+1 timeouts of 4.2 ms.
	for k, from := range []int{4, 0} {
		for i := from; i < n; i++ {
			r.clock.Advance(2 * time.Millisecond)
			resp(k, i, 0)
			if out := r.step(); len(out) != 0 {
				t.Fatalf("after response %d of READ %d: sent %v while the first answers are still coming", i, k+1, summary(out))
			}
		}
	}
	// The answers to the requests asked again.
	for i := 2; i < n; i++ {
		resp(0, i, 2)
	}
	for i := 0; i < n; i++ {
		resp(1, i, 0)
	}
	r.step()
	wcs := r.wcs()
	if len(wcs) != 2 {
		t.Fatalf("completions %+v, counters %v", wcs, r.e.counters())
	}
	checkWC(t, wcs[0], 1, transport.WC_SUCCESS, transport.WC_RDMA_READ, n*1024)
	checkWC(t, wcs[1], 2, transport.WC_SUCCESS, transport.WC_RDMA_READ, n*1024)
	checkBytes(t, "read data", r.e.buf[:len(src)], src)
	if c := r.e.qp.Counters(); c.Get(transport.CntLocalAckTimeoutErr) != 0 || c.Get(transport.CntImpliedNak) != 1 {
		t.Errorf("counters %v", r.e.counters())
	}
	// Silence afterwards: nothing is outstanding, so no timer runs.
	r.clock.Advance(time.Second)
	if out := r.step(); len(out) != 0 {
		t.Fatalf("sent %v with nothing outstanding", summary(out))
	}
}

// TestRNRProbeMultiPacket: a 3-packet SEND meets a responder out of receives. After
// each RNR delay only SEND_FIRST goes out, with AckReq, until the responder answers
// it; its ACK lets the rest of the message follow.
func TestRNRProbeMultiPacket(t *testing.T) {
	r := newRaw(t, 10, 500, pairConfig{rnrRetry: 7})
	must(t, postSend(r.e, transport.SendWR{WRID: 4, Opcode: transport.WR_SEND, SGList: sge(r.e, 0, 2500), Flags: transport.SendSignaled}))
	expect(t, "send", r.step(), roce.RC_SEND_FIRST, 10, roce.RC_SEND_MIDDLE, 11, roce.RC_SEND_LAST, 12)
	for round := 0; round < 3; round++ {
		r.send(ack(10, roce.RNRNAKSyndrome(12), 0))
		if out := r.step(); len(out) != 0 {
			t.Fatalf("round %d: sent before the RNR delay: %v", round, summary(out))
		}
		out := r.advance()
		expect(t, "probe", out, roce.RC_SEND_FIRST, 10)
		if !out[0].BTH.AckReq {
			t.Fatalf("round %d: the probe has no AckReq", round)
		}
		if out := r.step(); len(out) != 0 {
			t.Fatalf("round %d: sent past the probe: %v", round, summary(out))
		}
	}
	r.send(ack(10, roce.SyndromeACK, 0))
	expect(t, "rest", r.step(), roce.RC_SEND_MIDDLE, 11, roce.RC_SEND_LAST, 12)
	r.send(ack(12, roce.SyndromeACK, 1))
	r.step()
	if wcs := r.wcs(); len(wcs) != 1 || wcs[0].Status != transport.WC_SUCCESS || wcs[0].WRID != 4 {
		t.Fatalf("completions %+v", wcs)
	}
	if c := r.e.qp.Counters().Get(transport.CntRcvdRNRErr); c != 3 {
		t.Errorf("rcvd_rnr_err %d, want 3", c)
	}
}

// TestForeignAddressDropped: an RC request from the QP's peer to a destination IP
// that is none of the device's GIDs is dropped before any QP sees it and counted
// in rcvd_bad_dgid (rxe_recv.c rxe_chk_dgid); one from another source IP is
// dropped and counted as for an unknown QP (check_addr); neither is answered nor
// writes anything (xroce conform's wrong-dest-gid and spoofed-src-gid); the same
// request correctly addressed is then acknowledged at the same PSN.
func TestForeignAddressDropped(t *testing.T) {
	r := newRaw(t, 1, 40, pairConfig{})
	write := func(edit func(p *roce.Packet)) {
		r.send(roce.RC_RDMA_WRITE_ONLY, 40, func(p *roce.Packet) {
			p.BTH.AckReq = true
			p.RETH = roce.RETH{VA: r.e.mr.Addr(), RKey: r.e.mr.RKey(), DMALen: 4}
			p.Payload = []byte{1, 2, 3, 4}
			edit(p)
		})
	}
	c := r.e.dev.Counters()
	unknown, badDGID, rcvd := c.Get(transport.CntRcvdUnknownQP), c.Get(transport.CntRcvdBadDGID), c.Get(transport.CntRcvdPkts)
	write(func(p *roce.Packet) { p.IPv4.Dst = [4]byte{192, 0, 2, 1} })
	write(func(p *roce.Packet) { p.IPv4.Src = [4]byte{192, 0, 2, 2} })
	if out := r.step(); len(out) != 0 {
		t.Fatalf("answered %v", summary(out))
	}
	if u, b, n := c.Get(transport.CntRcvdUnknownQP), c.Get(transport.CntRcvdBadDGID), c.Get(transport.CntRcvdPkts); u != unknown+1 || b != badDGID+1 || n != rcvd {
		t.Errorf("rcvd_unknown_qp +%d, rcvd_bad_dgid +%d, rcvd_pkts +%d; want +1, +1, +0", u-unknown, b-badDGID, n-rcvd)
	}
	checkBytes(t, "memory", r.e.buf[:4], []byte{0, 0, 0, 0})
	write(func(*roce.Packet) {})
	expect(t, "addressed write", r.step(), roce.RC_ACKNOWLEDGE, 40)
	checkBytes(t, "memory", r.e.buf[:4], []byte{1, 2, 3, 4})
}
