package transport_test

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// modifyCall is one Modify a recordingQP saw.
type modifyCall struct {
	attr transport.QPAttr
	mask transport.QPAttrMask
}

// recordingQP records Modify calls and fails the one whose state is failAt.
type recordingQP struct {
	calls  []modifyCall
	failAt transport.QPState
}

var errRefused = errors.New("refused")

func (q *recordingQP) Modify(attr transport.QPAttr, mask transport.QPAttrMask) error {
	q.calls = append(q.calls, modifyCall{attr, mask})
	if attr.State == q.failAt {
		return errRefused
	}
	return nil
}

// TestBringUpSteps: the attributes and masks of each step, exactly, with the
// default timers and with given ones.
func TestBringUpSteps(t *testing.T) {
	ah := transport.AddressHandle{DGID: roce.GIDFromAddr(addrB), SGIDIndex: 1, TrafficClass: 0x68}
	p := transport.ConnectParams{Access: transport.AccessRemoteWrite | transport.AccessRemoteRead, AH: ah,
		PathMTU: roce.MTU2048, DestQPN: 0x1234, RQPSN: 0xabcdef, MaxDestRdAtomic: 16, SQPSN: 0x123456, MaxRdAtomic: 8}
	init := modifyCall{transport.QPAttr{State: transport.QPS_INIT, AccessFlags: transport.AccessRemoteWrite | transport.AccessRemoteRead},
		transport.QP_STATE | transport.QP_ACCESS_FLAGS}
	rtr := modifyCall{transport.QPAttr{State: transport.QPS_RTR, AH: ah, PathMTU: roce.MTU2048, DestQPN: 0x1234, RQPSN: 0xabcdef,
		MaxDestRdAtomic: 16, MinRNRTimer: 12},
		transport.QP_STATE | transport.QP_AV | transport.QP_PATH_MTU | transport.QP_DEST_QPN | transport.QP_RQ_PSN |
			transport.QP_MAX_DEST_RD_ATOMIC | transport.QP_MIN_RNR_TIMER}
	rts := modifyCall{transport.QPAttr{State: transport.QPS_RTS, SQPSN: 0x123456, MaxRdAtomic: 8, Timeout: 14, RetryCnt: 7, RNRRetry: 7},
		transport.QP_STATE | transport.QP_SQ_PSN | transport.QP_TIMEOUT | transport.QP_RETRY_CNT | transport.QP_RNR_RETRY |
			transport.QP_MAX_QP_RD_ATOMIC}
	if got := uint32(rtr.mask); got != 0x129181 {
		t.Fatalf("RTR mask %#x, want 0x129181 (enum ibv_qp_attr_mask)", got)
	}
	if got := uint32(rts.mask); got != 0x12e01 {
		t.Fatalf("RTS mask %#x, want 0x12e01 (enum ibv_qp_attr_mask)", got)
	}
	for _, c := range []struct {
		from, to transport.QPState
		want     []modifyCall
	}{
		{transport.QPS_RESET, transport.QPS_RTS, []modifyCall{init, rtr, rts}},
		{transport.QPS_RESET, transport.QPS_INIT, []modifyCall{init}},
		{transport.QPS_RESET, transport.QPS_RTR, []modifyCall{init, rtr}},
		{transport.QPS_INIT, transport.QPS_RTS, []modifyCall{rtr, rts}},
		{transport.QPS_RTR, transport.QPS_RTS, []modifyCall{rts}},
	} {
		var q recordingQP
		if err := transport.BringUp(&q, c.from, c.to, p); err != nil {
			t.Fatalf("%v → %v: %v", c.from, c.to, err)
		}
		if !reflect.DeepEqual(q.calls, c.want) {
			t.Errorf("%v → %v:\n got %+v\nwant %+v", c.from, c.to, q.calls, c.want)
		}
	}

	p.Timers = &transport.Timers{Timeout: 0, RetryCnt: 2, RNRRetry: 0, MinRNRTimer: 1}
	var q recordingQP
	if err := transport.BringUp(&q, transport.QPS_INIT, transport.QPS_RTS, p); err != nil {
		t.Fatal(err)
	}
	if a := q.calls[0].attr; a.MinRNRTimer != 1 {
		t.Errorf("RTR min_rnr_timer %d, want 1", a.MinRNRTimer)
	}
	if a := q.calls[1].attr; a.Timeout != 0 || a.RetryCnt != 2 || a.RNRRetry != 0 {
		t.Errorf("RTS timeout %d retry_cnt %d rnr_retry %d, want 0 2 0", a.Timeout, a.RetryCnt, a.RNRRetry)
	}
}

// TestBringUpErrors: a failing step is named and its error wrapped, the later steps
// are not tried, and impossible from/to pairs are refused without a Modify.
func TestBringUpErrors(t *testing.T) {
	q := recordingQP{failAt: transport.QPS_RTR}
	err := transport.BringUp(&q, transport.QPS_RESET, transport.QPS_RTS, transport.ConnectParams{})
	if !errors.Is(err, errRefused) || err.Error() != "bring-up INIT → RTR: refused" {
		t.Errorf("error %q", err)
	}
	if len(q.calls) != 2 {
		t.Errorf("%d Modify calls, want 2 (INIT, then the failing RTR)", len(q.calls))
	}
	for _, c := range [][2]transport.QPState{
		{transport.QPS_RESET, transport.QPS_RESET}, {transport.QPS_RTS, transport.QPS_RTS},
		{transport.QPS_RTR, transport.QPS_INIT}, {transport.QPS_RESET, transport.QPS_ERR}, {transport.QPS_SQD, transport.QPS_RTS},
	} {
		var q recordingQP
		err := transport.BringUp(&q, c[0], c[1], transport.ConnectParams{})
		if !errors.Is(err, transport.ErrQPState) || len(q.calls) != 0 {
			t.Errorf("%v → %v: %v after %d calls", c[0], c[1], err, len(q.calls))
		}
	}
}

// TestBringUpEngine: the engine's QP takes every step and ends in RTS; an engine
// refusal names its step.
func TestBringUpEngine(t *testing.T) {
	ea, _ := transport.NewPipe(transport.PipeConfig{MAC: macA, Addrs: []netip.Addr{addrA}},
		transport.PipeConfig{MAC: macB, Addrs: []netip.Addr{addrB}})
	dev, err := transport.Open(ea, transport.Options{Clock: transport.NewFakeClock()})
	must(t, err)
	pd := dev.AllocPD()
	cq := dev.CreateCQ(16)
	p := transport.ConnectParams{AH: transport.AddressHandle{DGID: roce.GIDFromAddr(addrB), SGIDIndex: 1},
		PathMTU: roce.MTU1024, DestQPN: 0x11, MaxDestRdAtomic: 1, MaxRdAtomic: 1}
	qp, err := pd.CreateQP(transport.QPInitAttr{SendCQ: cq, RecvCQ: cq})
	must(t, err)
	must(t, transport.BringUp(qp, transport.QPS_RESET, transport.QPS_RTS, p))
	if s := qp.State(); s != transport.QPS_RTS {
		t.Errorf("state %v, want RTS", s)
	}
	qp, err = pd.CreateQP(transport.QPInitAttr{SendCQ: cq, RecvCQ: cq})
	must(t, err)
	p.PathMTU = roce.MTU4096 // the Pipe's 1500-byte MTU carries 1024
	err = transport.BringUp(qp, transport.QPS_RESET, transport.QPS_RTS, p)
	want := "bring-up INIT → RTR: transport: QP 0x12: path MTU 4096 makes IPv4 packets of up to 4164 bytes, more than the link's MTU 1500 carries: use path MTU 1024 or lower, or raise the link's MTU to 4176 or more"
	if err == nil || err.Error() != want {
		t.Errorf("error %q\nwant  %q", err, want)
	}
	if s := qp.State(); s != transport.QPS_INIT {
		t.Errorf("state after the refused RTR %v, want INIT", s)
	}
}

// TestModifyNamesMissingAttributes: a transition missing attributes names them as
// ibv_qp_attr_mask spells them, not as a number.
func TestModifyNamesMissingAttributes(t *testing.T) {
	p := newPair(t, pairConfig{})
	cq := p.a.dev.CreateCQ(4)
	qp, err := p.a.pd.CreateQP(transport.QPInitAttr{SendCQ: cq, RecvCQ: cq})
	must(t, err)
	must(t, qp.Modify(transport.QPAttr{State: transport.QPS_INIT}, transport.QP_STATE|transport.QP_ACCESS_FLAGS))
	err = qp.Modify(transport.QPAttr{State: transport.QPS_RTR}, transport.QP_STATE|transport.QP_PATH_MTU|transport.QP_DEST_QPN|transport.QP_RQ_PSN)
	want := "IBV_QPS_INIT → IBV_QPS_RTR needs attributes IBV_QP_AV|IBV_QP_MIN_RNR_TIMER|IBV_QP_MAX_DEST_RD_ATOMIC"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
	if s := (transport.QP_STATE | 1<<30).String(); s != "IBV_QP_STATE|0x40000000" {
		t.Errorf("String %q", s)
	}
}
