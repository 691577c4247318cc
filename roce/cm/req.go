package cm

import "github.com/xroce/xroce/roce"

// REQPrivateDataLen is the size of a REQ's private data (Table 106).
const REQPrivateDataLen = 92

// TransportServiceType is a REQ's Transport Service Type (Table 106): the QP type
// the connection is for.
type TransportServiceType uint8

// Transport service types; 3 is reserved.
const (
	TransportRC TransportServiceType = 0
	TransportUC TransportServiceType = 1
	TransportRD TransportServiceType = 2
)

func (t TransportServiceType) String() string {
	switch t {
	case TransportRC:
		return "RC"
	case TransportUC:
		return "UC"
	case TransportRD:
		return "RD"
	}
	return "reserved"
}

// REQ is the Request for Communication (IBTA Vol 1 §12.6, Table 106 "REQ Message
// Contents"), Attribute ID 0x0010: the active side's QP, its starting PSN, the
// transport parameters and the path. rdma_cm puts an IP CM header (IPCMHeader) at
// the start of PrivateData.
//
// Starting PSN, in a REQ as in a REP, is what the sender's QP expects to receive
// first: the other side transmits from it. Linux's ib_cm sets its receive PSN from
// its own REQ or REP and its send PSN from the peer's, and rdma_rxe's capture shows
// the passive side's first request carrying the REQ's Starting PSN.
type REQ struct {
	LocalCommID             uint32                  // 0[0], 32 bits: Local Communication ID
	VendorID                uint32                  // 5[0], 24 bits: ECE vendor ID (IBA comment 9434; reserved in Release 1.4)
	ServiceID               uint64                  // 8[0], 64 bits (IPServiceID for rdma_cm)
	LocalCAGUID             uint64                  // 16[0], 64 bits: Local CA GUID
	LocalQKey               uint32                  // 28[0], 32 bits: Local Q_Key
	LocalQPN                uint32                  // 32[0], 24 bits
	ResponderResources      uint8                   // 35[0], 8 bits
	LocalEECN               uint32                  // 36[0], 24 bits
	InitiatorDepth          uint8                   // 39[0], 8 bits
	RemoteEECN              uint32                  // 40[0], 24 bits
	RemoteCMResponseTimeout uint8                   // 43[0], 5 bits: 4.096 µs × 2^value
	TransportServiceType    TransportServiceType    // 43[5], 2 bits
	EndToEndFlowControl     bool                    // 43[7], 1 bit: End-to-End Flow Control
	StartingPSN             uint32                  // 44[0], 24 bits
	LocalCMResponseTimeout  uint8                   // 47[0], 5 bits
	RetryCount              uint8                   // 47[5], 3 bits
	PKey                    uint16                  // 48[0], 16 bits: Partition Key
	PathMTU                 roce.MTU                // 50[0], 4 bits: Path Packet Payload MTU
	RDCExists               bool                    // 50[4], 1 bit: RDC Exists
	RNRRetryCount           uint8                   // 50[5], 3 bits
	MaxCMRetries            uint8                   // 51[0], 4 bits
	SRQ                     bool                    // 51[4], 1 bit
	ExtendedTransportType   uint8                   // 51[5], 3 bits (0; XRC uses 1 in Linux's ib_cm)
	Primary                 Path                    // 52-95: Primary Local Port LID … Primary Local ACK Timeout
	Alternate               Path                    // 96-139: Alternate Local Port LID … Alternate Local ACK Timeout
	SAPSupported            bool                    // 139[5], 1 bit (Linux CM_REQ_SAP_SUPPORTED)
	PrivateData             [REQPrivateDataLen]byte // 140[0], 736 bits
}

// AttributeID returns AttrREQ.
func (*REQ) AttributeID() AttributeID { return AttrREQ }

// Decode reads the REQ from b[0:DataLen].
func (m *REQ) Decode(b []byte) error {
	b, err := data("REQ", b)
	if err != nil {
		return err
	}
	m.LocalCommID = be.Uint32(b[0:])
	m.VendorID = get24(b[5:])
	m.ServiceID = be.Uint64(b[8:])
	m.LocalCAGUID = be.Uint64(b[16:])
	m.LocalQKey = be.Uint32(b[28:])
	m.LocalQPN = get24(b[32:])
	m.ResponderResources = b[35]
	m.LocalEECN = get24(b[36:])
	m.InitiatorDepth = b[39]
	m.RemoteEECN = get24(b[40:])
	m.RemoteCMResponseTimeout = b[43] >> 3
	m.TransportServiceType = TransportServiceType(b[43] >> 1 & 3)
	m.EndToEndFlowControl = b[43]&0x01 != 0
	m.StartingPSN = get24(b[44:])
	m.LocalCMResponseTimeout = b[47] >> 3
	m.RetryCount = b[47] & 7
	m.PKey = be.Uint16(b[48:])
	m.PathMTU = roce.MTU(b[50] >> 4)
	m.RDCExists = b[50]&0x08 != 0
	m.RNRRetryCount = b[50] & 7
	m.MaxCMRetries = b[51] >> 4
	m.SRQ = b[51]&0x08 != 0
	m.ExtendedTransportType = b[51] & 7
	m.Primary.decodeREQ(b[52:96])
	m.Alternate.decodeREQ(b[96:140])
	m.SAPSupported = b[139]&0x04 != 0
	copy(m.PrivateData[:], b[140:])
	return nil
}

// Put writes the REQ into b[0:DataLen].
func (m *REQ) Put(b []byte) {
	b = out(b)
	be.PutUint32(b[0:], m.LocalCommID)
	put24(b[5:], m.VendorID)
	be.PutUint64(b[8:], m.ServiceID)
	be.PutUint64(b[16:], m.LocalCAGUID)
	be.PutUint32(b[28:], m.LocalQKey)
	put24(b[32:], m.LocalQPN)
	b[35] = m.ResponderResources
	put24(b[36:], m.LocalEECN)
	b[39] = m.InitiatorDepth
	put24(b[40:], m.RemoteEECN)
	b[43] = m.RemoteCMResponseTimeout<<3 | byte(m.TransportServiceType&3)<<1 | flag(m.EndToEndFlowControl, 0x01)
	put24(b[44:], m.StartingPSN)
	b[47] = m.LocalCMResponseTimeout<<3 | m.RetryCount&7
	be.PutUint16(b[48:], m.PKey)
	b[50] = byte(m.PathMTU)<<4 | flag(m.RDCExists, 0x08) | m.RNRRetryCount&7
	b[51] = m.MaxCMRetries<<4 | flag(m.SRQ, 0x08) | m.ExtendedTransportType&7
	m.Primary.putREQ(b[52:96])
	m.Alternate.putREQ(b[96:140])
	b[139] |= flag(m.SAPSupported, 0x04)
	copy(b[140:], m.PrivateData[:])
}
