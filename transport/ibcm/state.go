package ibcm

// State is a connection's state (IBTA Vol 1 ch. 12's CM state diagram; Linux enum
// ib_cm_state).
type State uint8

// Connection states.
const (
	StateIdle        State = iota // not connected; the connection is no longer the Manager's
	StateREQSent                  // active: REQ sent, waiting for REP, REJ or MRA
	StateMRAREQRcvd               // active: the peer MRAed our REQ
	StateREQRcvd                  // passive: REQ delivered as EventREQ, waiting for Accept, Reject or SendMRA
	StateMRAREQSent               // passive: we MRAed the REQ
	StateREPSent                  // passive: REP sent, waiting for RTU
	StateMRAREPRcvd               // passive: the peer MRAed our REP
	StateREPRcvd                  // active: REP delivered as EventREP, waiting for RTU or Reject
	StateMRAREPSent               // active: we MRAed the REP
	StateEstablished              // connected
	StateDREQSent                 // DREQ sent, waiting for DREP
	StateDREQRcvd                 // DREQ delivered as EventDREQ, waiting for DREP
	StateTimeWait                 // disconnected; IDs held until the TimeWait ends
	StateSIDRReqSent              // our SIDR_REQ sent, waiting for the SIDR_REP
	StateSIDRReqRcvd              // a peer's SIDR_REQ delivered as EventSIDRREQ, waiting for SIDRReply
)

var stateNames = [...]string{"Idle", "REQ Sent", "MRA REQ Rcvd", "REQ Rcvd", "MRA REQ Sent", "REP Sent",
	"MRA REP Rcvd", "REP Rcvd", "MRA REP Sent", "Established", "DREQ Sent", "DREQ Rcvd", "TimeWait",
	"SIDR REQ Sent", "SIDR REQ Rcvd"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "State(?)"
}
