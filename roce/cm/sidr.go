package cm

import "fmt"

// Sizes of the SIDR messages' variable parts (Tables 119 and 120).
const (
	SIDRREQPrivateDataLen = 216
	SIDRREPInfoLen        = 72
	SIDRREPPrivateDataLen = 136
)

// SIDRREQ is the Service ID Resolution Request (IBTA Vol 1 ch. 12, Table 119
// "SIDR_REQ Message Contents"), Attribute ID 0x0017: a UD client asks which QP and
// Q_Key serve a Service ID (rdma_cm's UDP port space, RDMA_PS_UDP).
type SIDRREQ struct {
	RequestID   uint32                      // 0[0], 32 bits
	PKey        uint16                      // 4[0], 16 bits: Partition Key
	ServiceID   uint64                      // 8[0], 64 bits
	PrivateData [SIDRREQPrivateDataLen]byte // 16[0], 1728 bits
}

// AttributeID returns AttrSIDRREQ.
func (*SIDRREQ) AttributeID() AttributeID { return AttrSIDRREQ }

// Decode reads the SIDR_REQ from b[0:DataLen].
func (m *SIDRREQ) Decode(b []byte) error {
	b, err := data("SIDR_REQ", b)
	if err != nil {
		return err
	}
	m.RequestID = be.Uint32(b[0:])
	m.PKey = be.Uint16(b[4:])
	m.ServiceID = be.Uint64(b[8:])
	copy(m.PrivateData[:], b[16:])
	return nil
}

// Put writes the SIDR_REQ into b[0:DataLen].
func (m *SIDRREQ) Put(b []byte) {
	b = out(b)
	be.PutUint32(b[0:], m.RequestID)
	be.PutUint16(b[4:], m.PKey)
	be.PutUint64(b[8:], m.ServiceID)
	copy(b[16:], m.PrivateData[:])
}

// SIDRStatus is a SIDR_REP's Status (Table 120; Linux enum ib_cm_sidr_status).
type SIDRStatus uint8

// SIDR_REP statuses.
const (
	SIDRValid                 SIDRStatus = 0 // valid: QPN and Q_Key are meaningful
	SIDRServiceIDNotSupported SIDRStatus = 1
	SIDRRejected              SIDRStatus = 2 // rejected by the service provider
	SIDRNoQP                  SIDRStatus = 3 // no QP available
	SIDRRedirect              SIDRStatus = 4 // Additional Information: ClassPortInfo
	SIDRUnsupportedVersion    SIDRStatus = 5 // Additional Information: the highest supported class version
)

func (s SIDRStatus) String() string {
	names := [...]string{"valid", "Service ID not supported", "rejected", "no QP available", "redirect",
		"unsupported class version"}
	if int(s) < len(names) {
		return names[s]
	}
	return fmt.Sprintf("SIDRStatus(%d)", uint8(s))
}

// SIDRREP is the Service ID Resolution Response (IBTA Vol 1 ch. 12, Table 120
// "SIDR_REP Message Contents"), Attribute ID 0x0018.
type SIDRREP struct {
	RequestID            uint32                      // 0[0], 32 bits
	Status               SIDRStatus                  // 4[0], 8 bits
	AdditionalInfoLength uint8                       // 5[0], 8 bits: Additional Information Length, ≤ SIDRREPInfoLen
	VendorID             uint32                      // 6[0] 16 bits, 11[0] 8 bits, high to low: ECE vendor ID (IBA comment 9434)
	QPN                  uint32                      // 8[0], 24 bits
	ServiceID            uint64                      // 12[0], 64 bits
	QKey                 uint32                      // 20[0], 32 bits: Q_Key
	AdditionalInfo       [SIDRREPInfoLen]byte        // 24[0], 576 bits: Additional Information
	PrivateData          [SIDRREPPrivateDataLen]byte // 96[0], 1088 bits
}

// AttributeID returns AttrSIDRREP.
func (*SIDRREP) AttributeID() AttributeID { return AttrSIDRREP }

// Decode reads the SIDR_REP from b[0:DataLen]. An Additional Information Length
// beyond its field is an error.
func (m *SIDRREP) Decode(b []byte) error {
	b, err := data("SIDR_REP", b)
	if err != nil {
		return err
	}
	m.RequestID = be.Uint32(b[0:])
	m.Status = SIDRStatus(b[4])
	m.AdditionalInfoLength = b[5]
	m.VendorID = uint32(be.Uint16(b[6:]))<<8 | uint32(b[11])
	m.QPN = get24(b[8:])
	m.ServiceID = be.Uint64(b[12:])
	m.QKey = be.Uint32(b[20:])
	copy(m.AdditionalInfo[:], b[24:96])
	copy(m.PrivateData[:], b[96:])
	if m.AdditionalInfoLength > SIDRREPInfoLen {
		return fieldError("SIDR_REP", "Additional Information Length", "%d, more than the %d bytes of Additional Information", m.AdditionalInfoLength, SIDRREPInfoLen)
	}
	return nil
}

// Put writes the SIDR_REP into b[0:DataLen].
func (m *SIDRREP) Put(b []byte) {
	b = out(b)
	be.PutUint32(b[0:], m.RequestID)
	b[4] = byte(m.Status)
	b[5] = m.AdditionalInfoLength
	be.PutUint16(b[6:], uint16(m.VendorID>>8))
	put24(b[8:], m.QPN)
	b[11] = byte(m.VendorID)
	be.PutUint64(b[12:], m.ServiceID)
	be.PutUint32(b[20:], m.QKey)
	copy(b[24:96], m.AdditionalInfo[:])
	copy(b[96:], m.PrivateData[:])
}
