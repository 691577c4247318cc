package cm

// REPPrivateDataLen is the size of a REP's private data (Table 110).
const REPPrivateDataLen = 196

// REP is the Reply to Request for Communication (IBTA Vol 1 §12.6, Table 110 "REP
// Message Contents"), Attribute ID 0x0013: the passive side's QP and starting PSN.
type REP struct {
	LocalCommID         uint32                  // 0[0], 32 bits: Local Communication ID
	RemoteCommID        uint32                  // 4[0], 32 bits: Remote Communication ID
	LocalQKey           uint32                  // 8[0], 32 bits: Local Q_Key
	LocalQPN            uint32                  // 12[0], 24 bits
	LocalEECN           uint32                  // 16[0], 24 bits: Local EE Context Number
	StartingPSN         uint32                  // 20[0], 24 bits
	VendorID            uint32                  // 15[0], 19[0], 23[0], 8 bits each, high to low: ECE vendor ID (IBA comment 9434; reserved in Release 1.4)
	ResponderResources  uint8                   // 24[0], 8 bits
	InitiatorDepth      uint8                   // 25[0], 8 bits
	TargetACKDelay      uint8                   // 26[0], 5 bits
	FailoverAccepted    uint8                   // 26[5], 2 bits
	EndToEndFlowControl bool                    // 26[7], 1 bit: End-to-End Flow Control
	RNRRetryCount       uint8                   // 27[0], 3 bits
	SRQ                 bool                    // 27[3], 1 bit
	LocalCAGUID         uint64                  // 28[0], 64 bits: Local CA GUID
	PrivateData         [REPPrivateDataLen]byte // 36[0], 1568 bits
}

// AttributeID returns AttrREP.
func (*REP) AttributeID() AttributeID { return AttrREP }

// Decode reads the REP from b[0:DataLen].
func (m *REP) Decode(b []byte) error {
	b, err := data("REP", b)
	if err != nil {
		return err
	}
	m.LocalCommID = be.Uint32(b[0:])
	m.RemoteCommID = be.Uint32(b[4:])
	m.LocalQKey = be.Uint32(b[8:])
	m.LocalQPN = get24(b[12:])
	m.LocalEECN = get24(b[16:])
	m.StartingPSN = get24(b[20:])
	m.VendorID = uint32(b[15])<<16 | uint32(b[19])<<8 | uint32(b[23])
	m.ResponderResources = b[24]
	m.InitiatorDepth = b[25]
	m.TargetACKDelay = b[26] >> 3
	m.FailoverAccepted = b[26] >> 1 & 3
	m.EndToEndFlowControl = b[26]&0x01 != 0
	m.RNRRetryCount = b[27] >> 5
	m.SRQ = b[27]&0x10 != 0
	m.LocalCAGUID = be.Uint64(b[28:])
	copy(m.PrivateData[:], b[36:])
	return nil
}

// Put writes the REP into b[0:DataLen].
func (m *REP) Put(b []byte) {
	b = out(b)
	be.PutUint32(b[0:], m.LocalCommID)
	be.PutUint32(b[4:], m.RemoteCommID)
	be.PutUint32(b[8:], m.LocalQKey)
	put24(b[12:], m.LocalQPN)
	b[15] = byte(m.VendorID >> 16)
	put24(b[16:], m.LocalEECN)
	b[19] = byte(m.VendorID >> 8)
	put24(b[20:], m.StartingPSN)
	b[23] = byte(m.VendorID)
	b[24] = m.ResponderResources
	b[25] = m.InitiatorDepth
	b[26] = m.TargetACKDelay<<3 | (m.FailoverAccepted&3)<<1 | flag(m.EndToEndFlowControl, 0x01)
	b[27] = m.RNRRetryCount<<5 | flag(m.SRQ, 0x10)
	be.PutUint64(b[28:], m.LocalCAGUID)
	copy(b[36:], m.PrivateData[:])
}
