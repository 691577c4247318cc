package cm_test

import (
	"github.com/xroce/xroce/roce/cm"
)

// equalMessages compares two messages of any type by value (every message type is
// a comparable struct).
func equalMessages(a, b cm.Message) bool {
	switch a := a.(type) {
	case *cm.REQ:
		b, ok := b.(*cm.REQ)
		return ok && *a == *b
	case *cm.MRA:
		b, ok := b.(*cm.MRA)
		return ok && *a == *b
	case *cm.REJ:
		b, ok := b.(*cm.REJ)
		return ok && *a == *b
	case *cm.REP:
		b, ok := b.(*cm.REP)
		return ok && *a == *b
	case *cm.RTU:
		b, ok := b.(*cm.RTU)
		return ok && *a == *b
	case *cm.DREQ:
		b, ok := b.(*cm.DREQ)
		return ok && *a == *b
	case *cm.DREP:
		b, ok := b.(*cm.DREP)
		return ok && *a == *b
	case *cm.LAP:
		b, ok := b.(*cm.LAP)
		return ok && *a == *b
	case *cm.APR:
		b, ok := b.(*cm.APR)
		return ok && *a == *b
	case *cm.SIDRREQ:
		b, ok := b.(*cm.SIDRREQ)
		return ok && *a == *b
	case *cm.SIDRREP:
		b, ok := b.(*cm.SIDRREP)
		return ok && *a == *b
	}
	return false
}
