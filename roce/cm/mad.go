package cm

import "fmt"

// Sizes of a MAD (IBTA Vol 1 §13.4.2): 256 bytes, the 24-byte common header, then
// the data that holds a CM message.
const (
	MADLen    = 256
	HeaderLen = 24
	DataLen   = MADLen - HeaderLen
)

// Values of the common header for the CM (§13.4.2; §12.6, CM class version 2, as
// Linux's ib_cm sends it: IB_CM_CLASS_VERSION).
const (
	BaseVersion       = 1    // the MAD base version
	ClassCM           = 0x07 // Management Class of the Communication Manager
	CMClassVersion    = 2    // Class Version of the CM
	MethodResponseBit = 0x80 // R, the Method's most significant bit: a response
)

// Method is the common header's Method byte: bit 7 is R (response), bits 6-0 the
// method (§13.4, the common methods). CM messages travel as Send; ClassPortInfo as Get/GetResp.
type Method uint8

// Methods of the CM class (§12.6, §13.4).
const (
	MethodGet     Method = 0x01
	MethodSet     Method = 0x02
	MethodSend    Method = 0x03
	MethodGetResp Method = 0x81
)

func (m Method) String() string {
	switch m {
	case MethodGet:
		return "Get"
	case MethodSet:
		return "Set"
	case MethodSend:
		return "Send"
	case MethodGetResp:
		return "GetResp"
	}
	return fmt.Sprintf("Method(0x%02x)", uint8(m))
}

// AttributeID names the CM message a MAD carries (§12.6, CM attributes).
type AttributeID uint16

// The CM attributes.
const (
	AttrClassPortInfo AttributeID = 0x0001
	AttrREQ           AttributeID = 0x0010
	AttrMRA           AttributeID = 0x0011
	AttrREJ           AttributeID = 0x0012
	AttrREP           AttributeID = 0x0013
	AttrRTU           AttributeID = 0x0014
	AttrDREQ          AttributeID = 0x0015
	AttrDREP          AttributeID = 0x0016
	AttrSIDRREQ       AttributeID = 0x0017
	AttrSIDRREP       AttributeID = 0x0018
	AttrLAP           AttributeID = 0x0019
	AttrAPR           AttributeID = 0x001A
)

var attrNames = map[AttributeID]string{
	AttrClassPortInfo: "ClassPortInfo", AttrREQ: "REQ", AttrMRA: "MRA", AttrREJ: "REJ", AttrREP: "REP",
	AttrRTU: "RTU", AttrDREQ: "DREQ", AttrDREP: "DREP", AttrSIDRREQ: "SIDR_REQ", AttrSIDRREP: "SIDR_REP",
	AttrLAP: "LAP", AttrAPR: "APR",
}

func (a AttributeID) String() string {
	if s, ok := attrNames[a]; ok {
		return s
	}
	return fmt.Sprintf("AttributeID(0x%04x)", uint16(a))
}

// Header is the MAD common header, 24 bytes (IBTA Vol 1 §13.4.2). Bytes 18-19 are
// reserved: Put writes zeros there and DecodeHeader ignores them.
type Header struct {
	BaseVersion       uint8       // 0[0], 8 bits: 1
	MgmtClass         uint8       // 1[0], 8 bits: Management Class, ClassCM
	ClassVersion      uint8       // 2[0], 8 bits: CMClassVersion
	Method            Method      // 3[0], 8 bits: R and Method
	Status            uint16      // 4[0], 16 bits
	ClassSpecific     uint16      // 6[0], 16 bits
	TransactionID     uint64      // 8[0], 64 bits
	AttributeID       AttributeID // 16[0], 16 bits
	AttributeModifier uint32      // 20[0], 32 bits
}

// CMHeader returns the header of a CM message sent as Send (what ib_cm sends:
// cm_format_mad_hdr), with the given transaction ID and attribute.
func CMHeader(tid uint64, attr AttributeID) Header {
	return Header{BaseVersion: BaseVersion, MgmtClass: ClassCM, ClassVersion: CMClassVersion,
		Method: MethodSend, TransactionID: tid, AttributeID: attr}
}

// DecodeHeader reads a common header from b[0:HeaderLen], whatever its class.
func DecodeHeader(b []byte) (Header, error) {
	if len(b) < HeaderLen {
		return Header{}, shortError("MAD header", len(b), HeaderLen)
	}
	return Header{
		BaseVersion:       b[0],
		MgmtClass:         b[1],
		ClassVersion:      b[2],
		Method:            Method(b[3]),
		Status:            be.Uint16(b[4:]),
		ClassSpecific:     be.Uint16(b[6:]),
		TransactionID:     be.Uint64(b[8:]),
		AttributeID:       AttributeID(be.Uint16(b[16:])),
		AttributeModifier: be.Uint32(b[20:]),
	}, nil
}

// Put writes h into b[0:HeaderLen]; it panics if b is shorter.
func (h *Header) Put(b []byte) {
	_ = b[HeaderLen-1]
	b[0], b[1], b[2], b[3] = h.BaseVersion, h.MgmtClass, h.ClassVersion, byte(h.Method)
	be.PutUint16(b[4:], h.Status)
	be.PutUint16(b[6:], h.ClassSpecific)
	be.PutUint64(b[8:], h.TransactionID)
	be.PutUint16(b[16:], uint16(h.AttributeID))
	b[18], b[19] = 0, 0
	be.PutUint32(b[20:], h.AttributeModifier)
}

// checkCM reports why h is not the header of a CM MAD this package reads.
func (h *Header) checkCM() error {
	const m = "MAD header"
	switch {
	case h.BaseVersion != BaseVersion:
		return fieldError(m, "Base Version", "%d, want %d", h.BaseVersion, BaseVersion)
	case h.MgmtClass != ClassCM:
		return fieldError(m, "Management Class", "0x%02x, want 0x%02x (CM)", h.MgmtClass, ClassCM)
	case h.ClassVersion != CMClassVersion:
		return fieldError(m, "Class Version", "%d, want %d", h.ClassVersion, CMClassVersion)
	}
	return nil
}
