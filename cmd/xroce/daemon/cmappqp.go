package daemon

import (
	"errors"

	"golang.org/x/sys/unix"

	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/transport/rdmacm"
)

// Application-managed QPs (rping -q): rdma_connect and rdma_accept name a QP by its
// number (conn_param.qp_num) and the application moves it itself, with the
// attributes rdma_init_qp_attr gives; the active side's REP comes as
// RDMA_CM_EVENT_CONNECT_RESPONSE and rdma_establish sends the RTU
// (docs/verbs-library.md §7).

// connQP returns the QP a connect or accept names: the session's QP r.QP, or with
// QP 0 the application-managed QP number r.Param.QPNum (qp nil).
func (s *session) connQP(r *CMConnReq) (qp *transport.QueuePair, qpn uint32, err error) {
	if r.QP == 0 {
		if r.Param.QPNum == 0 || r.Param.QPNum > 0xFFFFFF {
			return nil, 0, fail(unix.EINVAL, "no QP: create one with rdma_create_qp, or give an application-managed QP's number in conn_param.qp_num (it is 0x%x)", r.Param.QPNum)
		}
		return nil, r.Param.QPNum, nil
	}
	o := s.qps[r.QP]
	if o == nil {
		return nil, 0, fail(unix.EINVAL, "no QP %d in this session", r.QP)
	}
	return o.qp, o.qp.QPN(), nil
}

// cmInitQPAttr answers rdma_init_qp_attr: the id's connection's attributes for
// the state asked (rdmacm.Conn.QPAttrs), or before any exchange the INIT state's
// (no remote access, as the kernel's cma_ib_init_qp_attr gives an id without a
// connection).
func (s *session) cmInitQPAttr(c *cmDevice, r *CMInitQPAttrReq) (*QPAttrMsg, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	id, err := s.cmID(c, r.Handle)
	if err != nil {
		return nil, err
	}
	if id.ps != cm.PortSpaceTCP {
		return nil, fail(unix.EINVAL, "rdma_init_qp_attr: xroce gives it for RDMA_PS_TCP ids (RC QPs), not RDMA_PS_UDP")
	}
	st := transport.QPState(r.State)
	var a transport.QPAttr
	var mask transport.QPAttrMask
	switch {
	case id.req != nil:
		a, mask, err = id.req.QPAttrs(st)
	case id.conn != nil:
		a, mask, err = id.conn.QPAttrs(st)
	case st == transport.QPS_INIT:
		a, mask = transport.QPAttr{State: st}, transport.QP_STATE|transport.QP_ACCESS_FLAGS|transport.QP_PKEY_INDEX|transport.QP_PORT
	default:
		err = rdmacm.ErrParam
	}
	if err != nil {
		if errors.Is(err, rdmacm.ErrParam) && id.req == nil && id.conn == nil {
			return nil, fail(unix.EINVAL, "rdma_init_qp_attr for state %d before rdma_connect or a connection request: only INIT's attributes exist yet", r.State)
		}
		return nil, fail(unix.EINVAL, "rdma_init_qp_attr: %v", err)
	}
	return qpAttrMsg(a, mask), nil
}

// qpAttrMsg carries a QP attribute set to the library (struct ibv_qp_attr's
// fields, port 1, P_Key index 0, the GRH present when the address vector is).
func qpAttrMsg(a transport.QPAttr, mask transport.QPAttrMask) *QPAttrMsg {
	m := &QPAttrMsg{Mask: uint32(mask), State: uint32(a.State), PathMTU: uint32(a.PathMTU), DestQPN: a.DestQPN,
		RQPSN: a.RQPSN, SQPSN: a.SQPSN, AccessFlags: uint32(a.AccessFlags), DGID: [16]byte(a.AH.DGID),
		FlowLabel: a.AH.FlowLabel, SGIDIndex: uint8(a.AH.SGIDIndex), HopLimit: a.AH.HopLimit,
		TrafficClass: a.AH.TrafficClass, MaxRdAtomic: a.MaxRdAtomic, MaxDestRdAtomic: a.MaxDestRdAtomic,
		MinRNRTimer: a.MinRNRTimer, Timeout: a.Timeout, RetryCnt: a.RetryCnt, RNRRetry: a.RNRRetry, PortNum: 1}
	if mask&transport.QP_AV != 0 {
		m.IsGlobal = 1
	}
	return m
}
