package daemon

// The shared receive queue ops (protocol version 4), mirrored in
// cmd/libxroce/xroce_proto.h. A receive posted to an SRQ names its WR by a slot
// the library chose (RecvWRMsg.WRID); its completion, on the CQ of the QP that
// took it, carries CQERecv|CQESRQ and the slot as Seq.
const (
	OpCreateSRQ   uint16 = 34 // CreateSRQReq → CreateSRQReply
	OpModifySRQ   uint16 = 35 // SRQAttrMsg → no body
	OpQuerySRQ    uint16 = 36 // Handle → SRQAttrMsg
	OpDestroySRQ  uint16 = 37 // Handle → no body (EBUSY while a QP uses it)
	OpPostSRQRecv uint16 = 38 // PostSRQRecvReq, then Count × (RecvWRMsg, its SGEs) → PostSRQRecvReply
	opLastSRQ            = OpPostSRQRecv
)

// CreateSRQReq creates a shared receive queue in PD (struct ibv_srq_init_attr).
type CreateSRQReq struct {
	PD, MaxWR, MaxSGE, Limit uint32
	Cookie                   uint64 // echoed in the SRQ's asynchronous events
}

// CreateSRQReply is the SRQ and its actual sizes.
type CreateSRQReply struct {
	Handle, MaxWR, MaxSGE, Reserved uint32
}

// SRQAttrMsg is struct ibv_srq_attr for OpModifySRQ (Mask is enum
// ibv_srq_attr_mask) and OpQuerySRQ's reply.
type SRQAttrMsg struct {
	SRQ, Mask, MaxWR, MaxSGE, Limit, Reserved uint32
}

// PostSRQRecvReq posts Count receive WRs to an SRQ.
type PostSRQRecvReq struct {
	SRQ, Count uint32
}

// PostSRQRecvReply says how many WRs were posted, in order, and why the next was
// not (a Linux errno, 0 when all were).
type PostSRQRecvReply struct {
	Posted uint32
	Errno  int32
}
