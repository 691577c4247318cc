package ibcm

import (
	"net/netip"

	"github.com/xroce/xroce/roce/cm"
)

// EventType says what happened to a connection.
type EventType uint8

// Events.
const (
	// EventREQ: a REQ for a listened Service ID (Event.REQ). The passive side moves
	// its QP to RTR, then calls Accept, or Reject, or SendMRA to take more time.
	EventREQ EventType = iota + 1
	// EventREP: the REP to our REQ (Event.REP). The active side moves its QP to RTR
	// and RTS, then calls RTU (or Reject).
	EventREP
	// EventEstablished: the passive side got the RTU (or NotifyEstablished).
	EventEstablished
	// EventRejected: the peer sent a REJ (Event.REJ); the connection is over.
	EventRejected
	// EventTimeout: a REQ or REP went unanswered through every retry; the Manager
	// sent a REJ with reason Timeout and dropped the connection.
	EventTimeout
	// EventDREQ: the peer asks to disconnect (Event.DREQ): call DREP.
	EventDREQ
	// EventTimeWait: the connection is disconnected and in TimeWait (after a DREP
	// either way, a DREQ that went unanswered, crossed DREQs, or a REJ once
	// established).
	EventTimeWait
	// EventTimeWaitExit: TimeWait is over; the connection and its IDs are gone.
	EventTimeWaitExit
	// EventSIDRREQ: a SIDR_REQ for a listened Service ID (Event.SIDRREQ): call
	// SIDRReply.
	EventSIDRREQ
	// EventSIDRREP: the SIDR_REP to our SIDR_REQ (Event.SIDRREP); the exchange is over.
	EventSIDRREP
)

var eventNames = [...]string{"?", "REQ", "REP", "Established", "Rejected", "Timeout", "DREQ", "TimeWait", "TimeWaitExit",
	"SIDR_REQ", "SIDR_REP"}

func (t EventType) String() string {
	if int(t) < len(eventNames) {
		return eventNames[t]
	}
	return "EventType(?)"
}

// Event is one thing the caller must know or act on. The message fields are set
// by the events that carry them.
type Event struct {
	Type EventType
	Conn *Conn
	REQ  *cm.REQ
	REP  *cm.REP
	REJ  *cm.REJ
	DREQ *cm.DREQ
	// SIDR_REQ and SIDR_REP of a Service ID Resolution.
	SIDRREQ *cm.SIDRREQ
	SIDRREP *cm.SIDRREP
}

// Send is a MAD to send from QP1 to QP1 of To (with cm.SetGSIDatagram).
type Send struct {
	To  netip.Addr
	MAD []byte // cm.MADLen bytes, the caller's
}
