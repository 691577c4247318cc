package cm

// Message is one CM message: the MAD data (232 bytes) of one CM attribute. The
// concrete types are *REQ, *MRA, *REJ, *REP, *RTU, *DREQ, *DREP, *LAP, *APR,
// *SIDRREQ and *SIDRREP.
type Message interface {
	// AttributeID is the common header's Attribute ID for this message.
	AttributeID() AttributeID
	// Decode reads the message from b[0:DataLen], the MAD data after the header.
	Decode(b []byte) error
	// Put writes the message into b[0:DataLen], reserved bits zero and fields cut
	// to their widths; it panics if b is shorter.
	Put(b []byte)
}

// NewMessage returns a zero message of the given attribute, or nil if the attribute
// is not a CM message this package knows (ClassPortInfo is not one).
func NewMessage(attr AttributeID) Message {
	switch attr {
	case AttrREQ:
		return new(REQ)
	case AttrMRA:
		return new(MRA)
	case AttrREJ:
		return new(REJ)
	case AttrREP:
		return new(REP)
	case AttrRTU:
		return new(RTU)
	case AttrDREQ:
		return new(DREQ)
	case AttrDREP:
		return new(DREP)
	case AttrLAP:
		return new(LAP)
	case AttrAPR:
		return new(APR)
	case AttrSIDRREQ:
		return new(SIDRREQ)
	case AttrSIDRREP:
		return new(SIDRREP)
	}
	return nil
}

// Decode reads a CM MAD from b[0:MADLen]: the common header, which must say Base
// Version 1, Management Class CM and Class Version 2, and the message its Attribute
// ID names. The header is returned whenever b holds one, also with an error about
// the header's values or the message, so that a caller can answer it (a REJ with
// reason Unsupported Class Version, say).
func Decode(b []byte) (Header, Message, error) {
	h, err := DecodeHeader(b)
	if err != nil {
		return h, nil, err
	}
	if len(b) < MADLen {
		return h, nil, shortError("MAD", len(b), MADLen)
	}
	if err := h.checkCM(); err != nil {
		return h, nil, err
	}
	m := NewMessage(h.AttributeID)
	if m == nil {
		return h, nil, fieldError("MAD header", "Attribute ID", "0x%04x is not a CM message", uint16(h.AttributeID))
	}
	if err := m.Decode(b[HeaderLen:MADLen]); err != nil {
		return h, nil, err
	}
	return h, m, nil
}

// Encode writes the MAD of h and m into b[0:MADLen] and returns MADLen. The
// Attribute ID written is m's, whatever h says. It panics if b is shorter.
func Encode(b []byte, h Header, m Message) int {
	_ = b[MADLen-1]
	h.AttributeID = m.AttributeID()
	h.Put(b)
	m.Put(b[HeaderLen:MADLen])
	return MADLen
}
