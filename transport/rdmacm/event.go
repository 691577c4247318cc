package rdmacm

// EventType is what happened to a connection, with the values of librdmacm's enum
// rdma_cm_event_type (<rdma/rdma_cma.h>) for the events a connection on
// RDMA_PS_TCP gets.
type EventType int

// Events, delivered through Options.OnEvent.
const (
	EventConnectRequest  EventType = 4  // RDMA_CM_EVENT_CONNECT_REQUEST: Event.Request
	EventConnectResponse EventType = 5  // RDMA_CM_EVENT_CONNECT_RESPONSE: the REP of an application-managed QP (ConnectQPN)
	EventConnectError    EventType = 6  // RDMA_CM_EVENT_CONNECT_ERROR: the REP did not fit the QP
	EventUnreachable     EventType = 7  // RDMA_CM_EVENT_UNREACHABLE: the REQ or REP went unanswered
	EventRejected        EventType = 8  // RDMA_CM_EVENT_REJECTED: Event.Err is a *RejectError
	EventEstablished     EventType = 9  // RDMA_CM_EVENT_ESTABLISHED
	EventDisconnected    EventType = 10 // RDMA_CM_EVENT_DISCONNECTED: once per established connection
	EventTimeWaitExit    EventType = 15 // RDMA_CM_EVENT_TIMEWAIT_EXIT: the connection's IDs are free
)

// Event is one thing that happened to a connection (or a listener's new request).
type Event struct {
	Type     EventType
	Conn     *Conn
	Listener *Listener // EventConnectRequest
	Request  *Request  // EventConnectRequest
	Err      error     // why, for the errors
}

// emit hands e to Options.OnEvent; s.mu is held.
func (s *Service) emit(e Event) {
	if s.opts.OnEvent != nil {
		s.opts.OnEvent(e)
	}
}
