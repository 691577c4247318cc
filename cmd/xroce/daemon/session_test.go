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
	c, _, err := Dial(dp.srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	page := os.Getpagesize()

	var pd, cq Handle
	if err := c.Call(OpAllocPD, nil, &pd); err != nil {
		t.Fatal(err)
	}
	fd, buf := memfd(t, 2*page, true)
	reg := RegMRReq{PD: pd.Handle, Access: 0xf, Addr: addr(buf) + 100, Length: uint64(page), IOVA: addr(buf) + 100,
		MapAddr: addr(buf), MapLen: uint64(2 * page)}
	var mr RegMRReply
	if err := c.CallFD(OpRegMR, &reg, fd, &mr); err != nil {
		t.Fatal(err)
	}
	var cqr CreateCQReply
	if err := c.Call(OpCreateCQ, &CreateCQReq{CQE: 16}, &cqr); err != nil {
		t.Fatal(err)
	}
	cq.Handle = cqr.Handle
	var qp CreateQPReply
	if err := c.Call(OpCreateQP, &CreateQPReq{PD: pd.Handle, SendCQ: cq.Handle, RecvCQ: cq.Handle, QPType: qptRC,
		MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInline: 64}, &qp); err != nil {
		t.Fatal(err)
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
		DestQPN: qp.QPN, RQPSN: 1000, SQPSN: 2000, Timers: &timers}); err != nil {
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
	// A receive, posted as the library encodes it.
	post := func(op uint16, parts ...any) PostReply {
		t.Helper()
		var b bytes.Buffer
		for _, p := range parts {
			if err := binary.Write(&b, binary.LittleEndian, p); err != nil {
				t.Fatal(err)
			}
		}
		var r PostReply
		if err := c.Call(op, b.Bytes(), &r); err != nil {
			t.Fatalf("post: %v", err)
		}
		return r
	}
	if r := post(OpPostRecv, PostHdr{QP: qp.Handle, N: 1}, RecvWRMsg{WRID: 7, NumSGE: 1}, SGEMsg{Addr: addr(buf) + 200, Length: 64, LKey: mr.LKey}); r != (PostReply{Posted: 1}) {
		t.Fatalf("post recv: %+v", r)
	}
	// B writes into the region, then sends.
	copy(bufB, "written by the peer")
	copy(bufB[100:], "sent by the peer")
	if _, err := qpB.PostSend(transport.SendWR{WRID: 1, Opcode: transport.WR_RDMA_WRITE, Flags: transport.SendSignaled,
		SGList: []transport.SGE{{Addr: mrB.Addr(), Length: 19, LKey: mrB.LKey()}}, RemoteAddr: addr(buf) + 1000, RKey: mr.RKey},
		transport.SendWR{WRID: 2, Opcode: transport.WR_SEND, Flags: transport.SendSignaled,
			SGList: []transport.SGE{{Addr: mrB.Addr() + 100, Length: 16, LKey: mrB.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	var wcs []WC
	deadline := time.Now().Add(5 * time.Second)
	for len(wcs) == 0 && time.Now().Before(deadline) {
		var b []byte
		if err := c.Call(OpPollCQ, &PollReq{CQ: cq.Handle, Max: 4}, &b); err != nil {
			t.Fatal(err)
		}
		if n := binary.LittleEndian.Uint32(b); n > 0 {
			wcs = make([]WC, n)
			_ = binary.Read(bytes.NewReader(b[4:]), binary.LittleEndian, wcs)
		}
	}
	if len(wcs) != 1 || wcs[0].WRID != 7 || wcs[0].Status != 0 || wcs[0].Opcode != uint32(transport.WC_RECV) || wcs[0].ByteLen != 16 || wcs[0].QPNum != qp.QPN {
		t.Fatalf("completions: %+v", wcs)
	}
	if string(buf[1000:1019]) != "written by the peer" || string(buf[200:216]) != "sent by the peer" {
		t.Errorf("the region's pages, as the application maps them: %q %q", buf[1000:1019], buf[200:216])
	}

	// Bad input: errors, never a crash, nothing touched.
	wantErrno(t, "reg mr without a descriptor", c.Call(OpRegMR, &reg, nil), unix.EBADMSG)
	unsealed, ubuf := memfd(t, page, false)
	r2 := RegMRReq{PD: pd.Handle, Access: 1, Addr: addr(ubuf), Length: 64, MapAddr: addr(ubuf), MapLen: uint64(page)}
	wantErrno(t, "unsealed memfd", c.CallFD(OpRegMR, &r2, unsealed, nil), unix.EINVAL)
	short, sbuf := memfd(t, page, true)
	r3 := RegMRReq{PD: pd.Handle, Access: 1, Addr: addr(sbuf), Length: 64, MapAddr: addr(sbuf), MapLen: uint64(2 * page)}
	wantErrno(t, "memfd shorter than the mapping", c.CallFD(OpRegMR, &r3, short, nil), unix.EINVAL)
	r4 := r3
	r4.MapLen = uint64(page)
	wantErrno(t, "a descriptor that is not a memfd", c.CallFD(OpRegMR, &r4, int(os.Stdin.Fd()), nil), unix.EINVAL)
	r5 := reg
	r5.Addr = reg.MapAddr + reg.MapLen
	wantErrno(t, "region outside its mapping", c.CallFD(OpRegMR, &r5, fd, nil), unix.EINVAL)
	r6 := reg
	r6.PD = 999
	wantErrno(t, "bad PD", c.CallFD(OpRegMR, &r6, fd, nil), unix.EINVAL)
	wantErrno(t, "descriptor on alloc pd", c.CallFD(OpAllocPD, nil, fd, nil), unix.EBADMSG)
	wantErrno(t, "poll a bad CQ", c.Call(OpPollCQ, &PollReq{CQ: 999, Max: 1}, nil), unix.EINVAL)
	wantErrno(t, "destroy a CQ in use", c.Call(OpDestroyCQ, &Handle{cq.Handle}, nil), unix.EBUSY)
	wantErrno(t, "dealloc a PD in use", c.Call(OpDeallocPD, &Handle{pd.Handle}, nil), unix.EBUSY)
	wantErrno(t, "post to a bad QP", c.Call(OpPostSend, []byte{99, 0, 0, 0, 1, 0, 0, 0}, nil), unix.EINVAL)
	wantErrno(t, "truncated post", c.Call(OpPostSend, []byte{byte(qp.Handle), 0, 0, 0, 1, 0, 0, 0, 1, 2}, nil), unix.EBADMSG)
	wantErrno(t, "UD QP", c.Call(OpCreateQP, &CreateQPReq{PD: pd.Handle, SendCQ: cq.Handle, RecvCQ: cq.Handle, QPType: 4}, nil), unix.EOPNOTSUPP)
	// A second session cannot name the first one's objects.
	c2, _, err := Dial(dp.srv.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	wantErrno(t, "another session's CQ", c2.Call(OpPollCQ, &PollReq{CQ: cq.Handle, Max: 1}, nil), unix.EINVAL)
	wantErrno(t, "another session's QP", c2.Call(OpDestroyQP, &Handle{qp.Handle}, nil), unix.EINVAL)
	// A bad lkey completes with a local protection error (as an HCA reports it).
	if r := post(OpPostSend, PostHdr{QP: qp.Handle, N: 1}, SendWRMsg{WRID: 9, Opcode: uint32(transport.WR_SEND), Flags: uint32(transport.SendSignaled), NumSGE: 1},
		SGEMsg{Addr: addr(buf), Length: 8, LKey: mr.LKey + 1}); r != (PostReply{Posted: 1}) {
		t.Fatalf("post with a bad lkey: %+v", r)
	}
	wcs = nil
	for deadline = time.Now().Add(5 * time.Second); len(wcs) == 0 && time.Now().Before(deadline); {
		var b []byte
		if err := c.Call(OpPollCQ, &PollReq{CQ: cq.Handle, Max: 1}, &b); err != nil {
			t.Fatal(err)
		}
		if binary.LittleEndian.Uint32(b) > 0 {
			wcs = make([]WC, 1)
			_ = binary.Read(bytes.NewReader(b[4:]), binary.LittleEndian, wcs)
		}
	}
	if len(wcs) != 1 || wcs[0].WRID != 9 || wcs[0].Status != uint32(transport.WC_LOC_PROT_ERR) {
		t.Errorf("bad lkey: %+v", wcs)
	}

	// The session ends: its objects go, and the peer's next send exhausts its retries.
	cl, _ := c2.Clients()
	if len(cl) != 2 {
		t.Fatalf("clients: %+v", cl)
	}
	c.Close()
	deadline = time.Now().Add(5 * time.Second)
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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var got []transport.WorkCompletion
	for len(got) < 3 {
		if err := cqB.Wait(ctx); err != nil {
			t.Fatalf("peer's completions %+v: %v", got, err)
		}
		w := make([]transport.WorkCompletion, 4)
		got = append(got, w[:cqB.Poll(w)]...)
	}
	if got[2].WRID != 3 || got[2].Status != transport.WC_RETRY_EXC_ERR {
		t.Errorf("peer after the session closed: %+v", got)
	}
}
