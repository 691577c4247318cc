package cm

import "fmt"

// Sizes of an APR's variable parts (Table 116).
const (
	APRInfoLen        = 72
	APRPrivateDataLen = 148
)

// APStatus is an APR's AP Status (Table 116; Linux enum ib_cm_apr_status).
type APStatus uint8

// Alternate path response statuses.
const (
	APSuccess           APStatus = 0 // Path loaded
	APInvalidCommID     APStatus = 1 // Invalid Communication ID
	APUnsupported       APStatus = 2 // Unsupported request
	APRejected          APStatus = 3 // Rejected
	APRedirect          APStatus = 4 // Redirection (Additional Information: ClassPortInfo)
	APIsCurrent         APStatus = 5 // Path is the current path
	APInvalidQPNEECN    APStatus = 6 // Invalid QPN/EECN
	APInvalidLID        APStatus = 7 // Invalid alternate LID
	APInvalidGID        APStatus = 8 // Invalid alternate GID
	APInvalidFlowLabel  APStatus = 9 // Invalid alternate Flow Label
	APInvalidTClass     APStatus = 10
	APInvalidHopLimit   APStatus = 11
	APInvalidPacketRate APStatus = 12
	APInvalidSL         APStatus = 13
)

func (s APStatus) String() string {
	names := [...]string{"Path loaded", "Invalid Communication ID", "Unsupported request", "Rejected",
		"Redirection", "Path is current", "Invalid QPN/EECN", "Invalid alternate LID", "Invalid alternate GID",
		"Invalid alternate Flow Label", "Invalid alternate Traffic Class", "Invalid alternate Hop Limit",
		"Invalid alternate Packet Rate", "Invalid alternate SL"}
	if int(s) < len(names) {
		return names[s]
	}
	return fmt.Sprintf("APStatus(%d)", uint8(s))
}

// APR is Alternate Path Response (IBTA Vol 1 §12.6, Table 116 "APR Message
// Contents"), Attribute ID 0x001A: the answer to a LAP.
type APR struct {
	LocalCommID          uint32                  // 0[0], 32 bits: Local Communication ID
	RemoteCommID         uint32                  // 4[0], 32 bits: Remote Communication ID
	AdditionalInfoLength uint8                   // 8[0], 8 bits: Additional Information Length, ≤ APRInfoLen
	APStatus             APStatus                // 9[0], 8 bits: AP Status
	AdditionalInfo       [APRInfoLen]byte        // 12[0], 576 bits: Additional Information
	PrivateData          [APRPrivateDataLen]byte // 84[0], 1184 bits
}

// AttributeID returns AttrAPR.
func (*APR) AttributeID() AttributeID { return AttrAPR }

// Decode reads the APR from b[0:DataLen]. An Additional Information Length beyond
// its field is an error.
func (m *APR) Decode(b []byte) error {
	b, err := data("APR", b)
	if err != nil {
		return err
	}
	m.LocalCommID = be.Uint32(b[0:])
	m.RemoteCommID = be.Uint32(b[4:])
	m.AdditionalInfoLength = b[8]
	m.APStatus = APStatus(b[9])
	copy(m.AdditionalInfo[:], b[12:84])
	copy(m.PrivateData[:], b[84:])
	if m.AdditionalInfoLength > APRInfoLen {
		return fieldError("APR", "Additional Information Length", "%d, more than the %d bytes of Additional Information", m.AdditionalInfoLength, APRInfoLen)
	}
	return nil
}

// Put writes the APR into b[0:DataLen].
func (m *APR) Put(b []byte) {
	b = out(b)
	be.PutUint32(b[0:], m.LocalCommID)
	be.PutUint32(b[4:], m.RemoteCommID)
	b[8] = m.AdditionalInfoLength
	b[9] = byte(m.APStatus)
	copy(b[12:84], m.AdditionalInfo[:])
	copy(b[84:], m.PrivateData[:])
}
