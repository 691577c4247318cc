package daemon

import (
	"fmt"

	"github.com/xroce/xroce/transport"
)

// The attribute masks ibv_modify_qp takes, transition by transition, as the
// kernel's uverbs layer checks them for rdma_rxe before the driver sees them
// (drivers/infiniband/core/verbs.c: qp_state_table and ib_modify_qp_is_ok; IBTA
// Vol 1 §11.2.4.2 Table 93). The engine's own table (transport.QueuePair.Modify)
// takes what it needs of them; this one refuses and accepts as the kernel does,
// so that an application cannot tell the device apart by its masks.

// verbs attribute-mask bits the engine has no use for (enum ibv_qp_attr_mask).
const (
	maskCurState        = 1 << 1  // IBV_QP_CUR_STATE
	maskEnSQDAsyncNotif = 1 << 2  // IBV_QP_EN_SQD_ASYNC_NOTIFY
	maskAltPath         = 1 << 14 // IBV_QP_ALT_PATH: taken and kept by rdma_rxe, never used
	maskPathMigState    = 1 << 18 // IBV_QP_PATH_MIG_STATE: the same
)

// ignoredMask is what the daemon takes from an application and does not pass to the
// engine.
const ignoredMask = maskCurState | maskEnSQDAsyncNotif | maskAltPath | maskPathMigState

const (
	mState    = transport.QP_STATE
	mAccess   = transport.QP_ACCESS_FLAGS
	mPKey     = transport.QP_PKEY_INDEX
	mPort     = transport.QP_PORT
	mQKey     = transport.QP_QKEY
	mAV       = transport.QP_AV
	mMTU      = transport.QP_PATH_MTU
	mTimeout  = transport.QP_TIMEOUT
	mRetry    = transport.QP_RETRY_CNT
	mRNRRetry = transport.QP_RNR_RETRY
	mRQPSN    = transport.QP_RQ_PSN
	mRdAtomic = transport.QP_MAX_QP_RD_ATOMIC
	mRNRTimer = transport.QP_MIN_RNR_TIMER
	mSQPSN    = transport.QP_SQ_PSN
	mDestRd   = transport.QP_MAX_DEST_RD_ATOMIC
	mDestQPN  = transport.QP_DEST_QPN
	mCur      = transport.QPAttrMask(maskCurState)
	mSQDNote  = transport.QPAttrMask(maskEnSQDAsyncNotif)
	mAlt      = transport.QPAttrMask(maskAltPath)
	mMig      = transport.QPAttrMask(maskPathMigState)
)

// qpTrans is one transition's required and optional attributes for RC, UC and UD
// (in that order).
type qpTrans struct {
	req, opt [3]transport.QPAttrMask
}

// qpStateTable is qp_state_table for the RC, UC and UD columns; a transition not
// listed is invalid. Any state may go to RESET, and any but RESET to ERR, with no
// attributes.
var qpStateTable = map[[2]transport.QPState]qpTrans{
	{transport.QPS_RESET, transport.QPS_INIT}: {
		req: [3]transport.QPAttrMask{mPKey | mPort | mAccess, mPKey | mPort | mAccess, mPKey | mPort | mQKey}},
	{transport.QPS_INIT, transport.QPS_INIT}: {
		opt: [3]transport.QPAttrMask{mPKey | mPort | mAccess, mPKey | mPort | mAccess, mPKey | mPort | mQKey}},
	{transport.QPS_INIT, transport.QPS_RTR}: {
		req: [3]transport.QPAttrMask{mAV | mMTU | mDestQPN | mRQPSN | mDestRd | mRNRTimer, mAV | mMTU | mDestQPN | mRQPSN, 0},
		opt: [3]transport.QPAttrMask{mAlt | mAccess | mPKey, mAlt | mAccess | mPKey, mPKey | mQKey}},
	{transport.QPS_RTR, transport.QPS_RTS}: {
		req: [3]transport.QPAttrMask{mTimeout | mRetry | mRNRRetry | mSQPSN | mRdAtomic, mSQPSN, mSQPSN},
		opt: [3]transport.QPAttrMask{mCur | mAlt | mAccess | mRNRTimer | mMig, mCur | mAlt | mAccess | mMig, mCur | mQKey}},
	{transport.QPS_RTS, transport.QPS_RTS}: {
		opt: [3]transport.QPAttrMask{mCur | mAccess | mAlt | mMig | mRNRTimer, mCur | mAccess | mAlt | mMig, mCur | mQKey}},
	{transport.QPS_RTS, transport.QPS_SQD}: {
		opt: [3]transport.QPAttrMask{mSQDNote, mSQDNote, mSQDNote}},
	{transport.QPS_SQD, transport.QPS_RTS}: {
		opt: [3]transport.QPAttrMask{mCur | mAlt | mAccess | mRNRTimer | mMig, mCur | mAlt | mAccess | mMig, mCur | mQKey}},
	{transport.QPS_SQD, transport.QPS_SQD}: {
		opt: [3]transport.QPAttrMask{mPort | mAV | mTimeout | mRetry | mRNRRetry | mRdAtomic | mDestRd | mAlt | mAccess | mPKey | mRNRTimer | mMig,
			mAV | mAlt | mAccess | mPKey | mMig, mPKey | mQKey}},
	{transport.QPS_SQE, transport.QPS_RTS}: {
		opt: [3]transport.QPAttrMask{0, mCur | mAccess, mCur | mQKey}},
}

// qpTypeColumn is t's column in qpStateTable.
func qpTypeColumn(t transport.QPType) int {
	switch t {
	case transport.QPT_UC:
		return 1
	case transport.QPT_UD:
		return 2
	}
	return 0
}

// modifyOK is ib_modify_qp_is_ok for a QP of type t moving from cur to next with
// mask: nil, or what the kernel would refuse, named. cur is the QP's state, or
// attr->cur_qp_state under IBV_QP_CUR_STATE, as rxe_qp_chk_attr takes it.
func modifyOK(cur, next transport.QPState, t transport.QPType, mask transport.QPAttrMask) error {
	if mask&mCur != 0 && cur != transport.QPS_RTR && cur != transport.QPS_RTS && cur != transport.QPS_SQD && cur != transport.QPS_SQE {
		return fmt.Errorf("IBV_QP_CUR_STATE is for a QP in RTR, RTS, SQD or SQE, not %v", cur)
	}
	var tr qpTrans
	switch {
	case next == transport.QPS_RESET || next == transport.QPS_ERR && cur != transport.QPS_RESET,
		cur == next && (cur == transport.QPS_RESET || cur == transport.QPS_ERR):
	default:
		var ok bool
		if tr, ok = qpStateTable[[2]transport.QPState{cur, next}]; !ok {
			return fmt.Errorf("%v → %v is not a transition (IBTA Vol 1 §10.3.1)", cur, next)
		}
	}
	c := qpTypeColumn(t)
	if miss := tr.req[c] &^ mask; miss != 0 {
		return fmt.Errorf("%v → %v needs attributes %v", cur, next, miss)
	}
	if extra := mask &^ (tr.req[c] | tr.opt[c] | mState); extra != 0 {
		return fmt.Errorf("%v → %v does not take attributes %v", cur, next, extra)
	}
	return nil
}
