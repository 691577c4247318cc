package cm

// Private-data sizes of DREQ (Table 112) and DREP (Table 113).
const (
	DREQPrivateDataLen = 220
	DREPPrivateDataLen = 224
)

// DREQ is the Request for Communication Release (Disconnection Request; IBTA Vol 1
// §12.6, Table 112 "DREQ Message Contents"), Attribute ID 0x0015.
type DREQ struct {
	LocalCommID   uint32                   // 0[0], 32 bits: Local Communication ID
	RemoteCommID  uint32                   // 4[0], 32 bits: Remote Communication ID
	RemoteQPNEECN uint32                   // 8[0], 24 bits: Remote QPN/EECN, the receiver's QP
	PrivateData   [DREQPrivateDataLen]byte // 12[0], 1760 bits
}

// AttributeID returns AttrDREQ.
func (*DREQ) AttributeID() AttributeID { return AttrDREQ }

// Decode reads the DREQ from b[0:DataLen].
func (m *DREQ) Decode(b []byte) error {
	b, err := data("DREQ", b)
	if err != nil {
		return err
	}
	m.LocalCommID = be.Uint32(b[0:])
	m.RemoteCommID = be.Uint32(b[4:])
	m.RemoteQPNEECN = get24(b[8:])
	copy(m.PrivateData[:], b[12:])
	return nil
}

// Put writes the DREQ into b[0:DataLen].
func (m *DREQ) Put(b []byte) {
	b = out(b)
	be.PutUint32(b[0:], m.LocalCommID)
	be.PutUint32(b[4:], m.RemoteCommID)
	put24(b[8:], m.RemoteQPNEECN)
	copy(b[12:], m.PrivateData[:])
}

// DREP is the Reply to Request for Communication Release (IBTA Vol 1 §12.6, Table
// 113 "DREP Message Contents"), Attribute ID 0x0016.
type DREP struct {
	LocalCommID  uint32                   // 0[0], 32 bits: Local Communication ID
	RemoteCommID uint32                   // 4[0], 32 bits: Remote Communication ID
	PrivateData  [DREPPrivateDataLen]byte // 8[0], 1792 bits
}

// AttributeID returns AttrDREP.
func (*DREP) AttributeID() AttributeID { return AttrDREP }

// Decode reads the DREP from b[0:DataLen].
func (m *DREP) Decode(b []byte) error {
	return decodeIDsData("DREP", b, &m.LocalCommID, &m.RemoteCommID, m.PrivateData[:])
}

// Put writes the DREP into b[0:DataLen].
func (m *DREP) Put(b []byte) { putIDsData(b, m.LocalCommID, m.RemoteCommID, m.PrivateData[:]) }
