package daemon

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSessionSRQ: the SRQ ops as the library calls them. Sizes are granted as
// asked; a post of more receives than max_wr takes max_wr and names ENOMEM for the
// next; a malformed post is EBADMSG and changes nothing; a QP created with the SRQ
// keeps it from being destroyed (EBUSY) and reports no receive queue of its own;
// modify and query change and read the limit; handles of nothing are EINVAL.
func TestSessionSRQ(t *testing.T) {
	dp := startDataPath(t)
	c := dp.dial(t)
	pd, mr, buf := pdWithMR(t, c)
	var srq CreateSRQReply
	wantErrno(t, "SRQ in no PD", c.Call(OpCreateSRQ, &CreateSRQReq{PD: 999, MaxWR: 4, MaxSGE: 1}, &srq), unix.EINVAL)
	wantErrno(t, "SRQ of 28 SGEs", c.Call(OpCreateSRQ, &CreateSRQReq{PD: pd.Handle, MaxWR: 4, MaxSGE: 28}, &srq), unix.EINVAL)
	wantErrno(t, "SRQ of 0 WRs", c.Call(OpCreateSRQ, &CreateSRQReq{PD: pd.Handle, MaxWR: 0, MaxSGE: 1}, &srq), unix.EINVAL)
	// rdma_rxe's sizes: 4 WRs asked, 7 given (rxe_queue_init's 2^k − 1).
	if err := c.Call(OpCreateSRQ, &CreateSRQReq{PD: pd.Handle, MaxWR: 4, MaxSGE: 2}, &srq); err != nil || srq.MaxWR != 7 || srq.MaxSGE != 2 {
		t.Fatalf("create srq: %+v %v", srq, err)
	}
	post := func(n int, slot0 uint64, sges uint32) []byte {
		b := binary.LittleEndian.AppendUint32(nil, srq.Handle)
		b = binary.LittleEndian.AppendUint32(b, uint32(n))
		for i := range n {
			b = binary.LittleEndian.AppendUint64(b, slot0+uint64(i))
			b = binary.LittleEndian.AppendUint32(b, sges)
			b = binary.LittleEndian.AppendUint32(b, 0)
			for range sges {
				b = binary.LittleEndian.AppendUint64(b, addr(buf))
				b = binary.LittleEndian.AppendUint32(b, 64)
				b = binary.LittleEndian.AppendUint32(b, mr.LKey)
			}
		}
		return b
	}
	var pr PostSRQRecvReply
	wantErrno(t, "a post cut short", c.Call(OpPostSRQRecv, post(2, 0, 1)[:30], &pr), unix.EBADMSG)
	if err := c.Call(OpPostSRQRecv, post(9, 0, 1), &pr); err != nil || pr != (PostSRQRecvReply{Posted: 7, Errno: int32(unix.ENOMEM)}) {
		t.Errorf("9 receives into 7: %+v %v; want 7 posted and ENOMEM", pr, err)
	}
	cq := createTestCQ(t, c, CreateCQReq{CQE: 16})
	tq := createTestQP(t, c, CreateQPReq{PD: pd.Handle, SendCQ: cq.h, RecvCQ: cq.h, QPType: qptRC,
		MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1, SRQ: srq.Handle})
	if tq.r.MaxRecvWR != 0 || tq.r.MaxRecvSGE != 0 {
		t.Errorf("a QP with an SRQ reports max_recv_wr %d, max_recv_sge %d; want 0 and 0", tq.r.MaxRecvWR, tq.r.MaxRecvSGE)
	}
	wantErrno(t, "destroy an SRQ in use", c.Call(OpDestroySRQ, &Handle{srq.Handle}, nil), unix.EBUSY)
	wantErrno(t, "limit above max_wr", c.Call(OpModifySRQ, &SRQAttrMsg{SRQ: srq.Handle, Mask: 2, Limit: 8}, nil), unix.EINVAL)
	if err := c.Call(OpModifySRQ, &SRQAttrMsg{SRQ: srq.Handle, Mask: 3, MaxWR: 8, Limit: 2}, nil); err != nil {
		t.Fatal(err)
	}
	var q SRQAttrMsg
	if err := c.Call(OpQuerySRQ, &Handle{srq.Handle}, &q); err != nil || q.MaxWR != 15 || q.MaxSGE != 2 || q.Limit != 2 { // 8 → 15
		t.Errorf("query srq: %+v %v", q, err)
	}
	if err := c.Call(OpDestroyQP, &Handle{tq.r.Handle}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Call(OpDestroySRQ, &Handle{srq.Handle}, nil); err != nil {
		t.Errorf("destroy srq: %v", err)
	}
	wantErrno(t, "query a destroyed SRQ", c.Call(OpQuerySRQ, &Handle{srq.Handle}, &q), unix.EINVAL)
}

// pdWithMR allocates a PD in c's session and registers a sealed 4096-byte memfd
// buffer in it with local write access.
func pdWithMR(t *testing.T, c *Client) (Handle, RegMRReply, []byte) {
	t.Helper()
	var pd Handle
	if err := c.Call(OpAllocPD, nil, &pd); err != nil {
		t.Fatal(err)
	}
	fd, buf := memfd(t, 4096, true)
	reg := RegMRReq{PD: pd.Handle, Access: 1, Addr: addr(buf), Length: 4096, IOVA: addr(buf),
		MapAddr: addr(buf), MapLen: 4096, NPieces: 1, Pieces: onePiece(4096)}
	var mr RegMRReply
	if err := c.CallFD(OpRegMR, &reg, fd, &mr); err != nil {
		t.Fatal(err)
	}
	return pd, mr, buf
}
