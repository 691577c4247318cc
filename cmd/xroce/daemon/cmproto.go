package daemon

// The connection manager's messages (librdmacm's functions in the library;
// docs/verbs-library.md §7). An rdma_cm_id is a handle in the session of the
// device it is bound to; its events go, as CMEventMsg, to the completion channel
// (OpCreateChannel) the library named in CMCreateIDReq: the library's event
// channel.
const (
	OpCMCreateID     uint16 = 24 // CMCreateIDReq → Handle
	OpCMDestroyID    uint16 = 25 // Handle → no body
	OpCMBind         uint16 = 26 // CMBindReq → CMAddr (the address bound, port chosen when 0)
	OpCMResolveAddr  uint16 = 27 // CMResolveReq → CMAddr (the local address); RDMA_CM_EVENT_ADDR_RESOLVED follows
	OpCMResolveRoute uint16 = 28 // Handle → no body; RDMA_CM_EVENT_ROUTE_RESOLVED follows
	OpCMListen       uint16 = 29 // CMListenReq → no body
	OpCMConnect      uint16 = 30 // CMConnReq → no body; ESTABLISHED, REJECTED, UNREACHABLE or CONNECT_ERROR follows
	OpCMAccept       uint16 = 31 // CMConnReq → no body; ESTABLISHED follows at the RTU
	OpCMReject       uint16 = 32 // CMRejectReq → no body
	OpCMDisconnect   uint16 = 33 // Handle → no body; DISCONNECTED follows
	opLastCM                = OpCMDisconnect

	// OpCMMigrateID moves an id's events to another event channel of the session
	// (protocol version 5: rdma_migrate_id, and the library's synchronous ids, whose
	// connection requests each get a channel of their own as librdmacm's do).
	OpCMMigrateID uint16 = 39 // CMMigrateReq → no body

	// Application-managed QPs (protocol version 6: rdma_init_qp_attr,
	// rdma_establish; rdma_connect and rdma_accept with QP 0 name
	// CMConnReq.Param.QPNum instead).
	OpCMInitQPAttr uint16 = 40 // CMInitQPAttrReq → QPAttrMsg (QP 0; Mask the attributes given)
	OpCMEstablish  uint16 = 41 // Handle → no body: the RTU after RDMA_CM_EVENT_CONNECT_RESPONSE
	opFirstCMAppQP        = OpCMMigrateID
	opLastCMAppQP         = OpCMEstablish
)

// CMAddr is an IP address and port (a struct sockaddr_in or _in6): Family is
// AF_INET (2) or AF_INET6 (10), Port in host order, Addr the 4 or 16 bytes of the
// address from its start.
type CMAddr struct {
	Family  uint16
	Port    uint16
	ScopeID uint32
	Addr    [16]byte
}

// CMCreateIDReq creates an rdma_cm_id: its events go to Channel (a completion
// channel of the session) tagged with Cookie; PS is enum rdma_port_space (only
// RDMA_PS_TCP, 0x0106, with IBV_QPT_RC; RDMA_PS_UDP, 0x0111, with IBV_QPT_UD), QPType
// enum ibv_qp_type.
type CMCreateIDReq struct {
	Channel uint32
	PS      uint32
	QPType  uint32
	_       uint32
	Cookie  uint64
}

// CMBindReq binds an id to a local address (rdma_bind_addr).
type CMBindReq struct {
	Handle uint32
	_      uint32
	Addr   CMAddr
}

// CMResolveReq resolves Dst from Src (Family 0: any) for an id (rdma_resolve_addr).
type CMResolveReq struct {
	Handle    uint32
	TimeoutMs uint32
	Src, Dst  CMAddr
}

// CMMigrateReq sends id Handle's events from now on to Channel, a completion
// channel of the session (rdma_migrate_id).
type CMMigrateReq struct {
	Handle  uint32
	Channel uint32
}

// CMInitQPAttrReq asks for the attributes that move the id's QP to State (enum
// ibv_qp_state: INIT, RTR or RTS), as rdma_init_qp_attr does.
type CMInitQPAttrReq struct {
	Handle uint32
	State  uint32
}

// CMListenReq starts listening on an id's bound port (rdma_listen).
type CMListenReq struct {
	Handle  uint32
	Backlog int32
}

// CMParam is struct rdma_conn_param, flattened; QPNum is the peer's QP in events
// and ignored in requests.
type CMParam struct {
	ResponderResources uint8
	InitiatorDepth     uint8
	FlowControl        uint8
	RetryCount         uint8
	RNRRetryCount      uint8
	SRQ                uint8
	PrivateDataLen     uint8
	_                  uint8
	QPNum              uint32
	PrivateData        [196]byte
}

// CMConnReq connects (rdma_connect) or accepts (rdma_accept) with a QP of the
// session (RDMA_PS_UDP: a SIDR_REQ, or the SIDR_REP naming the QP), or with QP 0 an
// application-managed QP, Param.QPNum, which the daemon never modifies; TOS is the
// id's RDMA_OPTION_ID_TOS.
type CMConnReq struct {
	Handle uint32
	QP     uint32
	TOS    uint8
	_      [7]uint8
	Param  CMParam
}

// CMRejectReq refuses a connection request (rdma_reject).
type CMRejectReq struct {
	Handle         uint32
	PrivateDataLen uint32
	PrivateData    [148]byte
}

// CMEventMsg is one rdma_cm event. Cookie is the id's from CMCreateIDReq, except
// for a CONNECT_REQUEST: then the listening id's, and Handle is the new id the
// daemon made for the request (its Cookie 0 until the library destroys it). Event
// is enum rdma_cm_event_type, Status the event's status (a REJ's reason for
// REJECTED, a negative errno for errors).
type CMEventMsg struct {
	Cookie uint64
	Handle uint32
	Event  uint32
	Status int32
	QKey   uint32 // RDMA_PS_UDP's ESTABLISHED: the peer QP's Q_Key (Param.QPNum its QPN)
	Local  CMAddr
	Remote CMAddr
	Param  CMParam
}
