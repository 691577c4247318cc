package daemon

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// engineFake serves a real engine (on an in-memory link) under fakeSource's
// attributes.
type engineFake struct {
	fakeSource
	dev *transport.Device
}

func (e engineFake) Engine() *transport.Device { return e.dev }

// dataPath is a daemon serving device A of an in-memory link, and device B on
// the link's other end for the test to drive directly.
type dataPath struct {
	srv  *Server
	devB *transport.Device
	ipA  netip.Addr
	ipB  netip.Addr
}

func startDataPath(t *testing.T) *dataPath {
	t.Helper()
	ipA, ipB := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	la, lb := transport.NewPipe(transport.PipeConfig{MAC: [6]byte{2, 0, 0, 0, 0, 1}, Addrs: []netip.Addr{ipA}},
		transport.PipeConfig{MAC: [6]byte{2, 0, 0, 0, 0, 2}, Addrs: []netip.Addr{ipB}})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var devs []*transport.Device
	for _, l := range []transport.Link{la, lb} {
		d, err := transport.Open(l, transport.Options{})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = d.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done; d.Close() })
		devs = append(devs, d)
	}
	s, err := Listen(engineFake{fakeSource{[6]byte{2, 0, 0, 0, 0, 1}}, devs[0]}, Options{Dir: t.TempDir(), Log: log.New(io.Discard, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() { _ = s.Serve(ctx); close(served) }()
	t.Cleanup(func() { s.Close(); <-served })
	return &dataPath{srv: s, devB: devs[1], ipA: ipA, ipB: ipB}
}

// dial opens a session on the data path's daemon, closed when the test ends.
func (dp *dataPath) dial(t *testing.T) *Client {
	t.Helper()
	c, _, err := Dial(dp.srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// memfd returns a sealed memfd of n bytes and this process's mapping of it.
func memfd(t *testing.T, n int, seal bool) (int, []byte) {
	t.Helper()
	fd, err := unix.MemfdCreate("xroce-test", unix.MFD_ALLOW_SEALING|unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Ftruncate(fd, int64(n)); err != nil {
		t.Fatal(err)
	}
	if seal {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
			t.Fatal(err)
		}
	}
	b, err := unix.Mmap(fd, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return fd, b
}

// onePiece is the Pieces of a registration on one memfd of n bytes.
func onePiece(n int) [MRPieces]MRPiece {
	var p [MRPieces]MRPiece
	p[0] = MRPiece{Len: uint64(n)}
	return p
}

func wantErrno(t *testing.T, what string, err error, want unix.Errno) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Errno != want {
		t.Errorf("%s: %v, want %v", what, err, want)
	}
}

func addr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(&b[0]))) }

// TestSessionDataPath drives the data path as the library does: a PD, an MR on a
// memfd the test also maps, a CQ, an RC QP brought to RTS against a QP of the
// other device, which then RDMA WRITEs into the region (the bytes appear in the
// test's own mapping) and SENDs into a posted receive. Then bad input, and the
// session's end: its QP is destroyed, so the peer's next send exhausts its
// retries, and status shows no objects.
func TestSessionDataPath(t *testing.T) {
	dp := startDataPath(t)
	c := dp.dial(t)
	page := os.Getpagesize()

	var pd Handle
	if err := c.Call(OpAllocPD, nil, &pd); err != nil {
		t.Fatal(err)
	}
	fd, buf := memfd(t, 2*page, true)
	reg := RegMRReq{PD: pd.Handle, Access: 0xf, Addr: addr(buf) + 100, Length: uint64(page), IOVA: addr(buf) + 100,
		MapAddr: addr(buf), MapLen: uint64(2 * page), NPieces: 1, Pieces: onePiece(2 * page)}
	var mr RegMRReply
	if err := c.CallFD(OpRegMR, &reg, fd, &mr); err != nil {
		t.Fatal(err)
	}
	cq := createTestCQ(t, c, CreateCQReq{CQE: 16})
	tq := createTestQP(t, c, CreateQPReq{PD: pd.Handle, SendCQ: cq.h, RecvCQ: cq.h, QPType: qptRC,
		MaxSendWR: 4, MaxRecvWR: 3, MaxSendSGE: 1, MaxRecvSGE: 2, MaxInline: 64})
	qp := tq.r
	// rdma_rxe's arithmetic (rxeQPCap): 4 WRs → 7, 3 → 3; 64 inline bytes make 4 SGEs.
	if want := (CreateQPReply{Handle: qp.Handle, QPN: qp.QPN, MaxSendWR: 7, MaxRecvWR: 3, MaxSendSGE: 4, MaxRecvSGE: 2, MaxInline: 64,
		SQEntries: 8, SQStride: 192, RQEntries: 4, RQStride: 64, SQOffset: 4096, RQOffset: 8192, RingSize: 12288}); qp != want {
		t.Fatalf("create qp: %+v\nwant %+v", qp, want)
	}
	// max_qp_wr itself is allowed (rxe_qp_chk_cap): the depth reported is max_qp_wr.
	if big := createTestQP(t, c, CreateQPReq{PD: pd.Handle, SendCQ: cq.h, RecvCQ: cq.h, QPType: qptRC,
		MaxSendWR: maxQPWR, MaxRecvWR: 1, MaxSendSGE: 1, MaxRecvSGE: 1}); big.r.MaxSendWR != maxQPWR {
		t.Errorf("a QP of max_qp_wr send WRs reports %d", big.r.MaxSendWR)
	}

	// Device B's side, driven directly.
	pdB := dp.devB.AllocPD()
	cqB := dp.devB.CreateCQ(16)
	bufB := make([]byte, 4096)
	mrB, _ := pdB.RegMR(bufB, transport.AccessLocalWrite)
	qpB, err := pdB.CreateQP(transport.QPInitAttr{SendCQ: cqB, RecvCQ: cqB})
	if err != nil {
		t.Fatal(err)
	}
	// 67 ms and 7 retries while the session serves (a slow -race run must not time
	// out); 1 ms and 1 retry once it is gone (below), so the failure comes quickly.
	timers := transport.Timers{Timeout: 14, RetryCnt: 7, RNRRetry: 1, MinRNRTimer: 1}
	if err := transport.BringUp(qpB, transport.QPS_RESET, transport.QPS_RTS, transport.ConnectParams{
		AH: transport.AddressHandle{DGID: roce.GIDFromAddr(dp.ipA), SGIDIndex: 1}, PathMTU: roce.MTU1024,
		DestQPN: qp.QPN, RQPSN: 1000, SQPSN: 2000, Timers: &timers, Access: transport.AccessRemoteWrite}); err != nil {
		t.Fatal(err)
	}
	// The session's QP, through every state with verbs' masks.
	gidB := roce.GIDFromAddr(dp.ipB)
	for _, m := range []QPAttrMsg{
		{Mask: 1 | 1<<3 | 1<<4 | 1<<5, State: 1, AccessFlags: 0xf, PortNum: 1},
		{Mask: 1 | 1<<7 | 1<<8 | 1<<20 | 1<<12 | 1<<17 | 1<<15, State: 2, PathMTU: 3, DestQPN: qpB.QPN(), RQPSN: 2000,
			DGID: gidB, SGIDIndex: 1, IsGlobal: 1, MaxDestRdAtomic: 1, MinRNRTimer: 12},
		{Mask: 1 | 1<<9 | 1<<10 | 1<<11 | 1<<16 | 1<<13, State: 3, SQPSN: 1000, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
	} {
		m.QP = qp.Handle
		if err := c.Call(OpModifyQP, &m, nil); err != nil {
			t.Fatalf("modify to %d: %v", m.State, err)
		}
	}
	var qa QPAttrMsg
	if err := c.Call(OpQueryQP, &Handle{qp.Handle}, &qa); err != nil || qa.State != 3 || qa.DestQPN != qpB.QPN() || qa.DGID != gidB {
		t.Fatalf("query qp: %+v %v", qa, err)
	}
	// A receive, written into the ring as the library writes it.
	tq.postRecv(le(RecvWRMsg{WRID: 7, NumSGE: 1}, SGEMsg{Addr: addr(buf) + 200, Length: 64, LKey: mr.LKey}))
	// B writes into the region, then sends.
	copy(bufB, "written by the peer")
	copy(bufB[100:], "sent by the peer")
	if _, err := qpB.PostSend(transport.SendWR{WRID: 1, Opcode: transport.WR_RDMA_WRITE, Flags: transport.SendSignaled,
		SGList: []transport.SGE{{Addr: mrB.Addr(), Length: 19, LKey: mrB.LKey()}}, RemoteAddr: addr(buf) + 1000, RKey: mr.RKey},
		transport.SendWR{WRID: 2, Opcode: transport.WR_SEND, Flags: transport.SendSignaled,
			SGList: []transport.SGE{{Addr: mrB.Addr() + 100, Length: 16, LKey: mrB.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	if e := cq.poll(t); e != (CQE{Seq: 0, Flags: CQERecv, Opcode: uint32(transport.WC_RECV), ByteLen: 16, QPNum: qp.QPN}) {
		t.Fatalf("completion: %+v", e)
	}
	// An RDMA WRITE, and a SEND with inline data from the slot: the peer gets both.
	rq, wb := make([]byte, 64), make([]byte, 64)
	rmr, _ := pdB.RegMR(rq, transport.AccessLocalWrite)
	wmr, _ := pdB.RegMR(wb, transport.AccessLocalWrite|transport.AccessRemoteWrite)
	if _, err := qpB.PostRecv(transport.RecvWR{WRID: 5, SGList: []transport.SGE{{Addr: rmr.Addr(), Length: 64, LKey: rmr.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	copy(buf[300:], "from the ring")
	tq.postSend(le(SendWRMsg{Opcode: uint32(transport.WR_RDMA_WRITE), Flags: uint32(transport.SendSignaled), NumSGE: 1,
		RemoteAddr: wmr.Addr() + 20, RKey: wmr.RKey()}, SGEMsg{Addr: addr(buf) + 300, Length: 13, LKey: mr.LKey}))
	tq.postSend(le(SendWRMsg{Opcode: uint32(transport.WR_SEND), Flags: uint32(transport.SendInline | transport.SendSignaled), InlineLen: 11}, []byte("inline data")))
	// (The WRITE goes first: the peer's receive completion then orders both for
	// the race detector, which cannot follow the ring's two mappings.)
	for i, want := range []CQE{{Seq: 0, Opcode: uint32(transport.WC_RDMA_WRITE), ByteLen: 13, QPNum: qp.QPN},
		{Seq: 1, Opcode: uint32(transport.WC_SEND), ByteLen: 11, QPNum: qp.QPN}} {
		if e := cq.poll(t); e != want {
			t.Fatalf("send completion %d: %+v, want %+v", i, e, want)
		}
	}
	if w := waitWRID(t, cqB, 5); w.Status != transport.WC_SUCCESS || w.ByteLen != 11 {
		t.Errorf("the peer's receive: %+v", w)
	}
	if string(rq[:11]) != "inline data" || string(wb[20:33]) != "from the ring" {
		t.Errorf("the peer got %q and %q", rq[:11], wb[20:33])
	}
	if string(buf[1000:1019]) != "written by the peer" || string(buf[200:216]) != "sent by the peer" {
		t.Errorf("the region's pages, as the application maps them: %q %q", buf[1000:1019], buf[200:216])
	}

	// A region on two memfds (its pages partly on an earlier region's): the peer's
	// WRITE across the boundary lands in both.
	fdX, bufX := memfd(t, page, true)
	fdY, bufY := memfd(t, 2*page, true)
	base := uint64(0x7e0000000000)
	two := RegMRReq{PD: pd.Handle, Access: 0xf, Addr: base + uint64(page) - 96, Length: 200, IOVA: base + uint64(page) - 96,
		MapAddr: base, MapLen: uint64(2 * page), NPieces: 2}
	two.Pieces[0] = MRPiece{Len: uint64(page)}
	two.Pieces[1] = MRPiece{Len: uint64(page), FdOff: uint64(page)} // the second page of fdY
	var mr2 RegMRReply
	if _, err := c.CallFDs(OpRegMR, &two, []int{fdX, fdY}, &mr2); err != nil {
		t.Fatal(err)
	}
	copy(bufB[3000:], bytes.Repeat([]byte("ab"), 100))
	if _, err := qpB.PostSend(transport.SendWR{WRID: 8, Opcode: transport.WR_RDMA_WRITE, Flags: transport.SendSignaled,
		SGList: []transport.SGE{{Addr: mrB.Addr() + 3000, Length: 200, LKey: mrB.LKey()}}, RemoteAddr: two.IOVA, RKey: mr2.RKey}); err != nil {
		t.Fatal(err)
	}
	if w := waitWRID(t, cqB, 8); w.Status != transport.WC_SUCCESS {
		t.Fatalf("write across two pieces: %+v", w)
	}
	if string(bufX[page-96:]) != strings.Repeat("ab", 48) || string(bufY[page:page+104]) != strings.Repeat("ab", 52) {
		t.Errorf("write across two pieces: %q | %q", bufX[page-96:], bufY[page:page+104])
	}

	// Bad input: errors, never a crash, nothing touched.
	wantErrno(t, "reg mr without a descriptor", c.Call(OpRegMR, &reg, nil), unix.EBADMSG)
	unsealed, ubuf := memfd(t, page, false)
	r2 := RegMRReq{PD: pd.Handle, Access: 1, Addr: addr(ubuf), Length: 64, MapAddr: addr(ubuf), MapLen: uint64(page), NPieces: 1, Pieces: onePiece(page)}
	wantErrno(t, "unsealed memfd", c.CallFD(OpRegMR, &r2, unsealed, nil), unix.EINVAL)
	short, sbuf := memfd(t, page, true)
	r3 := RegMRReq{PD: pd.Handle, Access: 1, Addr: addr(sbuf), Length: 64, MapAddr: addr(sbuf), MapLen: uint64(2 * page), NPieces: 1, Pieces: onePiece(2 * page)}
	wantErrno(t, "memfd shorter than the mapping", c.CallFD(OpRegMR, &r3, short, nil), unix.EINVAL)
	r4 := r3
	r4.MapLen, r4.Pieces = uint64(page), onePiece(page)
	wantErrno(t, "a descriptor that is not a memfd", c.CallFD(OpRegMR, &r4, int(os.Stdin.Fd()), nil), unix.EINVAL)
	r5 := reg
	r5.Addr = reg.MapAddr + reg.MapLen
	wantErrno(t, "region outside its mapping", c.CallFD(OpRegMR, &r5, fd, nil), unix.EINVAL)
	r6 := reg
	r6.PD = 999
	wantErrno(t, "bad PD", c.CallFD(OpRegMR, &r6, fd, nil), unix.EINVAL)
	r7 := reg
	r7.NPieces = 2
	wantErrno(t, "two pieces, one descriptor", c.CallFD(OpRegMR, &r7, fd, nil), unix.EBADMSG)
	r8 := reg
	r8.Pieces[0].Len = uint64(page)
	wantErrno(t, "a piece shorter than the mapping", c.CallFD(OpRegMR, &r8, fd, nil), unix.EINVAL)
	wantErrno(t, "descriptor on alloc pd", c.CallFD(OpAllocPD, nil, fd, nil), unix.EBADMSG)
	wantErrno(t, "notify a bad CQ", c.Call(OpReqNotifyCQ, &NotifyReq{CQ: 999}, nil), unix.EINVAL)
	wantErrno(t, "destroy a CQ in use", c.Call(OpDestroyCQ, &Handle{cq.h}, nil), unix.EBUSY)
	wantErrno(t, "dealloc a PD in use", c.Call(OpDeallocPD, &Handle{pd.Handle}, nil), unix.EBUSY)
	// version 1's poll (21 and 22, its posts, are the address handles' ops now)
	wantErrno(t, "a retired op", c.Call(16, []byte{1, 0, 0, 0, 1, 0, 0, 0}, nil), unix.EOPNOTSUPP)
	wantErrno(t, "XRC QP", c.Call(OpCreateQP, &CreateQPReq{PD: pd.Handle, SendCQ: cq.h, RecvCQ: cq.h, QPType: 9}, nil), unix.EOPNOTSUPP)
	// A second session cannot name the first one's objects.
	c2 := dp.dial(t)
	wantErrno(t, "another session's CQ", c2.Call(OpDestroyCQ, &Handle{cq.h}, nil), unix.EINVAL)
	wantErrno(t, "another session's QP", c2.Call(OpDestroyQP, &Handle{qp.Handle}, nil), unix.EINVAL)
	// A bad lkey completes with a local QP operation error (as rdma_rxe reports it).
	seq := tq.postSend(le(SendWRMsg{Opcode: uint32(transport.WR_SEND), Flags: uint32(transport.SendSignaled), NumSGE: 1},
		SGEMsg{Addr: addr(buf), Length: 8, LKey: mr.LKey + 1}))
	if e := cq.poll(t); e.Seq != seq || e.Flags != 0 || e.Status != uint32(transport.WC_LOC_QP_OP_ERR) {
		t.Errorf("bad lkey: %+v", e)
	}

	// The session ends: its objects go, and the peer's next send exhausts its retries.
	cl, _ := c2.Clients()
	if len(cl) != 2 {
		t.Fatalf("clients: %+v", cl)
	}
	c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		cl, _ = c2.Clients()
		if len(cl) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("clients after close: %+v", cl)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := qpB.Modify(transport.QPAttr{Timeout: 8, RetryCnt: 1}, transport.QP_TIMEOUT|transport.QP_RETRY_CNT); err != nil {
		t.Fatal(err)
	}
	if _, err := qpB.PostSend(transport.SendWR{WRID: 3, Opcode: transport.WR_SEND, Flags: transport.SendSignaled,
		SGList: []transport.SGE{{Addr: mrB.Addr(), Length: 8, LKey: mrB.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	if w := waitWRID(t, cqB, 3); w.Status != transport.WC_RETRY_EXC_ERR {
		t.Errorf("peer after the session closed: %+v", w)
	}
}

// waitWRID polls cq until the completion of wrid, which it returns; the
// completions before it are dropped.
func waitWRID(t *testing.T, cq *transport.CompletionQueue, wrid uint64) transport.WorkCompletion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		if err := cq.Wait(ctx); err != nil {
			t.Fatalf("no completion of WR %d: %v", wrid, err)
		}
		w := make([]transport.WorkCompletion, 1)
		if cq.Poll(w) == 1 && w[0].WRID == wrid {
			return w[0]
		}
	}
}

// TestAsyncEvents: a CQ that overruns raises IBV_EVENT_CQ_ERR, which reaches the
// owning session's event channel with the cookie the library gave the CQ; the QP
// whose receive completion was lost moves to ERR with no event of its own, as
// rdma_rxe's (rxe_resp.c RESPST_ERR_CQ_OVERFLOW, rxe_qp_error).
func TestAsyncEvents(t *testing.T) {
	dp := startDataPath(t)
	c := dp.dial(t)
	sv := seqpacketPair(t)
	err := c.CallFD(OpAsyncChannel, nil, sv[1], nil)
	unix.Close(sv[1])
	if err != nil {
		t.Fatal(err)
	}
	page := os.Getpagesize()
	var pd Handle
	if err := c.Call(OpAllocPD, nil, &pd); err != nil {
		t.Fatal(err)
	}
	fd, buf := memfd(t, page, true)
	var mr RegMRReply
	if err := c.CallFD(OpRegMR, &RegMRReq{PD: pd.Handle, Access: 1, Addr: addr(buf), Length: uint64(page), IOVA: addr(buf),
		MapAddr: addr(buf), MapLen: uint64(page), NPieces: 1, Pieces: onePiece(page)}, fd, &mr); err != nil {
		t.Fatal(err)
	}
	cq := createTestCQ(t, c, CreateCQReq{CQE: 1, Cookie: 0xc0c0})
	tq := createTestQP(t, c, CreateQPReq{PD: pd.Handle, SendCQ: cq.h, RecvCQ: cq.h, QPType: qptRC,
		MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1, Cookie: 0x9090})
	pdB := dp.devB.AllocPD()
	cqB := dp.devB.CreateCQ(16)
	bufB := make([]byte, 64)
	mrB, _ := pdB.RegMR(bufB, transport.AccessLocalWrite)
	qpB, err := pdB.CreateQP(transport.QPInitAttr{SendCQ: cqB, RecvCQ: cqB})
	if err != nil {
		t.Fatal(err)
	}
	if err := transport.BringUp(qpB, transport.QPS_RESET, transport.QPS_RTS, transport.ConnectParams{
		AH: transport.AddressHandle{DGID: roce.GIDFromAddr(dp.ipA), SGIDIndex: 1}, PathMTU: roce.MTU1024,
		DestQPN: tq.r.QPN, RQPSN: 1, SQPSN: 1}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []QPAttrMsg{
		{Mask: 1 | 1<<3 | 1<<4 | 1<<5, State: 1, AccessFlags: 1, PortNum: 1},
		{Mask: 1 | 1<<7 | 1<<8 | 1<<20 | 1<<12 | 1<<17 | 1<<15, State: 2, PathMTU: 3, DestQPN: qpB.QPN(), RQPSN: 1,
			DGID: roce.GIDFromAddr(dp.ipB), SGIDIndex: 1, IsGlobal: 1, MinRNRTimer: 12},
	} {
		m.QP = tq.r.Handle
		if err := c.Call(OpModifyQP, &m, nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		tq.postRecv(le(RecvWRMsg{NumSGE: 1}, SGEMsg{Addr: addr(buf), Length: 64, LKey: mr.LKey}))
	}
	// Two SENDs into a CQ of one entry that nobody polls: the second overruns it.
	for i := range 2 {
		if _, err := qpB.PostSend(transport.SendWR{WRID: uint64(i), Opcode: transport.WR_SEND,
			SGList: []transport.SGE{{Addr: mrB.Addr(), Length: 8, LKey: mrB.LKey()}}}); err != nil {
			t.Fatal(err)
		}
	}
	var got []AsyncEventMsg
	for wait := 5000; ; wait = 300 { // the first event, then nothing more
		p := []unix.PollFd{{Fd: int32(sv[0]), Events: unix.POLLIN}}
		if n, _ := unix.Poll(p, wait); n != 1 {
			break
		}
		b := make([]byte, 64)
		n, err := unix.Read(sv[0], b)
		if err != nil || n != 16 {
			t.Fatalf("event read: %d bytes, %v", n, err)
		}
		got = append(got, AsyncEventMsg{Type: binary.LittleEndian.Uint32(b), Cookie: binary.LittleEndian.Uint64(b[8:])})
	}
	want := AsyncEventMsg{Type: uint32(transport.EVENT_CQ_ERR), Cookie: 0xc0c0}
	if len(got) != 1 || got[0] != want {
		t.Errorf("events %+v, want only %+v", got, want)
	}
}

// seqpacketPair is a SEQPACKET socket pair for an event channel: sv[0] stays with
// the test (closed at its end), sv[1] goes to the daemon.
func seqpacketPair(t *testing.T) [2]int {
	t.Helper()
	sv, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(sv[0]) })
	return sv
}
