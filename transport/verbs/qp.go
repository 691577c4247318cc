//go:build verbs

package verbs

/*
#include <stdlib.h>
#include <string.h>
#include "xverbs.h"
*/
import "C"

import (
	"fmt"
	"syscall"
	"unsafe"

	"github.com/xroce/xroce/transport"
)

// QueuePair is an RC queue pair (struct ibv_qp). Post and Modify are for one
// goroutine at a time.
type QueuePair struct {
	qp   *C.struct_ibv_qp
	sge  *C.struct_ibv_sge // C scratch of maxSGE entries for posting
	nsge int
}

// QPInitAttr creates a QP: its CQs and capacities (struct ibv_qp_init_attr, RC).
type QPInitAttr struct {
	SendCQ, RecvCQ *CompletionQueue
	Cap            transport.QPCap
}

// CreateQP creates an RC QP in RESET (ibv_create_qp). Errors: the errno of
// ibv_create_qp (EINVAL or ENOMEM when a capacity is beyond the device's).
func (pd *ProtectionDomain) CreateQP(attr QPInitAttr) (*QueuePair, error) {
	var ia C.struct_ibv_qp_init_attr
	ia.send_cq, ia.recv_cq = attr.SendCQ.cq, attr.RecvCQ.cq
	ia.qp_type = C.IBV_QPT_RC
	ia.cap.max_send_wr = C.uint32_t(attr.Cap.MaxSendWR)
	ia.cap.max_recv_wr = C.uint32_t(attr.Cap.MaxRecvWR)
	ia.cap.max_send_sge = C.uint32_t(max(attr.Cap.MaxSendSGE, 1))
	ia.cap.max_recv_sge = C.uint32_t(max(attr.Cap.MaxRecvSGE, 1))
	ia.cap.max_inline_data = C.uint32_t(attr.Cap.MaxInlineData)
	qp, err := C.ibv_create_qp(pd.pd, &ia)
	if qp == nil {
		return nil, fmt.Errorf("verbs: ibv_create_qp (send %d, recv %d, inline %d): %v", attr.Cap.MaxSendWR, attr.Cap.MaxRecvWR,
			attr.Cap.MaxInlineData, err)
	}
	n := max(attr.Cap.MaxSendSGE, attr.Cap.MaxRecvSGE, 1)
	sge := (*C.struct_ibv_sge)(C.calloc(C.size_t(n), C.size_t(unsafe.Sizeof(C.struct_ibv_sge{}))))
	return &QueuePair{qp: qp, sge: sge, nsge: n}, nil
}

// QPN is the QP number.
func (q *QueuePair) QPN() uint32 { return uint32(q.qp.qp_num) }

// Modify changes the attributes mask selects (ibv_modify_qp). To INIT it also sets
// pkey_index 0 and port 1, which verbs requires and xroce's engine implies. The
// address vector is always global (RoCE): DGID, SGID index, traffic class, hop
// limit (0 means 64) and flow label.
func (q *QueuePair) Modify(a transport.QPAttr, mask transport.QPAttrMask) error {
	if mask&transport.QP_STATE != 0 && a.State == transport.QPS_INIT {
		mask |= transport.QP_PKEY_INDEX | transport.QP_PORT
	}
	hop := a.AH.HopLimit
	if hop == 0 {
		hop = 64
	}
	rc := C.xr_modify_qp(q.qp, C.int(mask), C.int(a.State), C.int(a.AccessFlags), C.int(a.PathMTU), C.uint32_t(a.DestQPN),
		C.uint32_t(a.RQPSN), C.uint32_t(a.SQPSN), C.int(a.MaxRdAtomic), C.int(a.MaxDestRdAtomic), C.int(a.MinRNRTimer),
		C.int(a.Timeout), C.int(a.RetryCnt), C.int(a.RNRRetry), (*C.uint8_t)(unsafe.Pointer(&a.AH.DGID[0])),
		C.int(a.AH.SGIDIndex), C.int(a.AH.TrafficClass), C.int(hop), C.uint32_t(a.AH.FlowLabel))
	if rc != 0 {
		return fmt.Errorf("verbs: ibv_modify_qp to %v (mask %#x): %v", a.State, uint32(mask), syscall.Errno(rc))
	}
	return nil
}

// setSGEs copies sges into the C scratch list.
func (q *QueuePair) setSGEs(sges []transport.SGE) error {
	if len(sges) > q.nsge {
		return fmt.Errorf("verbs: %d SGEs, the QP takes %d", len(sges), q.nsge)
	}
	for i, s := range sges {
		e := (*C.struct_ibv_sge)(unsafe.Add(unsafe.Pointer(q.sge), uintptr(i)*unsafe.Sizeof(C.struct_ibv_sge{})))
		e.addr, e.length, e.lkey = C.uint64_t(s.Addr), C.uint32_t(s.Length), C.uint32_t(s.LKey)
	}
	return nil
}

// PostSend posts send work requests one by one (ibv_post_send) and returns how many
// were posted; the error is the first refused one's errno (ENOMEM: the send queue
// is full; EINVAL: a bad request).
func (q *QueuePair) PostSend(wrs ...transport.SendWR) (int, error) {
	for i, w := range wrs {
		if err := q.setSGEs(w.SGList); err != nil {
			return i, err
		}
		rc := C.xr_post_send(q.qp, C.uint64_t(w.WRID), C.int(w.Opcode), C.int(w.Flags), q.sge, C.int(len(w.SGList)),
			C.uint64_t(w.RemoteAddr), C.uint32_t(w.RKey), C.uint64_t(w.CompareAdd), C.uint64_t(w.Swap), C.uint32_t(w.ImmData))
		if rc != 0 {
			return i, fmt.Errorf("verbs: ibv_post_send %v: %v", w.Opcode, syscall.Errno(rc))
		}
	}
	return len(wrs), nil
}

// PostRecv posts receive work requests one by one (ibv_post_recv) and returns how
// many were posted; the error is the first refused one's errno.
func (q *QueuePair) PostRecv(wrs ...transport.RecvWR) (int, error) {
	for i, w := range wrs {
		if err := q.setSGEs(w.SGList); err != nil {
			return i, err
		}
		if rc := C.xr_post_recv(q.qp, C.uint64_t(w.WRID), q.sge, C.int(len(w.SGList))); rc != 0 {
			return i, fmt.Errorf("verbs: ibv_post_recv: %v", syscall.Errno(rc))
		}
	}
	return len(wrs), nil
}

// Destroy destroys the QP (ibv_destroy_qp).
func (q *QueuePair) Destroy() error {
	if rc := C.ibv_destroy_qp(q.qp); rc != 0 {
		return fmt.Errorf("verbs: ibv_destroy_qp: %v", syscall.Errno(rc))
	}
	C.free(unsafe.Pointer(q.sge))
	return nil
}
