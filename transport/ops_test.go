package transport_test

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/xroce/xroce/transport"
)

func TestAtomics(t *testing.T) {
	p := newPair(t, pairConfig{})
	a, b := p.a, p.b
	binary.NativeEndian.PutUint64(b.buf[64:], 100)
	// FETCH_AND_ADD returns the old value and adds.
	must(t, postSend(a, transport.SendWR{WRID: 1, Opcode: transport.WR_ATOMIC_FETCH_AND_ADD, SGList: sge(a, 0, 8),
		Flags: transport.SendSignaled, RemoteAddr: b.mr.Addr() + 64, RKey: b.mr.RKey(), CompareAdd: 5}))
	wcs := p.waitWCs(a, 1, time.Second)
	checkWC(t, wcs[0], 1, transport.WC_SUCCESS, transport.WC_FETCH_ADD, 8)
	if got := binary.NativeEndian.Uint64(a.buf[0:]); got != 100 {
		t.Errorf("fetch-add returned %d, want 100", got)
	}
	if got := binary.NativeEndian.Uint64(b.buf[64:]); got != 105 {
		t.Errorf("target after fetch-add = %d, want 105", got)
	}
	// COMPARE_AND_SWAP that does not match leaves the target alone.
	must(t, postSend(a, transport.SendWR{WRID: 2, Opcode: transport.WR_ATOMIC_CMP_AND_SWP, SGList: sge(a, 8, 8),
		Flags: transport.SendSignaled, RemoteAddr: b.mr.Addr() + 64, RKey: b.mr.RKey(), CompareAdd: 7, Swap: 9}))
	// One that matches swaps.
	must(t, postSend(a, transport.SendWR{WRID: 3, Opcode: transport.WR_ATOMIC_CMP_AND_SWP, SGList: sge(a, 16, 8),
		Flags: transport.SendSignaled, RemoteAddr: b.mr.Addr() + 64, RKey: b.mr.RKey(), CompareAdd: 105, Swap: 0xdeadbeefcafe}))
	wcs = p.waitWCs(a, 2, time.Second)
	checkWC(t, wcs[0], 2, transport.WC_SUCCESS, transport.WC_COMP_SWAP, 8)
	checkWC(t, wcs[1], 3, transport.WC_SUCCESS, transport.WC_COMP_SWAP, 8)
	if o1, o2 := binary.NativeEndian.Uint64(a.buf[8:]), binary.NativeEndian.Uint64(a.buf[16:]); o1 != 105 || o2 != 105 {
		t.Errorf("compare-swap returned %d and %d, want 105 and 105", o1, o2)
	}
	if got := binary.NativeEndian.Uint64(b.buf[64:]); got != 0xdeadbeefcafe {
		t.Errorf("target after compare-swap = %#x", got)
	}
	// A local buffer longer than 8 bytes, as rdma_rxe takes it (validate_send_wr):
	// the original value fills its first 8, the rest stays, and byte_len is the
	// buffer's length (make_send_cqe: wqe->dma.length).
	for i := 32; i < 48; i++ {
		a.buf[i] = 0xEE
	}
	must(t, postSend(a, transport.SendWR{WRID: 4, Opcode: transport.WR_ATOMIC_FETCH_AND_ADD, SGList: sge(a, 32, 16),
		Flags: transport.SendSignaled, RemoteAddr: b.mr.Addr() + 64, RKey: b.mr.RKey(), CompareAdd: 1}))
	checkWC(t, p.waitWCs(a, 1, time.Second)[0], 4, transport.WC_SUCCESS, transport.WC_FETCH_ADD, 16)
	if got, rest := binary.NativeEndian.Uint64(a.buf[32:]), a.buf[40:48]; got != 0xdeadbeefcafe || rest[0] != 0xEE || rest[7] != 0xEE {
		t.Errorf("16-byte fetch-add buffer: %#x, then % x", got, rest)
	}
}

func TestImmediateAndInline(t *testing.T) {
	p := newPair(t, pairConfig{})
	a, b := p.a, p.b
	copy(a.buf, "inline payload!")
	must(t, postRecv(b, 7, 100, 64))
	must(t, postRecv(b, 8, 200, 64))
	must(t, postSend(a,
		transport.SendWR{WRID: 1, Opcode: transport.WR_SEND_WITH_IMM, SGList: sge(a, 0, 15),
			Flags: transport.SendSignaled | transport.SendInline, ImmData: 0x11223344},
		transport.SendWR{WRID: 2, Opcode: transport.WR_RDMA_WRITE_WITH_IMM, SGList: sge(a, 0, 15),
			Flags: transport.SendSignaled, ImmData: 0x55667788, RemoteAddr: b.mr.Addr() + 1000, RKey: b.mr.RKey()}))
	// Inline data is captured at post time.
	copy(a.buf, "changed after!!")
	wcs := p.waitWCs(b, 2, time.Second)
	checkWC(t, wcs[0], 7, transport.WC_SUCCESS, transport.WC_RECV, 15)
	checkWC(t, wcs[1], 8, transport.WC_SUCCESS, transport.WC_RECV_RDMA_WITH_IMM, 15)
	if !wcs[0].HasImm || wcs[0].ImmData != 0x11223344 || !wcs[1].HasImm || wcs[1].ImmData != 0x55667788 {
		t.Errorf("immediate data %+v", wcs)
	}
	checkBytes(t, "SEND_WITH_IMM inline", b.buf[100:115], []byte("inline payload!"))
	p.waitWCs(a, 2, time.Second)
}

// TestScatterGather: a SEND gathered from three SGEs lands in a receive scattered
// over two, and unsignaled WRs complete silently.
func TestScatterGather(t *testing.T) {
	p := newPair(t, pairConfig{})
	a, b := p.a, p.b
	fill(a.buf[:5000], 9)
	want := append(append(append([]byte{}, a.buf[0:1000]...), a.buf[3000:4500]...), a.buf[100:600]...)
	_, err := b.qp.PostRecv(transport.RecvWR{WRID: 5, SGList: []transport.SGE{
		{Addr: b.mr.Addr() + 10000, Length: 1200, LKey: b.mr.LKey()},
		{Addr: b.mr.Addr() + 20000, Length: 2000, LKey: b.mr.LKey()}}})
	must(t, err)
	must(t, postSend(a,
		transport.SendWR{WRID: 1, Opcode: transport.WR_RDMA_WRITE, SGList: sge(a, 0, 10),
			RemoteAddr: b.mr.Addr() + 30000, RKey: b.mr.RKey()}, // unsignaled
		transport.SendWR{WRID: 2, Opcode: transport.WR_SEND, Flags: transport.SendSignaled, SGList: []transport.SGE{
			{Addr: a.mr.Addr(), Length: 1000, LKey: a.mr.LKey()},
			{Addr: a.mr.Addr() + 3000, Length: 1500, LKey: a.mr.LKey()},
			{Addr: a.mr.Addr() + 100, Length: 500, LKey: a.mr.LKey()}}}))
	wcs := p.waitWCs(b, 1, time.Second)
	checkWC(t, wcs[0], 5, transport.WC_SUCCESS, transport.WC_RECV, 3000)
	got := append(append([]byte{}, b.buf[10000:11200]...), b.buf[20000:21800]...)
	checkBytes(t, "scattered receive", got, want)
	wcs = p.waitWCs(a, 1, time.Second)
	checkWC(t, wcs[0], 2, transport.WC_SUCCESS, transport.WC_SEND, -1)
	checkBytes(t, "unsignaled write", b.buf[30000:30010], a.buf[0:10])
}

// TestQPCapLimits: CreateQP refuses queue depths and SGE counts above rdma_rxe's
// max_qp_wr and max_sge (ErrQPCap), and takes them at the limit.
func TestQPCapLimits(t *testing.T) {
	p := newPair(t, pairConfig{})
	a := p.a
	for _, c := range []transport.QPCap{
		{MaxSendWR: transport.MaxQPWR + 1}, {MaxRecvWR: 100000000},
		{MaxSendSGE: transport.MaxSGE + 1}, {MaxRecvSGE: transport.MaxSGE + 1},
	} {
		_, err := a.pd.CreateQP(transport.QPInitAttr{SendCQ: a.cq, RecvCQ: a.cq, Cap: c})
		if !errors.Is(err, transport.ErrQPCap) {
			t.Errorf("%+v: %v, want ErrQPCap", c, err)
		}
	}
	qp, err := a.pd.CreateQP(transport.QPInitAttr{SendCQ: a.cq, RecvCQ: a.cq,
		Cap: transport.QPCap{MaxSendWR: transport.MaxQPWR, MaxRecvWR: transport.MaxQPWR, MaxSendSGE: transport.MaxSGE, MaxRecvSGE: transport.MaxSGE}})
	if err != nil {
		t.Fatalf("at the limits: %v", err)
	}
	if err := qp.Destroy(); err != nil {
		t.Fatal(err)
	}
}

func TestPostErrors(t *testing.T) {
	p := newPair(t, pairConfig{})
	a := p.a
	if _, err := a.qp.PostSend(transport.SendWR{Opcode: transport.WR_SEND, SGList: make([]transport.SGE, 5)}); err != transport.ErrTooManySGE {
		t.Errorf("5 SGEs: %v", err)
	}
	if _, err := a.qp.PostSend(transport.SendWR{Opcode: transport.WR_SEND, Flags: transport.SendInline, SGList: sge(a, 0, 65)}); err != transport.ErrInline {
		t.Errorf("65 inline bytes: %v", err)
	}
	if _, err := a.qp.PostSend(transport.SendWR{Opcode: transport.WR_ATOMIC_FETCH_AND_ADD, SGList: sge(a, 0, 4)}); err != transport.ErrBadWR {
		t.Errorf("4-byte atomic: %v", err)
	}
	if _, err := a.qp.PostSend(transport.SendWR{Opcode: 9}); err != transport.ErrBadWR {
		t.Errorf("opcode 9: %v", err)
	}
	// A bad lkey completes with IBV_WC_LOC_QP_OP_ERR, as rdma_rxe's requester
	// (copy_data finds no region: -EINVAL), and the QP moves to ERR; the next WR is
	// flushed.
	must(t, postSend(a,
		transport.SendWR{WRID: 1, Opcode: transport.WR_SEND, Flags: transport.SendSignaled,
			SGList: []transport.SGE{{Addr: a.mr.Addr(), Length: 8, LKey: a.mr.LKey() ^ 1}}},
		transport.SendWR{WRID: 2, Opcode: transport.WR_SEND, SGList: sge(a, 0, 8)}))
	wcs := p.waitWCs(a, 2, time.Second)
	checkWC(t, wcs[0], 1, transport.WC_LOC_QP_OP_ERR, transport.WC_SEND, -1)
	checkWC(t, wcs[1], 2, transport.WC_WR_FLUSH_ERR, transport.WC_SEND, -1)
	if s := a.qp.State(); s != transport.QPS_ERR {
		t.Errorf("state %v after a local error", s)
	}
	// A buffer past its region's end: IBV_WC_LOC_PROT_ERR (mr_check_range's -EFAULT).
	p = newPair(t, pairConfig{})
	a = p.a
	must(t, postSend(a, transport.SendWR{WRID: 3, Opcode: transport.WR_SEND, Flags: transport.SendSignaled,
		SGList: []transport.SGE{{Addr: a.mr.Addr() + uint64(len(a.buf)) - 4, Length: 8, LKey: a.mr.LKey()}}}))
	checkWC(t, p.waitWCs(a, 1, time.Second)[0], 3, transport.WC_LOC_PROT_ERR, transport.WC_SEND, -1)
}

// TestChosenKeys: regions registered with a chosen key and IOVA (as replays do), even
// a key whose index is huge, work next to ordinary ones, and a taken key is refused.
func TestChosenKeys(t *testing.T) {
	p := newPair(t, pairConfig{})
	a, b := p.a, p.b
	buf := make([]byte, 4096)
	mr, err := b.pd.RegMRWith(buf, transport.AccessLocalWrite|transport.AccessRemoteWrite,
		transport.MROptions{IOVA: 0x10000, HasIOVA: true, Key: 0xfffffe01})
	must(t, err)
	if mr.RKey() != 0xfffffe01 || mr.Addr() != 0x10000 {
		t.Fatalf("keys %#x addr %#x", mr.RKey(), mr.Addr())
	}
	if _, err := b.pd.RegMRWith(make([]byte, 8), transport.AccessLocalWrite, transport.MROptions{Key: 0xfffffe77}); err != transport.ErrKeyInUse {
		t.Errorf("same index again: %v", err)
	}
	other, err := b.pd.RegMR(make([]byte, 64), transport.AccessLocalWrite|transport.AccessRemoteWrite)
	must(t, err)
	fill(a.buf[:100], 6)
	must(t, postSend(a,
		transport.SendWR{WRID: 1, Opcode: transport.WR_RDMA_WRITE, SGList: sge(a, 0, 100), RemoteAddr: 0x10000 + 200, RKey: 0xfffffe01},
		transport.SendWR{WRID: 2, Opcode: transport.WR_RDMA_WRITE, SGList: sge(a, 0, 64), Flags: transport.SendSignaled, RemoteAddr: other.Addr(), RKey: other.RKey()}))
	wcs := p.waitWCs(a, 1, time.Second)
	checkWC(t, wcs[0], 2, transport.WC_SUCCESS, transport.WC_RDMA_WRITE, -1)
	checkBytes(t, "chosen-key region", buf[200:300], a.buf[:100])
	must(t, mr.Dereg())
	if _, err := b.pd.RegMRWith(buf, transport.AccessLocalWrite, transport.MROptions{Key: 0xfffffe02}); err != nil {
		t.Errorf("index free again after Dereg: %v", err)
	}
}

// TestPostResolvesAfterDereg: a send or receive WR's region is remembered from the
// last post (mrCache); once the region is deregistered its lkey is refused
// (IBV_WC_LOC_QP_OP_ERR) on the very next post, as is (IBV_WC_LOC_PROT_ERR) a range past the end of a
// remembered region, and posts alternating between two regions place each one's
// bytes.
func TestPostResolvesAfterDereg(t *testing.T) {
	write := func(id uint64, sg []transport.SGE, b *side, off int) transport.SendWR {
		return transport.SendWR{WRID: id, Opcode: transport.WR_RDMA_WRITE, SGList: sg, Flags: transport.SendSignaled,
			RemoteAddr: b.mr.Addr() + uint64(off), RKey: b.mr.RKey()}
	}
	t.Run("deregistered", func(t *testing.T) {
		p := newPair(t, pairConfig{})
		a, b := p.a, p.b
		other := make([]byte, 128)
		fill(other, 2)
		mr, err := a.pd.RegMR(other, transport.AccessLocalWrite)
		must(t, err)
		otherSG := []transport.SGE{{Addr: mr.Addr(), Length: 128, LKey: mr.LKey()}}
		fill(a.buf[:192], 1)
		for i, w := range []transport.SendWR{write(1, sge(a, 0, 64), b, 0), write(2, otherSG, b, 64), write(3, sge(a, 64, 64), b, 192)} {
			must(t, postSend(a, w))
			checkWC(t, p.waitWCs(a, 1, time.Second)[0], uint64(i+1), transport.WC_SUCCESS, transport.WC_RDMA_WRITE, -1)
		}
		checkBytes(t, "first region", b.buf[:64], a.buf[:64])
		checkBytes(t, "second region", b.buf[64:192], other)
		checkBytes(t, "first region again", b.buf[192:256], a.buf[64:128])
		// a.mr is the remembered region now.
		must(t, a.mr.Dereg())
		must(t, postSend(a, write(4, sge(a, 0, 64), b, 0)))
		checkWC(t, p.waitWCs(a, 1, time.Second)[0], 4, transport.WC_LOC_QP_OP_ERR, transport.WC_RDMA_WRITE, -1)
	})
	t.Run("receive", func(t *testing.T) {
		p := newPair(t, pairConfig{})
		a, b := p.a, p.b
		recv := func(id uint64) {
			_, err := b.qp.PostRecv(transport.RecvWR{WRID: id, SGList: sge(b, 0, 64)})
			must(t, err)
		}
		send := transport.SendWR{WRID: 1, Opcode: transport.WR_SEND, Flags: transport.SendSignaled, SGList: sge(a, 0, 64)}
		fill(a.buf[:64], 3)
		recv(1)
		must(t, postSend(a, send))
		checkWC(t, p.waitWCs(b, 1, time.Second)[0], 1, transport.WC_SUCCESS, transport.WC_RECV, 64)
		checkBytes(t, "received", b.buf[:64], a.buf[:64])
		p.waitWCs(a, 1, time.Second)
		must(t, b.mr.Dereg())
		recv(2)
		send.WRID = 2
		must(t, postSend(a, send))
		checkWC(t, p.waitWCs(b, 1, time.Second)[0], 2, transport.WC_LOC_QP_OP_ERR, transport.WC_RECV, -1)
	})
	t.Run("past the end", func(t *testing.T) {
		p := newPair(t, pairConfig{})
		a, b := p.a, p.b
		must(t, postSend(a, write(1, sge(a, 0, 64), b, 0)))
		checkWC(t, p.waitWCs(a, 1, time.Second)[0], 1, transport.WC_SUCCESS, transport.WC_RDMA_WRITE, -1)
		must(t, postSend(a, write(2, sge(a, len(a.buf)-8, 16), b, 0)))
		checkWC(t, p.waitWCs(a, 1, time.Second)[0], 2, transport.WC_LOC_PROT_ERR, transport.WC_RDMA_WRITE, -1)
	})
}
