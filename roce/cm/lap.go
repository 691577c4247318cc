package cm

// LAPPrivateDataLen is the size of a LAP's private data (Table 115).
const LAPPrivateDataLen = 168

// LAP is Load Alternate Path (IBTA Vol 1 §12.6, Table 115 "LAP Message Contents"),
// Attribute ID 0x0019: the active side proposes a new alternate path for automatic
// path migration. RoCE peers do not send it; it is here for completeness.
type LAP struct {
	LocalCommID             uint32                  // 0[0], 32 bits: Local Communication ID
	RemoteCommID            uint32                  // 4[0], 32 bits: Remote Communication ID
	RemoteQPNEECN           uint32                  // 12[0], 24 bits: Remote QPN/EECN
	RemoteCMResponseTimeout uint8                   // 15[0], 5 bits
	Alternate               Path                    // 20-63: Alternate Local Port LID … Alternate Local ACK Timeout
	PrivateData             [LAPPrivateDataLen]byte // 64[0], 1344 bits
}

// AttributeID returns AttrLAP.
func (*LAP) AttributeID() AttributeID { return AttrLAP }

// Decode reads the LAP from b[0:DataLen].
func (m *LAP) Decode(b []byte) error {
	b, err := data("LAP", b)
	if err != nil {
		return err
	}
	m.LocalCommID = be.Uint32(b[0:])
	m.RemoteCommID = be.Uint32(b[4:])
	m.RemoteQPNEECN = get24(b[12:])
	m.RemoteCMResponseTimeout = b[15] >> 3
	m.Alternate.decodeLAP(b[20:64])
	copy(m.PrivateData[:], b[64:])
	return nil
}

// Put writes the LAP into b[0:DataLen].
func (m *LAP) Put(b []byte) {
	b = out(b)
	be.PutUint32(b[0:], m.LocalCommID)
	be.PutUint32(b[4:], m.RemoteCommID)
	put24(b[12:], m.RemoteQPNEECN)
	b[15] = m.RemoteCMResponseTimeout << 3
	m.Alternate.putLAP(b[20:64])
	copy(b[64:], m.PrivateData[:])
}
