package cm

// Sizes of a REJ's variable parts (Table 108).
const (
	ARILen            = 72 // Additional Rejection Information
	REJPrivateDataLen = 148
)

// REJ is Reject (IBTA Vol 1 §12.6, Table 108 "REJ Message Contents"), Attribute ID
// 0x0012: either side refuses a REQ, a REP or a connection, with a reason.
type REJ struct {
	LocalCommID        uint32                  // 0[0], 32 bits: Local Communication ID
	RemoteCommID       uint32                  // 4[0], 32 bits: Remote Communication ID
	MessageRejected    MessageRef              // 8[0], 2 bits: Message REJected
	RejectedInfoLength uint8                   // 9[0], 7 bits: how many bytes of ARI are meaningful, ≤ ARILen
	Reason             RejectReason            // 10[0], 16 bits
	ARI                [ARILen]byte            // 12[0], 576 bits: Additional Rejection Information
	PrivateData        [REJPrivateDataLen]byte // 84[0], 1184 bits
}

// AttributeID returns AttrREJ.
func (*REJ) AttributeID() AttributeID { return AttrREJ }

// Decode reads the REJ from b[0:DataLen]. A Rejected Info Length beyond the ARI
// field is an error.
func (m *REJ) Decode(b []byte) error {
	b, err := data("REJ", b)
	if err != nil {
		return err
	}
	m.LocalCommID = be.Uint32(b[0:])
	m.RemoteCommID = be.Uint32(b[4:])
	m.MessageRejected = MessageRef(b[8] >> 6)
	m.RejectedInfoLength = b[9] >> 1
	m.Reason = RejectReason(be.Uint16(b[10:]))
	copy(m.ARI[:], b[12:84])
	copy(m.PrivateData[:], b[84:])
	if m.RejectedInfoLength > ARILen {
		return fieldError("REJ", "Rejected Info Length", "%d, more than the %d bytes of ARI", m.RejectedInfoLength, ARILen)
	}
	return nil
}

// Put writes the REJ into b[0:DataLen].
func (m *REJ) Put(b []byte) {
	b = out(b)
	be.PutUint32(b[0:], m.LocalCommID)
	be.PutUint32(b[4:], m.RemoteCommID)
	b[8] = byte(m.MessageRejected) << 6
	b[9] = m.RejectedInfoLength << 1
	be.PutUint16(b[10:], uint16(m.Reason))
	copy(b[12:84], m.ARI[:])
	copy(b[84:], m.PrivateData[:])
}

// ARIBytes returns the meaningful part of the ARI (its first RejectedInfoLength
// bytes, at most ARILen).
func (m *REJ) ARIBytes() []byte { return m.ARI[:min(int(m.RejectedInfoLength), ARILen)] }
