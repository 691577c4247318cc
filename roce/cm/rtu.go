package cm

// RTUPrivateDataLen is the size of an RTU's private data (Table 111).
const RTUPrivateDataLen = 224

// RTU is Ready To Use (IBTA Vol 1 §12.6, Table 111 "RTU Message Contents"),
// Attribute ID 0x0014: the active side's last message of connection establishment.
type RTU struct {
	LocalCommID  uint32                  // 0[0], 32 bits: Local Communication ID
	RemoteCommID uint32                  // 4[0], 32 bits: Remote Communication ID
	PrivateData  [RTUPrivateDataLen]byte // 8[0], 1792 bits
}

// AttributeID returns AttrRTU.
func (*RTU) AttributeID() AttributeID { return AttrRTU }

// Decode reads the RTU from b[0:DataLen].
func (m *RTU) Decode(b []byte) error {
	b, err := data("RTU", b)
	if err != nil {
		return err
	}
	m.LocalCommID = be.Uint32(b[0:])
	m.RemoteCommID = be.Uint32(b[4:])
	copy(m.PrivateData[:], b[8:])
	return nil
}

// Put writes the RTU into b[0:DataLen].
func (m *RTU) Put(b []byte) {
	b = out(b)
	be.PutUint32(b[0:], m.LocalCommID)
	be.PutUint32(b[4:], m.RemoteCommID)
	copy(b[8:], m.PrivateData[:])
}
