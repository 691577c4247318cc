package transport_test

import (
	"testing"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// readSeg is a READ WR the engine is asked for, answered by hand: the source bytes
// and the PSN of its first response packet.
type readSeg struct {
	r     *raw
	src   []byte
	first uint32
}

// postRead posts a READ of n bytes from remote 0x100000 into the engine's buffer.
func (r *raw) postRead(wrid uint64, n int, first uint32) *readSeg {
	r.t.Helper()
	src := make([]byte, n)
	fill(src, wrid)
	must(r.t, postSend(r.e, transport.SendWR{WRID: wrid, Opcode: transport.WR_RDMA_READ, SGList: sge(r.e, 0, n),
		Flags: transport.SendSignaled, RemoteAddr: 0x100000, RKey: 0x4321}))
	return &readSeg{r: r, src: src, first: first}
}

// answer sends response packets [k, to) of the WR, as the answer to a request for
// packets [from, end) sends them (FIRST at from, LAST at end-1, ONLY if both).
func (s *readSeg) answer(from, end, k, to int) {
	for ; k < to; k++ {
		op := roce.RC_RDMA_READ_RESPONSE_MIDDLE
		switch {
		case k == from && k == end-1:
			op = roce.RC_RDMA_READ_RESPONSE_ONLY
		case k == from:
			op = roce.RC_RDMA_READ_RESPONSE_FIRST
		case k == end-1:
			op = roce.RC_RDMA_READ_RESPONSE_LAST
		}
		off := k * 1024
		s.r.send(op, s.first+uint32(k), func(p *roce.Packet) {
			p.Payload = s.src[off:min(off+1024, len(s.src))]
			p.AETH = roce.AETH{Syndrome: roce.SyndromeACK, MSN: 1}
		})
	}
}

// lose sends the answer to a request for packets [from, end) but packet k.
func (s *readSeg) lose(from, end, k int) {
	s.answer(from, end, from, k)
	s.answer(from, end, k+1, end)
}

// startRead posts READ wrid of n bytes (more than two segments' worth) from an
// engine whose requester starts at psn, and checks that its first two segments of
// 64 packets go out.
func startRead(t *testing.T, psn uint32, wrid uint64, n int) (*raw, *readSeg) {
	t.Helper()
	r := newRaw(t, psn, 500, pairConfig{bufSize: 1 << 20})
	s := r.postRead(wrid, n, psn)
	s.expectAsks("two segments", r.step(), 0, 64, 64, 128)
	return r, s
}

// expectAsks checks that out is exactly the READ requests asking for packets
// [from, end) of the WR, in pairs.
func (s *readSeg) expectAsks(what string, out []roce.Packet, ranges ...int) {
	t := s.r.t
	t.Helper()
	if len(out) != len(ranges)/2 {
		t.Fatalf("%s: %v, want %d READ requests", what, summary(out), len(ranges)/2)
	}
	for i, p := range out {
		from, end := ranges[2*i], ranges[2*i+1]
		want := roce.RETH{VA: 0x100000 + uint64(from*1024), RKey: 0x4321, DMALen: uint32(min(end*1024, len(s.src)) - from*1024)}
		if p.BTH.Opcode != roce.RC_RDMA_READ_REQUEST || p.BTH.PSN != (s.first+uint32(from))&roce.PSNMask || !p.BTH.AckReq || p.RETH != want {
			t.Fatalf("%s: request %d is %v %+v AckReq %v, want PSN %d %+v", what, i, summary(out[i:i+1]), p.RETH,
				p.BTH.AckReq, s.first+uint32(from), want)
		}
	}
}

// done checks the single completion and the bytes read.
func (s *readSeg) done(wrid uint64) {
	t := s.r.t
	t.Helper()
	checkWC(t, s.r.wantWCs(1)[0], wrid, transport.WC_SUCCESS, transport.WC_RDMA_READ, len(s.src))
	checkBytes(t, "read data", s.r.e.buf[:len(s.src)], s.src)
}

// finish steps the engine, checks the completion and the bytes, and that the
// segments were asked again naks times in all, never by going back (no go-back-N,
// no timeout).
func (s *readSeg) finish(wrid uint64, naks int) {
	s.r.t.Helper()
	s.r.step()
	s.done(wrid)
	c := s.r.e.qp.Counters()
	if c.Get(transport.CntImpliedNak) != uint64(naks) || c.Get(transport.CntCompleterRetryErr) != 0 || c.Get(transport.CntLocalAckTimeoutErr) != 0 {
		s.r.t.Errorf("counters %v, want implied_nak %d", s.r.e.counters(), naks)
	}
}

// TestReadSegmentsOnWire: a READ WR larger than a segment (half the window of 128
// PSNs: 64 packets with max_rd_atomic 16) goes out as several READ requests, each
// taking as many PSNs as it has response packets (IBTA Vol 1 §9.7.2, §9.4.3), with
// RETH VA advanced and DMA length reduced; a request goes out while its first PSN
// fits the window. A READ of exactly three segments, and one of three segments and
// one byte, each complete once.
func TestReadSegmentsOnWire(t *testing.T) {
	for _, c := range []struct {
		name string
		n    int
		segs []int // packet boundaries of the requests
	}{
		{"3 segments", 3 * 64 * 1024, []int{0, 64, 64, 128, 128, 192}},
		{"3 segments and 1 byte", 3*64*1024 + 1, []int{0, 64, 64, 128, 128, 192, 192, 193}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRaw(t, 0xFFFFC0, 500, pairConfig{bufSize: 1 << 20}) // the PSNs wrap
			s := r.postRead(3, c.n, 0xFFFFC0)
			s.expectAsks("first two segments (the third is outside the window)", r.step(), c.segs[:4]...)
			for k := 0; k < len(c.segs)/2; k++ {
				from, end := c.segs[2*k], c.segs[2*k+1]
				s.answer(from, end, from, end)
				out := r.step()
				if k+2 < len(c.segs)/2 {
					s.expectAsks("the next segment once the window opens", out, c.segs[2*k+4], c.segs[2*k+5])
				} else if len(out) != 0 {
					t.Fatalf("after segment %d: %v", k, summary(out))
				}
			}
			s.done(3)
			if got := r.e.qp.Counters().Get(transport.CntSentPkts); got != uint64(len(c.segs)/2) {
				t.Errorf("sent_pkts %d, want %d: one READ request a segment", got, len(c.segs)/2)
			}
		})
	}
}

// TestReadSmallUnsplit: READs of one segment or less go out as one request, as
// before: 64 packets, one byte, zero bytes (DMA length 0, one response PSN).
func TestReadSmallUnsplit(t *testing.T) {
	for _, n := range []int{64 * 1024, 1, 0} {
		r := newRaw(t, 40, 500, pairConfig{})
		s := r.postRead(1, n, 40)
		npkts := max(1, (n+1023)/1024)
		s.expectAsks("one request", r.step(), 0, npkts)
		s.answer(0, npkts, 0, npkts)
		r.step()
		s.done(1)
	}
}

// TestReadSegmentGap: a response lost inside segment 0 of a three-segment READ
// (max_rd_atomic 16) asks again from the gap to the end of segment 0 only
// (§9.7.5.2.7 implied NAK, once for the gap however many later packets show it);
// the answer to segment 1, already on its way, is kept; the window, cut to 89, admits
// the rest once segment 0 is complete, in segments of half the window.
func TestReadSegmentGap(t *testing.T) {
	r, s := startRead(t, 1000, 5, 192*1024)
	s.lose(0, 64, 10)
	s.expectAsks("segment 0 again from the gap", r.step(), 10, 64)
	s.answer(64, 128, 64, 128) // segment 1's answer, sent before the request asked again
	if out := r.step(); len(out) != 0 {
		t.Fatalf("segment 1's answer caused %v", summary(out))
	}
	if cs := r.e.qp.CongestionState(); cs.Cwnd != 89 {
		t.Fatalf("window %d, want 89", cs.Cwnd)
	}
	s.answer(10, 64, 10, 64)
	out := r.step()
	if cs := r.e.qp.CongestionState(); cs.Cwnd != 89 {
		t.Fatalf("window %d, want 89", cs.Cwnd)
	}
	s.expectAsks("segment 2 (45 packets, half the window) and the rest", out, 128, 173, 173, 192)
	s.answer(128, 173, 128, 173)
	s.answer(173, 192, 173, 192)
	s.finish(5, 1)
}

// TestReadSegmentTailLost: the last response of segment 0 is lost; no later packet
// of segment 0 shows it, but the first answer to segment 1, asked after it, does
// (the responder answers READ requests in order, §9.7.5.1.2): segment 0 is asked
// again for its last packet only.
func TestReadSegmentTailLost(t *testing.T) {
	r, s := startRead(t, 7, 2, 128*1024)
	s.answer(0, 64, 0, 63)
	s.answer(64, 128, 64, 70)
	s.expectAsks("segment 0's last packet", r.step(), 63, 64)
	s.answer(64, 128, 70, 128)
	s.answer(63, 64, 63, 64)
	s.finish(2, 1)
}

// TestReadSegmentMaxRdAtomicOne: with max_rd_atomic 1 a segment is the whole window
// (128 packets) and one goes out at a time; a loss in segment 1 asks again for the
// rest of segment 1 only, and the last segment asks for the last byte.
func TestReadSegmentMaxRdAtomicOne(t *testing.T) {
	r := newRaw(t, 1, 500, pairConfig{bufSize: 1 << 20, maxRdAtomic: 1})
	s := r.postRead(4, 256*1024+1, 1)
	s.expectAsks("segment 0", r.step(), 0, 128)
	s.answer(0, 128, 0, 128)
	s.expectAsks("segment 1", r.step(), 128, 256)
	s.lose(128, 256, 200)
	s.expectAsks("segment 1 from the gap", r.step(), 200, 256)
	s.answer(200, 256, 200, 256)
	s.expectAsks("the last byte", r.step(), 256, 257)
	s.answer(256, 257, 256, 257)
	s.finish(4, 1)
}

// TestReadSegmentAccessError: the responder NAKs segment 1's request with a remote
// access error (§9.7.5.2.4): the WR completes with IBV_WC_REM_ACCESS_ERR, the next WR
// is flushed and the QP goes to the error state, as for an unsplit READ.
func TestReadSegmentAccessError(t *testing.T) {
	r := newRaw(t, 300, 500, pairConfig{bufSize: 1 << 20})
	s := r.postRead(6, 150*1024, 300)
	must(t, postSend(r.e, transport.SendWR{WRID: 7, Opcode: transport.WR_RDMA_WRITE, SGList: sge(r.e, 0, 10),
		Flags: transport.SendSignaled, RemoteAddr: 0x5000, RKey: 0x77}))
	s.expectAsks("two segments", r.step(), 0, 64, 64, 128)
	s.answer(0, 64, 0, 64)
	out := r.step()
	s.expectAsks("segment 2", out[:1], 128, 150)
	expect(t, "then the WRITE", out[1:], roce.RC_RDMA_WRITE_ONLY, 450)
	r.send(ack(364, roce.SyndromeNAKRemoteAccessError, 1))
	r.step()
	wcs := r.wantWCs(2)
	checkWC(t, wcs[0], 6, transport.WC_REM_ACCESS_ERR, transport.WC_RDMA_READ, -1)
	checkWC(t, wcs[1], 7, transport.WC_WR_FLUSH_ERR, transport.WC_RDMA_WRITE, -1)
	if st := r.e.qp.State(); st != transport.QPS_ERR {
		t.Errorf("state %v", st)
	}
}

// TestReadSegmentReplayLoses: the answer to segment 0 asked again loses a packet
// too. Its packets come below where the old answer had reached, so the gap is in
// the new answer: segment 0 is asked again from the new gap at once (§9.7.5.2.7),
// not after a retransmission timeout.
func TestReadSegmentReplayLoses(t *testing.T) {
	r, s := startRead(t, 50, 8, 128*1024)
	s.lose(0, 64, 5)
	s.expectAsks("segment 0 from 5", r.step(), 5, 64)
	s.answer(64, 128, 64, 128)
	s.answer(5, 64, 5, 20)
	s.answer(5, 64, 21, 30) // 20 is lost in the new answer, whose rest comes later
	s.expectAsks("segment 0 from 20", r.step(), 20, 64)
	s.answer(5, 64, 30, 64) // the rest of the first answer asked again
	if out := r.step(); len(out) != 0 {
		t.Fatalf("its rest caused %v", summary(out))
	}
	s.answer(20, 64, 20, 64)
	s.finish(8, 2)
}

// TestDuplicateReadKeepsLaterReads: a READ asked again from its middle (a duplicate,
// IBTA Vol 1 §9.7.5.1.2) drops what is queued of that READ's answer, and is answered
// after the READs queued behind it, which are kept: rdma_rxe answers in the order
// the requests arrive, and a requester that split a READ does not ask for them
// again.
func TestDuplicateReadKeepsLaterReads(t *testing.T) {
	r := newRaw(t, 1, 700, pairConfig{})
	fill(r.e.buf[:5*1024], 9)
	rd := func(psn uint32, off, n int) {
		r.send(roce.RC_RDMA_READ_REQUEST, psn, func(p *roce.Packet) {
			p.RETH = roce.RETH{VA: r.e.mr.Addr() + uint64(off), RKey: r.e.mr.RKey(), DMALen: uint32(n)}
			p.BTH.AckReq = true
		})
	}
	rd(700, 0, 3*1024)
	rd(703, 3*1024, 2*1024)
	rd(701, 1024, 2*1024) // asked again before any answer went out
	out := r.step()
	expect(t, "answers", out, roce.RC_RDMA_READ_RESPONSE_FIRST, 703, roce.RC_RDMA_READ_RESPONSE_LAST, 704,
		roce.RC_RDMA_READ_RESPONSE_FIRST, 701, roce.RC_RDMA_READ_RESPONSE_LAST, 702)
	checkBytes(t, "answer from the middle", append(out[2].Payload, out[3].Payload...), r.e.buf[1024:3*1024])
}
