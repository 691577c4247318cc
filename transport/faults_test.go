package transport_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// TestFaults runs a mixed workload in both directions under seeded loss, duplication,
// reordering, corruption and TX refusal: every message completes exactly once, with
// the right data, and the retry counters move.
func TestFaults(t *testing.T) {
	for _, loss := range []float64{0.01, 0.05, 0.10} {
		t.Run(fmt.Sprintf("loss%.0f%%", loss*100), func(t *testing.T) {
			f := transport.Faults{Seed: uint64(loss * 1000), Loss: loss, Duplicate: 0.01, Reorder: 0.02,
				Corrupt: 0.005, TxRefuse: 0.02}
			fb := f
			fb.Seed++
			p := newPair(t, pairConfig{mtu: roce.MTU1024, bufSize: 1 << 22, faultsA: f, faultsB: fb})
			runMixed(t, p, 60)
			retries := p.a.qp.Counters().Get(transport.CntCompleterRetryErr) + p.b.qp.Counters().Get(transport.CntCompleterRetryErr)
			busy := p.a.dev.Counters().Get(transport.CntLinkBusy) + p.b.dev.Counters().Get(transport.CntLinkBusy)
			seq := p.a.qp.Counters().Get(transport.CntOutOfSeqRequest) + p.b.qp.Counters().Get(transport.CntOutOfSeqRequest)
			if retries == 0 || busy == 0 || seq == 0 {
				t.Errorf("counters did not move: retries %d, link busy %d, out of sequence %d", retries, busy, seq)
			}
			t.Logf("A %v\nB %v", p.a.counters(), p.b.counters())
		})
	}
}

// runMixed posts n messages of each kind from A to B (WRITE, READ, SEND, FETCH_ADD)
// and checks each completes exactly once with the right bytes.
func runMixed(t *testing.T, p *pair, n int) {
	a, b := p.a, p.b
	const slot = 1 << 14
	sizes := []int{1, 1000, 1024, 1025, 2500, 9000, 16384}
	for i := 0; i < n; i++ {
		size := sizes[i%len(sizes)]
		off := i * slot % (len(a.buf)/2 - slot)
		src := a.buf[off : off+size]
		fill(src, uint64(i))
		switch i % 4 {
		case 0:
			must(t, postSend(a, transport.SendWR{WRID: uint64(i), Opcode: transport.WR_RDMA_WRITE, SGList: sge(a, off, size),
				Flags: transport.SendSignaled, RemoteAddr: b.mr.Addr() + uint64(len(b.buf)/2+off), RKey: b.mr.RKey()}))
		case 1:
			fill(b.buf[off:off+size], uint64(i)+7)
			must(t, postSend(a, transport.SendWR{WRID: uint64(i), Opcode: transport.WR_RDMA_READ, SGList: sge(a, len(a.buf)/2+off, size),
				Flags: transport.SendSignaled, RemoteAddr: b.mr.Addr() + uint64(off), RKey: b.mr.RKey()}))
		case 2:
			must(t, postRecv(b, uint64(i), len(b.buf)/2+off, size))
			must(t, postSend(a, transport.SendWR{WRID: uint64(i), Opcode: transport.WR_SEND, SGList: sge(a, off, size),
				Flags: transport.SendSignaled}))
		case 3:
			must(t, postSend(a, transport.SendWR{WRID: uint64(i), Opcode: transport.WR_ATOMIC_FETCH_AND_ADD, SGList: sge(a, len(a.buf)/2+off, 8),
				Flags: transport.SendSignaled, RemoteAddr: b.mr.Addr() + uint64(len(b.buf)-8), RKey: b.mr.RKey(), CompareAdd: 1}))
		}
	}
	wcs := p.waitWCs(a, n, 10*time.Minute)
	seen := map[uint64]bool{}
	fetched := map[uint64]bool{}
	for i, wc := range wcs {
		if wc.Status != transport.WC_SUCCESS || seen[wc.WRID] || wc.WRID != uint64(i) {
			t.Fatalf("completion %d: %+v (%v), want wr_id %d success exactly once", i, wc, wc.Status, i)
		}
		seen[wc.WRID] = true
	}
	for i := 0; i < n; i++ {
		size := sizes[i%len(sizes)]
		off := i * slot % (len(a.buf)/2 - slot)
		switch i % 4 {
		case 0:
			checkBytes(t, fmt.Sprintf("WRITE %d", i), b.buf[len(b.buf)/2+off:][:size], a.buf[off:off+size])
		case 1:
			checkBytes(t, fmt.Sprintf("READ %d", i), a.buf[len(a.buf)/2+off:][:size], b.buf[off:off+size])
		case 3:
			v := nativeU64(a.buf[len(a.buf)/2+off:])
			if fetched[v] {
				t.Fatalf("FETCH_ADD %d returned %d twice: executed more than once", i, v)
			}
			fetched[v] = true
		}
	}
	if got := nativeU64(b.buf[len(b.buf)-8:]); got != uint64(n/4) {
		t.Fatalf("fetch-add counter %d, want %d: an atomic ran twice or not at all", got, n/4)
	}
	rw := p.waitWCs(b, n/4, time.Minute)
	for _, wc := range rw {
		i := int(wc.WRID)
		if wc.Status != transport.WC_SUCCESS || int(wc.ByteLen) != sizes[i%len(sizes)] {
			t.Fatalf("receive completion %+v", wc)
		}
		off := i * slot % (len(a.buf)/2 - slot)
		checkBytes(t, fmt.Sprintf("SEND %d", i), b.buf[len(b.buf)/2+off:][:sizes[i%len(sizes)]], a.buf[off:off+sizes[i%len(sizes)]])
	}
}

func nativeU64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// TestLinkCut: with the link cut the requester retries retry_cnt times, completes
// with IBV_WC_RETRY_EXC_ERR, flushes the rest and moves to ERR.
func TestLinkCut(t *testing.T) {
	p := newPair(t, pairConfig{retryCnt: 3, timeout: 14})
	a, b := p.a, p.b
	b.end.SetCut(true)
	start := p.clock.Now()
	must(t, postSend(a,
		transport.SendWR{WRID: 1, Opcode: transport.WR_RDMA_WRITE, SGList: sge(a, 0, 3000), RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()},
		transport.SendWR{WRID: 2, Opcode: transport.WR_RDMA_READ, SGList: sge(a, 4000, 100), RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey(), Flags: transport.SendSignaled},
		transport.SendWR{WRID: 3, Opcode: transport.WR_SEND, SGList: sge(a, 0, 10)}))
	wcs := p.waitWCs(a, 3, time.Minute)
	checkWC(t, wcs[0], 1, transport.WC_RETRY_EXC_ERR, transport.WC_RDMA_WRITE, -1)
	checkWC(t, wcs[1], 2, transport.WC_WR_FLUSH_ERR, transport.WC_RDMA_READ, -1)
	checkWC(t, wcs[2], 3, transport.WC_WR_FLUSH_ERR, transport.WC_SEND, -1)
	if s := a.qp.State(); s != transport.QPS_ERR {
		t.Errorf("state %v", s)
	}
	c := a.qp.Counters()
	if c.Get(transport.CntLocalAckTimeoutErr) != 4 || c.Get(transport.CntRetryExceededErr) != 1 || c.Get(transport.CntCompleterRetryErr) != 3 {
		t.Errorf("counters %v", a.counters())
	}
	// 4 timeouts of 4.096 µs × 2^14 = 67.1 ms each.
	if el := p.clock.Now().Sub(start); el < 4*67*time.Millisecond || el > 4*68*time.Millisecond+time.Millisecond {
		t.Errorf("failed after %v, want 4 timeouts of 67.1 ms", el)
	}
}

// TestRetryNotExceeded: the link comes back after two timeouts and the WR succeeds.
func TestRetryNotExceeded(t *testing.T) {
	p := newPair(t, pairConfig{retryCnt: 3, timeout: 10})
	a, b := p.a, p.b
	b.end.SetCut(true)
	fill(a.buf[:2000], 3)
	must(t, postSend(a, transport.SendWR{WRID: 1, Opcode: transport.WR_RDMA_WRITE, SGList: sge(a, 0, 2000),
		Flags: transport.SendSignaled, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}))
	p.run(func() bool { return a.qp.Counters().Get(transport.CntLocalAckTimeoutErr) == 2 }, time.Second)
	b.end.SetCut(false)
	wcs := p.waitWCs(a, 1, time.Second)
	checkWC(t, wcs[0], 1, transport.WC_SUCCESS, transport.WC_RDMA_WRITE, -1)
	checkBytes(t, "write after retries", b.buf[:2000], a.buf[:2000])
	if n := a.qp.Counters().Get(transport.CntRetryExceededErr); n != 0 {
		t.Errorf("retry_exceeded_err %d", n)
	}
}

// TestRNR: a SEND with no receive posted is answered with an RNR NAK carrying
// min_rnr_timer; the requester waits that long (not the retransmit timeout) and
// succeeds once a receive is posted.
func TestRNR(t *testing.T) {
	p := newPair(t, pairConfig{rnrRetry: 7, minRNRTimer: 14, timeout: 20}) // 1.28 ms RNR; 4.3 s ACK timeout
	a, b := p.a, p.b
	fill(a.buf[:100], 4)
	start := p.clock.Now()
	must(t, postSend(a, transport.SendWR{WRID: 1, Opcode: transport.WR_SEND, SGList: sge(a, 0, 100), Flags: transport.SendSignaled}))
	p.run(func() bool { return a.qp.Counters().Get(transport.CntRcvdRNRErr) == 3 }, time.Second)
	if el := p.clock.Now().Sub(start); el < 2*1280*time.Microsecond || el > 3*1280*time.Microsecond {
		t.Errorf("3 RNR NAKs after %v, want just over 2 × 1.28 ms", el)
	}
	if b.qp.Counters().Get(transport.CntSendRNRErr) != 3 {
		t.Errorf("send_rnr_err %d", b.qp.Counters().Get(transport.CntSendRNRErr))
	}
	must(t, postRecv(b, 9, 0, 100))
	wcs := p.waitWCs(a, 1, time.Second)
	checkWC(t, wcs[0], 1, transport.WC_SUCCESS, transport.WC_SEND, -1)
	wcs = p.waitWCs(b, 1, time.Second)
	checkWC(t, wcs[0], 9, transport.WC_SUCCESS, transport.WC_RECV, 100)
	checkBytes(t, "SEND after RNR", b.buf[:100], a.buf[:100])
}

func TestRNRRetryExceeded(t *testing.T) {
	p := newPair(t, pairConfig{rnrRetry: 2, minRNRTimer: 1})
	a := p.a
	must(t, postSend(a,
		transport.SendWR{WRID: 1, Opcode: transport.WR_SEND, SGList: sge(a, 0, 100), Flags: transport.SendSignaled},
		transport.SendWR{WRID: 2, Opcode: transport.WR_RDMA_WRITE, SGList: sge(a, 0, 100), RemoteAddr: p.b.mr.Addr(), RKey: p.b.mr.RKey()}))
	wcs := p.waitWCs(a, 2, time.Second)
	checkWC(t, wcs[0], 1, transport.WC_RNR_RETRY_EXC_ERR, transport.WC_SEND, -1)
	checkWC(t, wcs[1], 2, transport.WC_WR_FLUSH_ERR, transport.WC_RDMA_WRITE, -1)
	if a.qp.Counters().Get(transport.CntRcvdRNRErr) != 3 || a.qp.Counters().Get(transport.CntRetryRNRExceededErr) != 1 {
		t.Errorf("counters %v", a.counters())
	}
}

// TestProtection: WRITE, READ and atomics with a wrong rkey, outside the region, or
// without the access flag get NAK remote access error; the requester completes with
// IBV_WC_REM_ACCESS_ERR and the target bytes do not change.
func TestProtection(t *testing.T) {
	type c struct {
		name string
		op   transport.WROpcode
		key  func(b *side, ro, rw *transport.MemoryRegion) uint32
		addr func(b *side, ro, rw *transport.MemoryRegion) uint64
		n    int
	}
	wrongKey := func(b *side, ro, rw *transport.MemoryRegion) uint32 { return b.mr.RKey() + 1 }
	goodKey := func(b *side, ro, rw *transport.MemoryRegion) uint32 { return b.mr.RKey() }
	inside := func(b *side, ro, rw *transport.MemoryRegion) uint64 { return b.mr.Addr() + 64 }
	pastEnd := func(b *side, ro, rw *transport.MemoryRegion) uint64 { return b.mr.Addr() + uint64(b.mr.Len()) - 4 }
	atEnd := func(b *side, ro, rw *transport.MemoryRegion) uint64 { return b.mr.Addr() + uint64(b.mr.Len()) }
	before := func(b *side, ro, rw *transport.MemoryRegion) uint64 { return b.mr.Addr() - 8 }
	roKey := func(b *side, ro, rw *transport.MemoryRegion) uint32 { return ro.RKey() }
	roAddr := func(b *side, ro, rw *transport.MemoryRegion) uint64 { return ro.Addr() }
	rwKey := func(b *side, ro, rw *transport.MemoryRegion) uint32 { return rw.RKey() }
	rwAddr := func(b *side, ro, rw *transport.MemoryRegion) uint64 { return rw.Addr() }
	for _, tc := range []c{
		{"WRITE wrong rkey", transport.WR_RDMA_WRITE, wrongKey, inside, 100},
		{"WRITE past end", transport.WR_RDMA_WRITE, goodKey, pastEnd, 100},
		{"WRITE before start", transport.WR_RDMA_WRITE, goodKey, before, 100},
		{"WRITE multi-packet past end", transport.WR_RDMA_WRITE, goodKey, pastEnd, 3000},
		{"WRITE to read-only region", transport.WR_RDMA_WRITE, roKey, roAddr, 100},
		{"READ wrong rkey", transport.WR_RDMA_READ, wrongKey, inside, 100},
		{"READ past end", transport.WR_RDMA_READ, goodKey, pastEnd, 3000},
		{"READ from write-only region", transport.WR_RDMA_READ, rwKey, rwAddr, 100},
		{"FETCH_ADD wrong rkey", transport.WR_ATOMIC_FETCH_AND_ADD, wrongKey, inside, 8},
		{"FETCH_ADD past end", transport.WR_ATOMIC_FETCH_AND_ADD, goodKey, atEnd, 8},
		{"CMP_AND_SWP without atomic access", transport.WR_ATOMIC_CMP_AND_SWP, roKey, roAddr, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, pairConfig{})
			a, b := p.a, p.b
			roBuf, rwBuf := make([]byte, 4096), make([]byte, 4096)
			ro, err := b.pd.RegMR(roBuf, transport.AccessRemoteRead)
			must(t, err)
			rw, err := b.pd.RegMR(rwBuf, transport.AccessLocalWrite|transport.AccessRemoteWrite)
			must(t, err)
			fill(b.buf, 77)
			fill(roBuf, 78)
			fill(rwBuf, 79)
			before := [][]byte{append([]byte{}, b.buf...), append([]byte{}, roBuf...), append([]byte{}, rwBuf...)}
			fill(a.buf, 80)
			must(t, postSend(a,
				transport.SendWR{WRID: 1, Opcode: tc.op, SGList: sge(a, 0, tc.n), Flags: transport.SendSignaled,
					RemoteAddr: tc.addr(b, ro, rw), RKey: tc.key(b, ro, rw), CompareAdd: 1, Swap: 2},
				transport.SendWR{WRID: 2, Opcode: transport.WR_SEND, SGList: sge(a, 0, 4)}))
			wcs := p.waitWCs(a, 2, time.Second)
			checkWC(t, wcs[0], 1, transport.WC_REM_ACCESS_ERR, tcOpcode(tc.op), -1)
			checkWC(t, wcs[1], 2, transport.WC_WR_FLUSH_ERR, transport.WC_SEND, -1)
			checkBytes(t, "target region", b.buf, before[0])
			checkBytes(t, "read-only region", roBuf, before[1])
			checkBytes(t, "write-only region", rwBuf, before[2])
			if a.qp.State() != transport.QPS_ERR || b.qp.State() != transport.QPS_ERR {
				t.Errorf("states %v %v, want both ERR", a.qp.State(), b.qp.State())
			}
		})
	}
}

// TestQPAccessFlags: a request the responder's QP has no access flag for (RDMA
// WRITE of any length without IBV_ACCESS_REMOTE_WRITE, READ without REMOTE_READ,
// an atomic without REMOTE_ATOMIC) is an operation it does not take: NAK Invalid
// Request, so the requester completes with IBV_WC_REM_INV_REQ_ERR, the next WR is
// flushed, nothing is written and both QPs go to ERR, as rdma_rxe's
// check_op_valid (rxe_resp.c). Before, xroce answered NAK Remote Access Error.
func TestQPAccessFlags(t *testing.T) {
	for _, tc := range []struct {
		name   string
		op     transport.WROpcode
		n      int
		access transport.Access // the QPs' flags: all but the operation's
	}{
		{"WRITE", transport.WR_RDMA_WRITE, 100, transport.AccessRemoteRead | transport.AccessRemoteAtomic},
		{"zero-length WRITE", transport.WR_RDMA_WRITE, 0, transport.AccessRemoteRead | transport.AccessRemoteAtomic},
		{"WRITE with immediate", transport.WR_RDMA_WRITE_WITH_IMM, 3000, transport.AccessRemoteRead | transport.AccessRemoteAtomic},
		{"READ", transport.WR_RDMA_READ, 100, transport.AccessRemoteWrite | transport.AccessRemoteAtomic},
		{"FETCH_ADD", transport.WR_ATOMIC_FETCH_AND_ADD, 8, transport.AccessRemoteWrite | transport.AccessRemoteRead},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, pairConfig{access: tc.access})
			a, b := p.a, p.b
			fill(b.buf, 77)
			before := append([]byte{}, b.buf...)
			fill(a.buf, 80)
			must(t, postRecv(b, 9, 0, 64))
			must(t, postSend(a,
				transport.SendWR{WRID: 1, Opcode: tc.op, SGList: sge(a, 0, tc.n), Flags: transport.SendSignaled,
					RemoteAddr: b.mr.Addr() + 64, RKey: b.mr.RKey(), CompareAdd: 1},
				transport.SendWR{WRID: 2, Opcode: transport.WR_SEND, SGList: sge(a, 0, 4)}))
			wcs := p.waitWCs(a, 2, time.Second)
			checkWC(t, wcs[0], 1, transport.WC_REM_INV_REQ_ERR, tcOpcode(tc.op), -1)
			checkWC(t, wcs[1], 2, transport.WC_WR_FLUSH_ERR, transport.WC_SEND, -1)
			// B's receive WQE was not taken: it is flushed.
			checkWC(t, p.waitWCs(b, 1, time.Second)[0], 9, transport.WC_WR_FLUSH_ERR, transport.WC_RECV, -1)
			checkBytes(t, "target region", b.buf, before)
			if a.qp.State() != transport.QPS_ERR || b.qp.State() != transport.QPS_ERR {
				t.Errorf("states %v %v, want both ERR", a.qp.State(), b.qp.State())
			}
		})
	}
}

// TestWriteImmBadRKey: an RDMA WRITE with immediate whose R_Key is bad takes a
// receive WQE before the responder checks the key when its one packet carries the
// immediate data (WRITE ONLY with immediate): that WQE completes with
// IBV_WC_REM_ACCESS_ERR and the next is flushed, as in rdma_rxe (check_resource
// before check_rkey in rxe_resp.c). When the key is on a FIRST packet, no WQE is
// taken yet and both are flushed. Before, xroce flushed both in either case.
func TestWriteImmBadRKey(t *testing.T) {
	for _, tc := range []struct {
		name      string
		n         int
		firstRecv transport.WCStatus
	}{
		{"one packet", 100, transport.WC_REM_ACCESS_ERR},
		{"three packets", 3000, transport.WC_WR_FLUSH_ERR},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, pairConfig{})
			a, b := p.a, p.b
			must(t, postRecv(b, 11, 0, 64))
			must(t, postRecv(b, 12, 64, 64))
			must(t, postSend(a, transport.SendWR{WRID: 1, Opcode: transport.WR_RDMA_WRITE_WITH_IMM, SGList: sge(a, 0, tc.n),
				Flags: transport.SendSignaled, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey() + 1, ImmData: 5}))
			checkWC(t, p.waitWCs(a, 1, time.Second)[0], 1, transport.WC_REM_ACCESS_ERR, transport.WC_RDMA_WRITE, -1)
			wcs := p.waitWCs(b, 2, time.Second)
			op := transport.WC_RECV
			if tc.firstRecv == transport.WC_REM_ACCESS_ERR {
				op = transport.WC_RECV_RDMA_WITH_IMM
			}
			checkWC(t, wcs[0], 11, tc.firstRecv, op, -1)
			checkWC(t, wcs[1], 12, transport.WC_WR_FLUSH_ERR, transport.WC_RECV, -1)
		})
	}
}

func tcOpcode(op transport.WROpcode) transport.WCOpcode {
	switch op {
	case transport.WR_RDMA_WRITE, transport.WR_RDMA_WRITE_WITH_IMM:
		return transport.WC_RDMA_WRITE
	case transport.WR_RDMA_READ:
		return transport.WC_RDMA_READ
	case transport.WR_ATOMIC_FETCH_AND_ADD:
		return transport.WC_FETCH_ADD
	}
	return transport.WC_COMP_SWAP
}

// TestLinkBusyAdaptiveResend: when the link refuses frames (a full ring), the engine
// holds them and offers them again after its adaptive delay: the 1 MiB WRITE and READ
// complete without a single retransmit timeout, and the busy counters move.
func TestLinkBusyAdaptiveResend(t *testing.T) {
	p := newPair(t, pairConfig{mtu: roce.MTU1024, bufSize: 4 << 20})
	p.a.end.SetQueue(8) // frames waiting at A (READ responses) before B's Send is refused
	p.b.end.SetQueue(8) // frames waiting at B (WRITE data) before A's Send is refused
	transfer(t, p, "WRITE", 1, 1<<20)
	transfer(t, p, "READ", 2, 1<<20)
	for _, s := range []*side{p.a, p.b} {
		c := s.dev.Counters()
		if c.Get(transport.CntLinkBusy) == 0 || c.Get(transport.CntLinkBusyResent) == 0 {
			t.Errorf("busy counters did not move: %v", s.counters())
		}
		if c.Get(transport.CntLocalAckTimeoutErr) != 0 || c.Get(transport.CntCompleterRetryErr) != 0 {
			t.Errorf("a refused frame fell into the retransmit path: %v", s.counters())
		}
	}
}
