package daemon

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// The control protocol between the verbs library (cmd/libxroce) and the daemon,
// defined here and mirrored in cmd/libxroce/xroce_proto.h (TestProtoHeaderMatches
// compiles that header and compares every size and constant with these).
//
// One message is one SOCK_SEQPACKET datagram: an 8-byte Header, then Len bytes of
// payload, all little-endian, no padding. A request's Op is one of the Op
// constants; its reply carries Op|ReplyBit and the same Seq. Every reply payload
// starts with an int32 status: 0, or a Linux errno value (EBADMSG for a malformed
// request, EOPNOTSUPP for an unknown op, EINVAL for a bad argument); after a
// non-zero status comes a UTF-8 message for people, after 0 the op's reply body.
// docs/verbs-library.md describes the messages.
const (
	ProtoVersion = 6 // 2: work requests and completions on shared-memory rings; 3: UD and UC QPs (address handles, UD addresses in send slots, src_qp and GRH in CQEs, qkey); 4: shared receive queues; 5: OpCMMigrateID; 6: application-managed QPs (OpCMInitQPAttr, OpCMEstablish)
	HeaderSize   = 8
	MaxMessage   = 4096 // header included
	ReplyBit     = 0x8000
)

// Ops.
const (
	OpHello       uint16 = 1 // HelloReq → HelloReply
	OpQueryDevice uint16 = 2 // no body → DeviceAttr
	OpQueryPort   uint16 = 3 // PortReq → PortAttr
	OpQueryGID    uint16 = 4 // GIDReq → GIDReply
	OpCounters    uint16 = 5 // no body → uint32 n, then n × CounterEntry
	OpClients     uint16 = 6 // no body → uint32 n, then n × ClientEntry

	// The data path (objects owned by the session; handles are per session).
	OpAllocPD        uint16 = 7  // no body → Handle
	OpDeallocPD      uint16 = 8  // Handle → no body
	OpRegMR          uint16 = 9  // RegMRReq + one fd (SCM_RIGHTS) → RegMRReply
	OpDeregMR        uint16 = 10 // Handle → no body
	OpCreateChannel  uint16 = 11 // no body + one fd (the daemon's end of a socketpair) → Handle
	OpDestroyChannel uint16 = 12 // Handle → no body
	OpCreateCQ       uint16 = 13 // CreateCQReq → CreateCQReply + the CQ ring's memfd
	OpDestroyCQ      uint16 = 14 // Handle → no body
	OpReqNotifyCQ    uint16 = 15 // NotifyReq → no body
	OpCreateQP       uint16 = 17 // CreateQPReq → CreateQPReply + the QP rings' memfd and doorbell eventfd
	OpModifyQP       uint16 = 18 // QPAttrMsg → no body
	OpQueryQP        uint16 = 19 // Handle → QPAttrMsg
	OpDestroyQP      uint16 = 20 // Handle → no body
	// 16 was version 1's poll request, 21 and 22 its post send and post recv: the
	// rings carry work requests and completions now.
	OpCreateAH     uint16 = 21 // CreateAHReq → Handle (version 3)
	OpDestroyAH    uint16 = 22 // Handle → no body (version 3)
	OpAsyncChannel uint16 = 23 // no body + one fd (the daemon's end of a socketpair for AsyncEventMsg) → no body
	opLastData            = OpAsyncChannel
)

// GID types in GIDReply, the values of rdma-core's enum ibv_gid_type
// (libibverbs/verbs.h: IBV_GID_TYPE_IB, IBV_GID_TYPE_ROCE_V1, IBV_GID_TYPE_ROCE_V2).
const (
	GIDTypeIB     = 0
	GIDTypeRoCEv1 = 1
	GIDTypeRoCEv2 = 2
)

// Header starts every message.
type Header struct {
	Op  uint16
	Len uint16 // payload bytes after the header
	Seq uint32 // chosen by the client, echoed in the reply
}

// HelloReq opens a session: the client's protocol version.
type HelloReq struct {
	Version uint32
	Flags   uint32 // 0
}

// HelloReply names the device. NodeGUID is the 64-bit value as a number (the
// library stores it big-endian, as struct ibv_device_attr's __be64 node_guid).
type HelloReply struct {
	Version  uint32
	Ports    uint32
	NodeGUID uint64
	Name     [64]byte // the RDMA device name, NUL-padded (IBV_SYSFS_NAME_MAX)
	Ifname   [16]byte // the network interface, NUL-padded (IFNAMSIZ)
	Ifindex  uint32
	Flags    uint32 // 0
}

// DeviceAttr is struct ibv_device_attr (rdma-core libibverbs/verbs.h), field for
// field with fixed-width types, then the ibv_device_attr_ex fields the device sets.
type DeviceAttr struct {
	FwVer                  [64]byte
	NodeGUID               uint64 // as a number
	SysImageGUID           uint64 // as a number
	MaxMRSize              uint64
	PageSizeCap            uint64
	VendorID               uint32
	VendorPartID           uint32
	HwVer                  uint32
	MaxQP                  int32
	MaxQPWR                int32
	DeviceCapFlags         uint32
	MaxSGE                 int32
	MaxSGERd               int32
	MaxCQ                  int32
	MaxCQE                 int32
	MaxMR                  int32
	MaxPD                  int32
	MaxQPRdAtom            int32
	MaxEERdAtom            int32
	MaxResRdAtom           int32
	MaxQPInitRdAtom        int32
	MaxEEInitRdAtom        int32
	AtomicCap              uint32
	MaxEE                  int32
	MaxRDD                 int32
	MaxMW                  int32
	MaxRawIPv6QP           int32
	MaxRawEthyQP           int32
	MaxMcastGrp            int32
	MaxMcastQPAttach       int32
	MaxTotalMcastQPAttach  int32
	MaxAH                  int32
	MaxFMR                 int32
	MaxMapPerFMR           int32
	MaxSRQ                 int32
	MaxSRQWR               int32
	MaxSRQSGE              int32
	MaxPkeys               uint16
	LocalCAAckDelay        uint8
	PhysPortCnt            uint8
	DeviceCapFlagsEx       uint64
	CompletionTimestampMsk uint64
	HCACoreClock           uint64
	NumCompVectors         uint32
	Reserved               uint32
}

// PortReq asks for one port (1-based).
type PortReq struct {
	Port uint32
}

// PortAttr is struct ibv_port_attr (rdma-core libibverbs/verbs.h) with
// fixed-width types; the enums are their verbs values.
type PortAttr struct {
	State         uint32 // enum ibv_port_state: 1 DOWN … 4 ACTIVE
	MaxMTU        uint32 // enum ibv_mtu: 1 = 256 … 5 = 4096
	ActiveMTU     uint32
	GIDTblLen     int32
	PortCapFlags  uint32
	MaxMsgSz      uint32
	BadPkeyCntr   uint32
	QkeyViolCntr  uint32
	PkeyTblLen    uint16
	LID           uint16
	SMLID         uint16
	LMC           uint8
	MaxVLNum      uint8
	SMSL          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	ActiveWidth   uint8
	ActiveSpeed   uint8
	PhysState     uint8
	LinkLayer     uint8 // IBV_LINK_LAYER_ETHERNET = 2
	Flags         uint8
	PortCapFlags2 uint16
	Reserved      uint16
	ActiveSpeedEx uint32
}

// GIDReq asks for one GID table slot.
type GIDReq struct {
	Port  uint32
	Index uint32
}

// GIDReply is one slot. An empty slot (Index beyond the addresses, below
// GIDTblLen) has Valid 0 and a zero GID, as ibv_query_gid reads one on rdma_rxe.
type GIDReply struct {
	Raw     [16]byte
	Type    uint32 // GIDTypeRoCEv2, …
	Ifindex uint32
	Valid   uint32
	Index   uint32
}

// CounterEntry is one counter: rdma_rxe's hw_counters name, NUL-padded.
type CounterEntry struct {
	Name  [32]byte
	Value uint64
}

// ClientEntry is one connected client, as SO_PEERCRED saw it, with the verbs
// objects its session owns.
type ClientEntry struct {
	PID   uint32
	UID   uint32
	Since int64 // Unix seconds
	PDs   uint32
	MRs   uint32
	CQs   uint32
	QPs   uint32
	SRQs  uint32 // version 4
	Resv  uint32
}

// Handle names one object of the session (PD, MR, CQ, QP or completion channel).
type Handle struct {
	Handle uint32
}

// RegMRReq registers [Addr, Addr+Length) of the client's memory. The client has
// moved those pages onto sealed memfds (F_SEAL_SHRINK), NPieces of them, sent with
// the request in order: the pages [MapAddr, MapAddr+MapLen) of its address space are,
// one after the other, piece i's Len bytes of descriptor i from its FdOff (several
// pieces when the region's pages lie partly on earlier regions' memfds). MapAddr,
// MapLen, each Len and FdOff are page-aligned, the lengths add up to MapLen, and
// the mapping covers the region. Access is enum ibv_access_flags; IOVA is the
// address peers use for the region's first byte (Addr for ibv_reg_mr).
type RegMRReq struct {
	PD       uint32
	Access   uint32
	Addr     uint64
	Length   uint64
	IOVA     uint64
	MapAddr  uint64
	MapLen   uint64
	NPieces  uint32
	Reserved uint32
	Pieces   [MRPieces]MRPiece
}

// MRPieces is the most memfd pieces one registration maps.
const MRPieces = 8

// MRPiece is one memfd's part of a registration's mapping.
type MRPiece struct {
	Len   uint64
	FdOff uint64
}

// RegMRReply is the registered region.
type RegMRReply struct {
	Handle   uint32
	LKey     uint32
	RKey     uint32
	Reserved uint32
}

// CreateCQReq creates a CQ of at least CQE entries; Channel is a completion
// channel's handle or 0; Cookie is echoed in the channel's events.
type CreateCQReq struct {
	CQE     uint32
	Channel uint32
	Cookie  uint64
}

// CreateCQReply is the CQ, its actual size and its ring: the reply carries the
// ring's memfd (SCM_RIGHTS), RingSize bytes, CQRingHeader bytes of header then
// Entries (a power of two ≥ CQE) CQE slots. The daemon produces, the library
// consumes (ring.go).
type CreateCQReply struct {
	Handle   uint32
	CQE      uint32
	Entries  uint32
	Reserved uint32
	RingSize uint64
}

// NotifyReq arms a CQ (ibv_req_notify_cq): its channel gets an event at the next
// completion, or with SolicitedOnly at the next solicited one
// (transport.CompletionQueue.Arm); completions already in the CQ raise none.
type NotifyReq struct {
	CQ            uint32
	SolicitedOnly uint32
}

// CQE is one completion in a CQ ring (struct ibv_wc's fields that the engine
// sets). Seq is the ring sequence number of the work request it completes, in
// the send ring or, with CQERecv in Flags, the receive ring of QP QPNum: the
// library keeps the wr_id of each slot and frees the slots up to Seq. ImmData is
// in host order, as transport.WorkCompletion has it. SrcQP is the sender's QPN
// of a UD receive completion (which also has CQEGRH: the receive buffer starts
// with the 40-byte GRH area).
type CQE struct {
	Seq     uint32
	Flags   uint32 // CQERecv, CQEWithImm, CQEGRH
	Status  uint32
	Opcode  uint32
	ByteLen uint32
	ImmData uint32
	QPNum   uint32
	SrcQP   uint32
}

// CQE flags.
const (
	CQERecv    = 1 << 0 // completes a receive WR
	CQEWithImm = 1 << 1 // IBV_WC_WITH_IMM
	CQEGRH     = 1 << 2 // IBV_WC_GRH (UD receives)
	CQESRQ     = 1 << 3 // a receive WR of the QP's SRQ: Seq is the SRQ's slot (OpPostSRQRecv)
)

// EventMsg is what the daemon writes on a completion channel: the CQ's cookie.
type EventMsg struct {
	Cookie uint64
}

// AsyncEventMsg is what the daemon writes on a session's asynchronous event
// channel (OpAsyncChannel): Type is enum ibv_event_type (IBV_EVENT_CQ_ERR,
// IBV_EVENT_QP_FATAL, ...), Cookie the CQ's, QP's or SRQ's cookie from its create
// request, or the port number (1) for a port event (Server.PortEvent).
type AsyncEventMsg struct {
	Type     uint32
	Reserved uint32
	Cookie   uint64
}

// CreateQPReq creates a QP (struct ibv_qp_init_attr): QPType is IBV_QPT_RC, _UC
// or _UD.
type CreateQPReq struct {
	PD, SendCQ, RecvCQ     uint32
	QPType, SQSigAll       uint32
	MaxSendWR, MaxRecvWR   uint32
	MaxSendSGE, MaxRecvSGE uint32
	MaxInline              uint32
	Cookie                 uint64 // echoed in the QP's asynchronous events
	SRQ                    uint32 // the SRQ the QP receives from (version 4; 0: none)
	Reserved               uint32
}

// CreateQPReply is the QP, its number, its actual capabilities and the layout
// of its rings. The reply carries two descriptors: the rings' memfd (RingSize
// bytes: the QPRingHeader page, then the send ring at SQOffset, SQEntries slots
// of SQStride bytes, and the receive ring at RQOffset, RQEntries slots of
// RQStride bytes; entries are powers of two ≥ the WR counts) and the doorbell, an
// eventfd the library writes when it finds the daemon's sleeping flag up.
type CreateQPReply struct {
	Handle, QPN            uint32
	MaxSendWR, MaxRecvWR   uint32
	MaxSendSGE, MaxRecvSGE uint32
	MaxInline              uint32
	MaxUDMsg               uint32 // UD: the largest message (the port's MTU in bytes), 0 otherwise
	SQEntries, SQStride    uint32
	RQEntries, RQStride    uint32
	SQOffset, RQOffset     uint64
	RingSize               uint64
}

// QPAttrMsg carries struct ibv_qp_attr's fields that RC, UC and UD QPs on RoCE
// use, for OpModifyQP (Mask is enum ibv_qp_attr_mask) and OpQueryQP's reply.
type QPAttrMsg struct {
	QP, Mask                  uint32
	State, PathMTU            uint32
	DestQPN, RQPSN, SQPSN     uint32
	AccessFlags               uint32
	DGID                      [16]byte
	FlowLabel                 uint32
	SGIDIndex, HopLimit       uint8
	TrafficClass, MaxRdAtomic uint8
	MaxDestRdAtomic           uint8
	MinRNRTimer, Timeout      uint8
	RetryCnt, RNRRetry        uint8
	PortNum, IsGlobal         uint8
	CurState                  uint8 // attr->cur_qp_state, under IBV_QP_CUR_STATE
	PKeyIndex                 uint16
	Reserved2                 uint16
	QKey                      uint32 // UD
}

// CreateAHReq creates an address handle (struct ibv_ah_attr) in PD for UD sends.
// RoCE needs the GRH: IsGlobal must be 1.
type CreateAHReq struct {
	PD                     uint32
	FlowLabel              uint32
	DGID                   [16]byte
	SGIDIndex, HopLimit    uint8
	TrafficClass, IsGlobal uint8
	PortNum, SL            uint8
	Reserved               uint16
}

// SendWRMsg starts a send ring slot: one send WR (struct ibv_send_wr); NumSGE
// SGEMsg follow it, or InlineLen bytes of inline data (IBV_SEND_INLINE: the
// library copies the data, NumSGE is 0). ImmData is in host order. The library
// keeps WRID; the daemon ignores it. AH (an address handle of the session),
// RemoteQPN and RemoteQKey are wr.ud's, for UD QPs.
type SendWRMsg struct {
	WRID       uint64
	RemoteAddr uint64
	CompareAdd uint64
	Swap       uint64
	RKey       uint32
	ImmData    uint32
	Opcode     uint32
	Flags      uint32
	NumSGE     uint32
	InlineLen  uint32
	AH         uint32
	RemoteQPN  uint32
	RemoteQKey uint32
	Reserved   uint32
}

// RecvWRMsg starts a receive ring slot: one receive WR; NumSGE SGEMsg follow it.
type RecvWRMsg struct {
	WRID     uint64
	NumSGE   uint32
	Reserved uint32
}

// SGEMsg is struct ibv_sge.
type SGEMsg struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// Structs lists every fixed-size message body, by the name the C header gives its
// struct, for the header cross-check.
var Structs = map[string]any{
	"xroce_create_srq_req":      CreateSRQReq{},
	"xroce_create_srq_reply":    CreateSRQReply{},
	"xroce_srq_attr":            SRQAttrMsg{},
	"xroce_post_srq_recv_req":   PostSRQRecvReq{},
	"xroce_post_srq_recv_reply": PostSRQRecvReply{},
	"xroce_cm_addr":             CMAddr{},
	"xroce_cm_create_id":        CMCreateIDReq{},
	"xroce_cm_bind":             CMBindReq{},
	"xroce_cm_resolve":          CMResolveReq{},
	"xroce_cm_listen":           CMListenReq{},
	"xroce_cm_migrate":          CMMigrateReq{},
	"xroce_cm_init_qp_attr":     CMInitQPAttrReq{},
	"xroce_cm_param":            CMParam{},
	"xroce_cm_conn":             CMConnReq{},
	"xroce_cm_reject":           CMRejectReq{},
	"xroce_cm_event":            CMEventMsg{},
	"xroce_hdr":                 Header{},
	"xroce_hello_req":           HelloReq{},
	"xroce_hello_reply":         HelloReply{},
	"xroce_device_attr":         DeviceAttr{},
	"xroce_port_req":            PortReq{},
	"xroce_port_attr":           PortAttr{},
	"xroce_gid_req":             GIDReq{},
	"xroce_gid_reply":           GIDReply{},
	"xroce_counter_entry":       CounterEntry{},
	"xroce_client_entry":        ClientEntry{},
	"xroce_handle":              Handle{},
	"xroce_reg_mr_req":          RegMRReq{},
	"xroce_mr_piece":            MRPiece{},
	"xroce_reg_mr_reply":        RegMRReply{},
	"xroce_create_cq_req":       CreateCQReq{},
	"xroce_create_cq_reply":     CreateCQReply{},
	"xroce_notify_req":          NotifyReq{},
	"xroce_cqe":                 CQE{},
	"xroce_event":               EventMsg{},
	"xroce_async_event":         AsyncEventMsg{},
	"xroce_create_qp_req":       CreateQPReq{},
	"xroce_create_qp_reply":     CreateQPReply{},
	"xroce_qp_attr":             QPAttrMsg{},
	"xroce_create_ah_req":       CreateAHReq{},
	"xroce_send_wr":             SendWRMsg{},
	"xroce_recv_wr":             RecvWRMsg{},
	"xroce_sge":                 SGEMsg{},
}

// Encode returns a message: the header and body (a fixed-size struct, []byte, or
// nil) encoded little-endian.
func Encode(op uint16, seq uint32, body any) ([]byte, error) {
	var b bytes.Buffer
	b.Write(make([]byte, HeaderSize))
	switch v := body.(type) {
	case nil:
	case []byte:
		b.Write(v)
	default:
		if err := binary.Write(&b, binary.LittleEndian, v); err != nil {
			return nil, err
		}
	}
	if b.Len() > MaxMessage {
		return nil, fmt.Errorf("message of %d bytes exceeds %d", b.Len(), MaxMessage)
	}
	m := b.Bytes()
	binary.LittleEndian.PutUint16(m[0:], op)
	binary.LittleEndian.PutUint16(m[2:], uint16(len(m)-HeaderSize))
	binary.LittleEndian.PutUint32(m[4:], seq)
	return m, nil
}

// ParseHeader checks a received message's framing and returns its header and
// payload.
func ParseHeader(m []byte) (Header, []byte, error) {
	if len(m) < HeaderSize {
		return Header{}, nil, fmt.Errorf("message of %d bytes is shorter than the %d-byte header", len(m), HeaderSize)
	}
	h := Header{Op: binary.LittleEndian.Uint16(m[0:]), Len: binary.LittleEndian.Uint16(m[2:]), Seq: binary.LittleEndian.Uint32(m[4:])}
	if int(h.Len) != len(m)-HeaderSize {
		return h, nil, fmt.Errorf("header says %d payload bytes, the message has %d", h.Len, len(m)-HeaderSize)
	}
	return h, m[HeaderSize:], nil
}

// decodeBody decodes a fixed-size body, which must be exactly its size.
func decodeBody(p []byte, v any) error {
	if n := binary.Size(v); n != len(p) {
		return fmt.Errorf("body of %d bytes, want %d", len(p), n)
	}
	return binary.Read(bytes.NewReader(p), binary.LittleEndian, v)
}

// cstr returns a NUL-padded field as a string.
func cstr(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}
