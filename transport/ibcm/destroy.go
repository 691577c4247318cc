package ibcm

import (
	"encoding/binary"
	"time"

	"github.com/xroce/xroce/roce/cm"
)

// Destroy ends c in whatever state it is, as Linux's ib_destroy_cm_id does
// (cm.c cm_destroy_id), so that the peer learns of it:
//
//   - REQ Sent, MRA REQ Rcvd: a REJ with reason Timeout (ARI: this side's CA GUID);
//   - REQ Rcvd, MRA REQ Sent, REP Sent, MRA REP Rcvd, REP Rcvd, MRA REP Sent: a REJ
//     with reason Consumer Reject;
//   - Established: a DREQ, sent once, then TimeWait;
//   - DREQ Rcvd: the DREP, then TimeWait;
//   - DREQ Sent: TimeWait at once;
//   - SIDR REQ Sent: dropped; SIDR REQ Rcvd: a SIDR_REP with status Rejected;
//   - TimeWait and Idle: nothing (a TimeWait runs to its end).
//
// A connection that leaves without TimeWait is dropped at once (no event); one in
// TimeWait gets EventTimeWait now and EventTimeWaitExit at its end.
func (m *Manager) Destroy(now time.Time, c *Conn) {
	if m.conns[c.localID] != c {
		return
	}
	switch c.state {
	case StateREQSent, StateMRAREQRcvd:
		ari := binary.BigEndian.AppendUint64(nil, m.cfg.LocalCAGUID)
		m.reject(c.peer, c.tid, c.localID, c.remoteID, cm.RefREQ, cm.RejTimeout, ari, nil)
		m.drop(c)
	case StateREQRcvd, StateMRAREQSent, StateREPSent, StateMRAREPRcvd:
		m.reject(c.peer, c.tid, c.localID, c.remoteID, cm.RefREQ, cm.RejConsumerReject, nil, nil)
		m.drop(c)
	case StateREPRcvd, StateMRAREPSent:
		m.reject(c.peer, c.tid, c.localID, c.remoteID, cm.RefREP, cm.RejConsumerReject, nil, nil)
		m.drop(c)
	case StateEstablished:
		dreq := cm.DREQ{LocalCommID: c.localID, RemoteCommID: c.remoteID, RemoteQPNEECN: c.remoteQPN()}
		m.send(c.peer, encode(m.tidFor(c), &dreq))
		m.enterTimeWait(now, c)
	case StateDREQRcvd:
		c.lastDREP = m.drep(c.peer, c.dreqTID, c.localID, c.remoteID, nil)
		m.enterTimeWait(now, c)
	case StateDREQSent:
		m.enterTimeWait(now, c)
	case StateSIDRReqSent:
		m.drop(c)
	case StateSIDRReqRcvd: // cm_reject_sidr_req
		_ = m.SIDRReply(c, cm.SIDRREP{Status: cm.SIDRRejected})
	}
}
