package transport

import (
	"fmt"
	"strings"

	"github.com/xroce/xroce/roce"
)

// QPModifier is a queue pair BringUp can drive: *QueuePair, transport/verbs'
// QueuePair, or anything else with ibv_modify_qp's shape.
type QPModifier interface {
	Modify(attr QPAttr, mask QPAttrMask) error
}

// Timers are an RC QP's retransmission and RNR attributes (struct ibv_qp_attr's
// timeout, retry_cnt, rnr_retry and min_rnr_timer). Each field is a verbs code, not
// a duration.
type Timers struct {
	// Timeout is the local ACK timeout code, 0-31: the requester waits
	// 4.096 µs × 2^Timeout for an ACK before it retransmits (IBTA Vol 1 §11.2.4.2
	// "Local Ack Timeout"); 0 waits forever.
	Timeout uint8
	// RetryCnt is how often, 0-7, the requester retransmits after a timeout or a
	// NAK-sequence error before it completes with IBV_WC_RETRY_EXC_ERR.
	RetryCnt uint8
	// RNRRetry is how often, 0-7, the requester retries after an RNR NAK before it
	// completes with IBV_WC_RNR_RETRY_EXC_ERR; 7 retries forever.
	RNRRetry uint8
	// MinRNRTimer is the RNR NAK timer code, 0-31, this QP's responder sends in its
	// RNR NAKs (IBTA Vol 1 Table 45; roce.RNRTimerDelay: 12 is 0.64 ms).
	MinRNRTimer uint8
}

// Defaults of ibv_rc_pingpong (rdma-core libibverbs/examples/rc_pingpong.c,
// pp_connect_ctx) and perftest (perftest_resources.c, ctx_modify_qp_to_rtr and
// ctx_modify_qp_to_rts: DEF_QP_TIME 14, MIN_RNR_TIMER 12, retry_cnt and rnr_retry 7).
const (
	DefaultTimeout     = 14 // 4.096 µs × 2^14 = 67.1 ms
	DefaultRetryCnt    = 7
	DefaultRNRRetry    = 7  // infinite
	DefaultMinRNRTimer = 12 // 0.64 ms
)

// DefaultTimers returns ibv_rc_pingpong's and perftest's timers: timeout 14
// (67.1 ms), retry_cnt 7, rnr_retry 7 (infinite) and min_rnr_timer 12 (0.64 ms).
func DefaultTimers() Timers {
	return Timers{Timeout: DefaultTimeout, RetryCnt: DefaultRetryCnt, RNRRetry: DefaultRNRRetry, MinRNRTimer: DefaultMinRNRTimer}
}

// ConnectParams are the attributes that bring a QP from RESET to RTS towards one
// peer QP: the local access flags, and what the out-of-band exchange (perftest's or
// ibv_rc_pingpong's TCP messages, or RDMA CM) tells about the peer. Each field is
// used by one step of BringUp, as named; a UC QP uses only some of them, a UD QP
// only QKey and SQPSN.
type ConnectParams struct {
	// Type is the QP's type: QPT_RC (also for 0), QPT_UC or QPT_UD. It decides which
	// attributes each step sets.
	Type QPType
	// QKey is a UD QP's Q_Key (INIT: qkey).
	QKey uint32

	// Access is the remote operations this QP's responder allows (INIT:
	// qp_access_flags): AccessRemoteWrite, AccessRemoteRead, AccessRemoteAtomic.
	Access Access

	// AH is the path to the peer (RTR: ah_attr): its GID, the local SGID index and
	// the GRH fields.
	AH AddressHandle
	// PathMTU is the path MTU (RTR: path_mtu), the smaller of both sides' (roce.MinMTU).
	PathMTU roce.MTU
	// DestQPN is the peer's QP number, 24 bits (RTR: dest_qp_num).
	DestQPN uint32
	// RQPSN is the first PSN this QP's responder expects: the peer's initial send
	// PSN, 24 bits (RTR: rq_psn).
	RQPSN uint32
	// MaxDestRdAtomic is how many RDMA READ and atomic requests from the peer this
	// QP's responder keeps outstanding, 0-MaxQPRdAtom (RTR: max_dest_rd_atomic).
	MaxDestRdAtomic uint8

	// SQPSN is this QP's initial send PSN, 24 bits, the one it told the peer (RTS:
	// sq_psn).
	SQPSN uint32
	// MaxRdAtomic is how many RDMA READ and atomic requests this QP's requester
	// keeps outstanding, 0-MaxQPRdAtom; at most what the peer accepts (RTS:
	// max_rd_atomic).
	MaxRdAtomic uint8

	// Timers are the retransmission and RNR attributes (RTR: min_rnr_timer; RTS:
	// timeout, retry_cnt, rnr_retry); nil means DefaultTimers().
	Timers *Timers
}

// BringUp moves qp along RESET → INIT → RTR → RTS, from state from to state to,
// with p's attributes and exactly the attribute masks each transition requires
// (IBTA Vol 1 §11.2.4.2 Table 93 "QP State Transition Properties"; ibv_modify_qp(3)).
// For RC:
//
//	RESET → INIT  QP_STATE | QP_ACCESS_FLAGS
//	INIT → RTR    QP_STATE | QP_AV | QP_PATH_MTU | QP_DEST_QPN | QP_RQ_PSN |
//	              QP_MAX_DEST_RD_ATOMIC | QP_MIN_RNR_TIMER
//	RTR → RTS     QP_STATE | QP_SQ_PSN | QP_TIMEOUT | QP_RETRY_CNT | QP_RNR_RETRY |
//	              QP_MAX_QP_RD_ATOMIC
//
// For UC (as ibv_uc_pingpong does):
//
//	RESET → INIT  QP_STATE | QP_ACCESS_FLAGS
//	INIT → RTR    QP_STATE | QP_AV | QP_PATH_MTU | QP_DEST_QPN | QP_RQ_PSN
//	RTR → RTS     QP_STATE | QP_SQ_PSN
//
// For UD (as ibv_ud_pingpong does, without its P_Key index and port):
//
//	RESET → INIT  QP_STATE | QP_QKEY
//	INIT → RTR    QP_STATE
//	RTR → RTS     QP_STATE | QP_SQ_PSN
//
// from is the QP's state now (QPS_RESET, QPS_INIT or QPS_RTR) and to the state to
// leave it in (QPS_INIT, QPS_RTR or QPS_RTS), later than from. A tool that posts
// receives before the exchange calls BringUp(qp, QPS_RESET, QPS_INIT, p) first and
// BringUp(qp, QPS_INIT, QPS_RTS, p) once it knows the peer, as ibv_rc_pingpong does;
// a responder-only QP (a replay) stops at QPS_RTR.
//
// An error names the step that failed ("bring-up INIT → RTR: ...") and wraps qp's
// Modify error; the steps before it stay done. Other from/to pairs are refused with
// ErrQPState.
func BringUp(qp QPModifier, from, to QPState, p ConnectParams) error {
	if from > QPS_RTR || to < QPS_INIT || to > QPS_RTS || to <= from {
		return fmt.Errorf("transport: bring-up from %v to %v: %w", from, to, ErrQPState)
	}
	t := DefaultTimers()
	if p.Timers != nil {
		t = *p.Timers
	}
	for s := from + 1; s <= to; s++ {
		var attr QPAttr
		var mask QPAttrMask
		switch p.Type {
		case QPT_UD:
			attr, mask = udBringUpStep(s, &p)
		case QPT_UC:
			attr, mask = ucBringUpStep(s, &p)
		default:
			attr, mask = rcBringUpStep(s, &p, &t)
		}
		attr.State = s
		if err := qp.Modify(attr, QP_STATE|mask); err != nil {
			return fmt.Errorf("bring-up %s → %s: %w", shortState(s-1), shortState(s), err)
		}
	}
	return nil
}

// rcBringUpStep returns the attributes and mask of an RC QP's step to state s.
func rcBringUpStep(s QPState, p *ConnectParams, t *Timers) (QPAttr, QPAttrMask) {
	switch s {
	case QPS_INIT:
		return QPAttr{AccessFlags: p.Access}, QP_ACCESS_FLAGS
	case QPS_RTR:
		return QPAttr{AH: p.AH, PathMTU: p.PathMTU, DestQPN: p.DestQPN, RQPSN: p.RQPSN,
				MaxDestRdAtomic: p.MaxDestRdAtomic, MinRNRTimer: t.MinRNRTimer},
			QP_AV | QP_PATH_MTU | QP_DEST_QPN | QP_RQ_PSN | QP_MAX_DEST_RD_ATOMIC | QP_MIN_RNR_TIMER
	}
	return QPAttr{SQPSN: p.SQPSN, MaxRdAtomic: p.MaxRdAtomic, Timeout: t.Timeout, RetryCnt: t.RetryCnt,
			RNRRetry: t.RNRRetry},
		QP_SQ_PSN | QP_TIMEOUT | QP_RETRY_CNT | QP_RNR_RETRY | QP_MAX_QP_RD_ATOMIC
}

// ucBringUpStep returns the attributes and mask of a UC QP's step to state s.
func ucBringUpStep(s QPState, p *ConnectParams) (QPAttr, QPAttrMask) {
	switch s {
	case QPS_INIT:
		return QPAttr{AccessFlags: p.Access}, QP_ACCESS_FLAGS
	case QPS_RTR:
		return QPAttr{AH: p.AH, PathMTU: p.PathMTU, DestQPN: p.DestQPN, RQPSN: p.RQPSN},
			QP_AV | QP_PATH_MTU | QP_DEST_QPN | QP_RQ_PSN
	}
	return QPAttr{SQPSN: p.SQPSN}, QP_SQ_PSN
}

// udBringUpStep returns the attributes and mask of a UD QP's step to state s.
func udBringUpStep(s QPState, p *ConnectParams) (QPAttr, QPAttrMask) {
	switch s {
	case QPS_INIT:
		return QPAttr{QKey: p.QKey}, QP_QKEY
	case QPS_RTR:
		return QPAttr{}, 0
	}
	return QPAttr{SQPSN: p.SQPSN}, QP_SQ_PSN
}

// shortState is a state's name without verbs' prefix: "RTR".
func shortState(s QPState) string { return strings.TrimPrefix(s.String(), "IBV_QPS_") }
