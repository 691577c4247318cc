package cm

// MessageRef is the 2-bit field by which a REJ (Message REJected, Table 108) or an
// MRA (Message MRAed, Table 107) names the message it answers.
type MessageRef uint8

// Message references; 3 is reserved.
const (
	RefREQ   MessageRef = 0
	RefREP   MessageRef = 1
	RefOther MessageRef = 2 // REJ: no message (or another one, e.g. a LAP's); MRA: a LAP
)

func (r MessageRef) String() string {
	switch r {
	case RefREQ:
		return "REQ"
	case RefREP:
		return "REP"
	case RefOther:
		return "other"
	}
	return "reserved"
}
