package rdmacm

import (
	"fmt"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport"
)

// qpParams are the attributes a connection gives its RC QP, from the REQ and REP as
// Linux's ib_cm derives them (cm.c cm_init_qp_init_attr, cm_init_qp_rtr_attr,
// cm_init_qp_rts_attr).
type qpParams struct {
	ah        transport.AddressHandle
	mtu       roce.MTU
	destQPN   uint32
	rqPSN     uint32 // this side's Starting PSN: what it expects to receive
	sqPSN     uint32 // the peer's Starting PSN: where this side transmits from
	respRes   uint8  // max_dest_rd_atomic
	initDepth uint8  // max_rd_atomic
	timeout   uint8  // the path's Local ACK Timeout
	retry     uint8
	rnrRetry  uint8
}

// access is the QP's qp_access_flags: remote writes always, remote reads and
// atomics when it has responder resources (cm_init_qp_init_attr).
func (p *qpParams) access() transport.Access {
	a := transport.AccessRemoteWrite
	if p.respRes > 0 {
		a |= transport.AccessRemoteRead | transport.AccessRemoteAtomic
	}
	return a
}

// bringUp moves qp from RESET or INIT to RTS with p, as librdmacm's
// ucma_modify_qp_rtr and ucma_modify_qp_rts do: INIT (its access flags set again
// when it is there already), RTR with min_rnr_timer 0 (cm_init_qp_rtr_attr sets 0,
// 655.36 ms), RTS.
func (p *qpParams) bringUp(qp *transport.QueuePair) error {
	cp := transport.ConnectParams{
		Access:  p.access(),
		AH:      p.ah,
		PathMTU: p.mtu, DestQPN: p.destQPN, RQPSN: p.rqPSN, MaxDestRdAtomic: p.respRes,
		SQPSN: p.sqPSN, MaxRdAtomic: p.initDepth,
		Timers: &transport.Timers{Timeout: p.timeout, RetryCnt: p.retry, RNRRetry: p.rnrRetry, MinRNRTimer: 0},
	}
	switch s := qp.State(); s {
	case transport.QPS_RESET:
		return transport.BringUp(qp, transport.QPS_RESET, transport.QPS_RTS, cp)
	case transport.QPS_INIT:
		if err := qp.Modify(transport.QPAttr{State: transport.QPS_INIT, AccessFlags: cp.Access},
			transport.QP_STATE|transport.QP_ACCESS_FLAGS); err != nil {
			return err
		}
		return transport.BringUp(qp, transport.QPS_INIT, transport.QPS_RTS, cp)
	default:
		return fmt.Errorf("rdmacm: QP 0x%x is in %v; a connection takes a QP in RESET or INIT: %w", qp.QPN(), s, transport.ErrQPState)
	}
}

// activeParams are the active side's QP attributes once the REP came: its REQ's
// path and PSN, the REP's QPN, PSN and resources (cm_rep_handler takes the REP's
// responder resources as its initiator depth and the REP's initiator depth as its
// responder resources).
func activeParams(req *cm.REQ, rep *cm.REP, sgid int) qpParams {
	return qpParams{
		ah:      ahFromPath(&req.Primary, sgid),
		mtu:     req.PathMTU,
		destQPN: rep.LocalQPN, rqPSN: req.StartingPSN, sqPSN: rep.StartingPSN,
		respRes: rep.InitiatorDepth, initDepth: rep.ResponderResources,
		timeout: req.Primary.LocalACKTimeout, retry: req.RetryCount, rnrRetry: rep.RNRRetryCount,
	}
}

// passiveParams are the passive side's QP attributes for its REP: the REQ's path
// and its retry counts, this side's own PSN and the negotiated resources.
func passiveParams(req *cm.REQ, rep *cm.REP, sgid int) qpParams {
	ah := ahFromPath(&req.Primary, sgid)
	ah.DGID = req.Primary.LocalPortGID // the REQ's local is our remote
	return qpParams{
		ah:      ah,
		mtu:     req.PathMTU,
		destQPN: req.LocalQPN, rqPSN: rep.StartingPSN, sqPSN: req.StartingPSN,
		respRes: rep.ResponderResources, initDepth: rep.InitiatorDepth,
		timeout: req.Primary.LocalACKTimeout, retry: req.RetryCount, rnrRetry: req.RNRRetryCount,
	}
}

// ahFromPath is the address vector of a REQ's path seen from its sender: the
// remote port's GID, the path's traffic class, hop limit and flow label.
func ahFromPath(p *cm.Path, sgid int) transport.AddressHandle {
	return transport.AddressHandle{DGID: p.RemotePortGID, SGIDIndex: sgid,
		TrafficClass: p.TrafficClass, HopLimit: p.HopLimit, FlowLabel: p.FlowLabel}
}
