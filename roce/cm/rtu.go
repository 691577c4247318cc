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
	return decodeIDsData("RTU", b, &m.LocalCommID, &m.RemoteCommID, m.PrivateData[:])
}

// Put writes the RTU into b[0:DataLen].
func (m *RTU) Put(b []byte) { putIDsData(b, m.LocalCommID, m.RemoteCommID, m.PrivateData[:]) }

// decodeIDsData reads the layout RTU and DREP share (Tables 111 and 113): the
// Local and Remote Communication IDs, then the private data.
func decodeIDsData(what string, b []byte, local, remote *uint32, pd []byte) error {
	b, err := data(what, b)
	if err != nil {
		return err
	}
	*local, *remote = be.Uint32(b[0:]), be.Uint32(b[4:])
	copy(pd, b[8:])
	return nil
}

// putIDsData writes that layout into b[0:DataLen].
func putIDsData(b []byte, local, remote uint32, pd []byte) {
	b = out(b)
	be.PutUint32(b[0:], local)
	be.PutUint32(b[4:], remote)
	copy(b[8:], pd)
}
