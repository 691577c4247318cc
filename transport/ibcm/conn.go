package ibcm

import (
	"net/netip"
	"time"

	"github.com/xroce/xroce/roce/cm"
)

// Conn is one connection the Manager tracks, from Connect or from a REQ until its
// TimeWait ends (or a REJ or timeout ends it first). Its methods read it; the
// Manager's change it.
type Conn struct {
	state   State
	passive bool
	peer    netip.Addr

	localID, remoteID uint32
	remoteGUID        uint64
	tid               uint64     // the establishment's transaction (the REQ's)
	dreqTID           uint64     // the peer's DREQ's transaction, for our DREP
	req               cm.REQ     // as sent (active) or received (passive)
	rep               cm.REP     // as received (active) or sent (passive)
	sidr              cm.SIDRREQ // a SIDR exchange's request, as sent or received

	// The message being retransmitted until answered, and its timer.
	pending  []byte
	deadline time.Time // zero: no timer
	timeout  time.Duration
	retries  int // retransmissions left

	// Answers kept for duplicates: MRA, RTU, DREP.
	lastMRA, lastRTU, lastDREP []byte
}

// State returns the connection's state.
func (c *Conn) State() State { return c.state }

// Passive reports whether the connection began with a REQ received.
func (c *Conn) Passive() bool { return c.passive }

// Peer returns the peer's address (its GID as an IP address).
func (c *Conn) Peer() netip.Addr { return c.peer }

// LocalCommID and RemoteCommID return the two Communication IDs; the remote one is
// 0 until the peer's REQ or REP names it.
func (c *Conn) LocalCommID() uint32  { return c.localID }
func (c *Conn) RemoteCommID() uint32 { return c.remoteID }

// REQ returns the connection's REQ, as sent or as received.
func (c *Conn) REQ() cm.REQ { return c.req }

// REP returns the connection's REP once sent or received.
func (c *Conn) REP() cm.REP { return c.rep }

// localQPN is the QP this side named in its REQ or REP.
func (c *Conn) localQPN() uint32 {
	if c.passive {
		return c.rep.LocalQPN
	}
	return c.req.LocalQPN
}

// peerResponseTimeout is the peer's CM Response Timeout: how long it may take to
// answer us.
func (c *Conn) peerResponseTimeout() uint8 {
	if c.passive {
		return c.req.LocalCMResponseTimeout
	}
	return c.req.RemoteCMResponseTimeout
}

// remoteQPN is the QP the peer named.
func (c *Conn) remoteQPN() uint32 {
	if c.passive {
		return c.req.LocalQPN
	}
	return c.rep.LocalQPN
}
