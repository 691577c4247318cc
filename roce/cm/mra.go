package cm

// MRAPrivateDataLen is the size of an MRA's private data (Table 107).
const MRAPrivateDataLen = 222

// MRA is Message Receipt Acknowledgement (IBTA Vol 1 §12.6, Table 107 "MRA Message
// Contents"), Attribute ID 0x0011: the receiver of a REQ, REP or LAP asks for more
// time before it answers.
type MRA struct {
	LocalCommID    uint32                  // 0[0], 32 bits: Local Communication ID
	RemoteCommID   uint32                  // 4[0], 32 bits: Remote Communication ID
	MessageMRAed   MessageRef              // 8[0], 2 bits: Message MRAed (RefOther: a LAP)
	ServiceTimeout uint8                   // 9[0], 5 bits: 4.096 µs × 2^value
	PrivateData    [MRAPrivateDataLen]byte // 10[0], 1776 bits
}

// AttributeID returns AttrMRA.
func (*MRA) AttributeID() AttributeID { return AttrMRA }

// Decode reads the MRA from b[0:DataLen].
func (m *MRA) Decode(b []byte) error {
	b, err := data("MRA", b)
	if err != nil {
		return err
	}
	m.LocalCommID = be.Uint32(b[0:])
	m.RemoteCommID = be.Uint32(b[4:])
	m.MessageMRAed = MessageRef(b[8] >> 6)
	m.ServiceTimeout = b[9] >> 3
	copy(m.PrivateData[:], b[10:])
	return nil
}

// Put writes the MRA into b[0:DataLen].
func (m *MRA) Put(b []byte) {
	b = out(b)
	be.PutUint32(b[0:], m.LocalCommID)
	be.PutUint32(b[4:], m.RemoteCommID)
	b[8] = byte(m.MessageMRAed) << 6
	b[9] = m.ServiceTimeout << 3
	copy(b[10:], m.PrivateData[:])
}
