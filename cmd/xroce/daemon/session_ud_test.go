package daemon

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// TestSessionUD drives a UD QP of a session as the library does: created with
// IBV_QPT_UD, brought to RTS with verbs' masks (qkey, no path), an address handle,
// a UD send whose slot names it with the peer's QPN and Q_Key, and a UD receive
// whose CQE carries the sender's QPN and the GRH flag. Then what is refused: RC
// attributes on UD, an address handle without a GRH, a PD with an address handle,
// and a send naming a destroyed address handle (the ring stops, the QP fails).
func TestSessionUD(t *testing.T) {
	dp := startDataPath(t)
	c := dp.dial(t)
	pd, mr, buf := pdWithMR(t, c)
	cq := createTestCQ(t, c, CreateCQReq{CQE: 16})
	tq := createTestQP(t, c, CreateQPReq{PD: pd.Handle, SendCQ: cq.h, RecvCQ: cq.h, QPType: qptUD,
		MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1})
	qp := tq.r
	if want := uint32(dp.srv.src.(engineSource).Engine().MaxPathMTU().Bytes()); qp.MaxUDMsg != want {
		t.Errorf("max_ud_msg %d, want the port's MTU %d", qp.MaxUDMsg, want)
	}
	const qkey = 0x11111111
	for _, m := range []QPAttrMsg{
		{Mask: 1 | 1<<4 | 1<<5 | 1<<6, State: 1, PortNum: 1, QKey: qkey}, // STATE|PKEY_INDEX|PORT|QKEY
		{Mask: 1, State: 2},
		{Mask: 1 | 1<<16, State: 3, SQPSN: 77}, // STATE|SQ_PSN
	} {
		m.QP = qp.Handle
		if err := c.Call(OpModifyQP, &m, nil); err != nil {
			t.Fatalf("modify to %d: %v", m.State, err)
		}
	}
	wantErrno(t, "UD with a timeout", c.Call(OpModifyQP, &QPAttrMsg{QP: qp.Handle, Mask: 1 << 9, Timeout: 14}, nil), unix.EINVAL)
	var qa QPAttrMsg
	if err := c.Call(OpQueryQP, &Handle{qp.Handle}, &qa); err != nil || qa.State != 3 || qa.QKey != qkey || qa.SQPSN != 77 || qa.IsGlobal != 0 {
		t.Fatalf("query qp: %+v %v", qa, err)
	}

	// Device B's UD QP, driven directly.
	pdB := dp.devB.AllocPD()
	cqB := dp.devB.CreateCQ(16)
	bufB := make([]byte, 4096)
	mrB, _ := pdB.RegMR(bufB, transport.AccessLocalWrite)
	qpB, err := pdB.CreateQP(transport.QPInitAttr{Type: transport.QPT_UD, SendCQ: cqB, RecvCQ: cqB})
	if err != nil {
		t.Fatal(err)
	}
	if err := transport.BringUp(qpB, transport.QPS_RESET, transport.QPS_RTS, transport.ConnectParams{Type: transport.QPT_UD, QKey: qkey}); err != nil {
		t.Fatal(err)
	}

	// Address handles: RoCE needs the GRH; port 1 only.
	gidB := roce.GIDFromAddr(dp.ipB)
	var ah Handle
	wantErrno(t, "AH without a GRH", c.Call(OpCreateAH, &CreateAHReq{PD: pd.Handle, DGID: gidB, SGIDIndex: 1, PortNum: 1}, &ah), unix.EINVAL)
	wantErrno(t, "AH on port 2", c.Call(OpCreateAH, &CreateAHReq{PD: pd.Handle, DGID: gidB, SGIDIndex: 1, IsGlobal: 1, PortNum: 2}, &ah), unix.EINVAL)
	wantErrno(t, "AH in no PD", c.Call(OpCreateAH, &CreateAHReq{PD: 999, DGID: gidB, SGIDIndex: 1, IsGlobal: 1, PortNum: 1}, &ah), unix.EINVAL)
	if err := c.Call(OpCreateAH, &CreateAHReq{PD: pd.Handle, DGID: gidB, SGIDIndex: 1, IsGlobal: 1, PortNum: 1, HopLimit: 1}, &ah); err != nil {
		t.Fatal(err)
	}

	// The session sends to B: B's receive completes with the session QP's number.
	if _, err := qpB.PostRecv(transport.RecvWR{WRID: 5, SGList: []transport.SGE{{Addr: mrB.Addr(), Length: 200, LKey: mrB.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	copy(buf[100:], "a UD message")
	tq.postSend(le(SendWRMsg{Opcode: uint32(transport.WR_SEND), Flags: uint32(transport.SendSignaled), NumSGE: 1,
		AH: ah.Handle, RemoteQPN: qpB.QPN(), RemoteQKey: qkey}, SGEMsg{Addr: addr(buf) + 100, Length: 12, LKey: mr.LKey}))
	if e := cq.poll(t); e != (CQE{Seq: 0, Opcode: uint32(transport.WC_SEND), ByteLen: 12, QPNum: qp.QPN}) {
		t.Fatalf("send completion: %+v", e)
	}
	if w := waitWRID(t, cqB, 5); w.Status != transport.WC_SUCCESS || w.ByteLen != 40+12 || w.SrcQP != qp.QPN || !w.GRH ||
		string(bufB[40:52]) != "a UD message" {
		t.Fatalf("B's receive: %+v %q", w, bufB[40:52])
	}

	// B sends to the session: the CQE names B's QPN and carries the GRH flag.
	tq.postRecv(le(RecvWRMsg{NumSGE: 1}, SGEMsg{Addr: addr(buf) + 1000, Length: 1000, LKey: mr.LKey}))
	ahB, err := pdB.CreateAH(transport.AddressHandle{DGID: roce.GIDFromAddr(dp.ipA), SGIDIndex: 1})
	if err != nil {
		t.Fatal(err)
	}
	copy(bufB[500:], "and back")
	if _, err := qpB.PostSend(transport.SendWR{WRID: 6, Opcode: transport.WR_SEND_WITH_IMM, ImmData: 9, Flags: transport.SendSignaled,
		SGList: []transport.SGE{{Addr: mrB.Addr() + 500, Length: 8, LKey: mrB.LKey()}}, AH: ahB, RemoteQPN: qp.QPN, RemoteQKey: qkey}); err != nil {
		t.Fatal(err)
	}
	if e := cq.poll(t); e != (CQE{Seq: 0, Flags: CQERecv | CQEWithImm | CQEGRH, Opcode: uint32(transport.WC_RECV), ByteLen: 48,
		ImmData: 9, QPNum: qp.QPN, SrcQP: qpB.QPN()}) || string(buf[1040:1048]) != "and back" {
		t.Fatalf("receive completion: %+v %q", e, buf[1040:1048])
	}

	// A PD with an address handle is busy; a destroyed handle is gone, and a send
	// naming it stops the ring with the QP in ERR.
	wantErrno(t, "dealloc PD with an AH", c.Call(OpDeallocPD, &pd, nil), unix.EBUSY)
	if err := c.Call(OpDestroyAH, &ah, nil); err != nil {
		t.Fatal(err)
	}
	wantErrno(t, "destroy AH twice", c.Call(OpDestroyAH, &ah, nil), unix.EINVAL)
	tq.postSend(le(SendWRMsg{Opcode: uint32(transport.WR_SEND), NumSGE: 1, AH: ah.Handle, RemoteQPN: qpB.QPN(), RemoteQKey: qkey},
		SGEMsg{Addr: addr(buf) + 100, Length: 12, LKey: mr.LKey}))
	for qa.State != uint32(transport.QPS_ERR) {
		if err := c.Call(OpQueryQP, &Handle{qp.Handle}, &qa); err != nil {
			t.Fatal(err)
		}
	}
}
