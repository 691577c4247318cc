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
	ProtoVersion = 1
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

// ClientEntry is one connected client, as SO_PEERCRED saw it.
type ClientEntry struct {
	PID   uint32
	UID   uint32
	Since int64 // Unix seconds
}

// Structs lists every fixed-size message body, by the name the C header gives its
// struct, for the header cross-check.
var Structs = map[string]any{
	"xroce_hdr":           Header{},
	"xroce_hello_req":     HelloReq{},
	"xroce_hello_reply":   HelloReply{},
	"xroce_device_attr":   DeviceAttr{},
	"xroce_port_req":      PortReq{},
	"xroce_port_attr":     PortAttr{},
	"xroce_gid_req":       GIDReq{},
	"xroce_gid_reply":     GIDReply{},
	"xroce_counter_entry": CounterEntry{},
	"xroce_client_entry":  ClientEntry{},
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
