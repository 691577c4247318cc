package rdmacm

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/transport/ibcm"
)

// Conn is one connection (an rdma_cm_id with its QP), from Dial or
// Request.Accept until its TimeWait ends.
type Conn struct {
	s             *Service
	id            *ibcm.Conn
	qp            *transport.QueuePair
	local, remote netip.AddrPort
	sgid          int // the local address's GID index
	ps            cm.PortSpace
	ud            UDInfo    // RDMA_PS_UDP: the peer's QP, from its SIDR_REP
	peer          Param     // the peer's REQ or REP, from this side (Param)
	params        *qpParams // the QP's attributes (QPAttrs): the passive side's from the REQ, the active's from the REP
	responded     bool      // an application-managed QP's REP came (EventConnectResponse)
	remoteQPN     uint32    // the active side's: the REP's QPN

	established chan struct{} // closed once established, or when the connection ends first
	done        chan struct{} // closed when the connection ends
	disc        chan struct{} // closed when the disconnect exchange is over (Disconnected)
	isEstab     bool
	ended       bool
	isDisc      bool
	err         error // why it ended
	reported    bool  // EventDisconnected (or a failure) went to OnEvent
}

func newConn(s *Service, id *ibcm.Conn, qp *transport.QueuePair, local, remote netip.AddrPort) *Conn {
	c := &Conn{s: s, id: id, qp: qp, local: local, remote: remote, ps: cm.PortSpaceTCP,
		established: make(chan struct{}), done: make(chan struct{}), disc: make(chan struct{})}
	s.conns[id] = c
	return c
}

// QP returns the connection's queue pair.
func (c *Conn) QP() *transport.QueuePair { return c.qp }

// RemoteQPN returns the peer's QP number from its REP on the active side (what
// rdma_cm's ESTABLISHED and CONNECT_RESPONSE events carry as param.conn.qp_num), 0
// on the passive side (Request.RemoteQPN has the REQ's).
func (c *Conn) RemoteQPN() uint32 {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.remoteQPN
}

// LocalAddr and RemoteAddr return the connection's addresses (rdma_get_local_addr,
// rdma_get_peer_addr): the IP CM header's, ports in the RDMA_PS_TCP space.
func (c *Conn) LocalAddr() netip.AddrPort  { return c.local }
func (c *Conn) RemoteAddr() netip.AddrPort { return c.remote }

// PeerParam returns what the peer's REQ (passive side) or REP (active side) said,
// seen from this side: its private data (a REQ's without the IP CM header), its
// initiator depth as ResponderResources and its responder resources as
// InitiatorDepth (struct rdma_conn_param of RDMA_CM_EVENT_CONNECT_REQUEST and
// _ESTABLISHED).
func (c *Conn) PeerParam() Param { return c.peer }

// Established is closed once the connection is established (the REP arrived and
// the RTU went out, or the RTU arrived), or when it ended before.
func (c *Conn) Established() <-chan struct{} { return c.established }

// Done is closed when the connection ends: the peer disconnected or rejected,
// Disconnect or Close was called, or a timeout. Err then says why.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Disconnected is closed when the connection's CM exchange is over: the peer's
// DREP to our DREQ came (or our DREQ went unanswered through every retry, or the
// DREQs crossed), our DREP answered the peer's DREQ, or the connection ended
// without one (a REJ, a timeout, Service.Close). It is when librdmacm reports
// RDMA_CM_EVENT_DISCONNECTED to the side that called rdma_disconnect first.
func (c *Conn) Disconnected() <-chan struct{} { return c.disc }

// Err returns nil while the connection lives, then why it ended.
func (c *Conn) Err() error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.err
}

// WaitEstablished blocks until the connection is established (nil), ends (its
// error), or ctx ends (ctx's error; the connection stays).
func (c *Conn) WaitEstablished(ctx context.Context) error {
	select {
	case <-c.established:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if !c.isEstab {
		return c.err
	}
	return nil
}

// Disconnect ends the connection as rdma_disconnect does: the QP moves to the error
// state (its outstanding work requests complete with IBV_WC_WR_FLUSH_ERR) and a DREQ
// goes to the peer, sent again until its DREP comes, or, when the peer's DREQ came
// first, the DREP answers it. Before establishment it rejects. It returns at once;
// Done is closed.
func (c *Conn) Disconnect() error {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	now := time.Now()
	c.disconnectLocked(now)
	c.s.settle(now)
	c.s.kick()
	return nil
}

// Close is Disconnect without waiting for anything; the connection's IDs live on
// inside the Service until its TimeWait ends, as a destroyed rdma_cm_id's do.
func (c *Conn) Close() error { return c.Disconnect() }

func (c *Conn) disconnectLocked(now time.Time) {
	c.closeLocked(now, fmt.Errorf("rdmacm: connection with %v closed by this side: %w", c.remote, ErrClosed))
}

// closeLocked ends the connection from this side with err; s.mu is held.
func (c *Conn) closeLocked(now time.Time, err error) {
	if c.qp != nil && (c.isEstab || c.id.Passive()) {
		_ = c.qp.Modify(transport.QPAttr{State: transport.QPS_ERR}, transport.QP_STATE)
	}
	switch c.id.State() {
	case ibcm.StateEstablished:
		_ = c.s.mgr.Disconnect(now, c.id, nil)
	case ibcm.StateDREQRcvd:
		_ = c.s.mgr.DREP(now, c.id, nil)
	default:
		c.s.mgr.Destroy(now, c.id)
	}
	if c.id.State() == ibcm.StateIdle {
		c.s.forget(c)
	}
	c.end(err)
}

// setEstablished marks the connection established and reports it; s.mu is held.
func (c *Conn) setEstablished() {
	if c.markEstablished() {
		c.s.emit(Event{Type: EventEstablished, Conn: c})
	}
}

// markEstablished marks the connection established, unless it is already or has
// ended, and says whether it did; s.mu is held.
func (c *Conn) markEstablished() bool {
	if c.ended || c.isEstab {
		return false
	}
	c.isEstab = true
	close(c.established)
	return true
}

// report tells OnEvent how the connection ended, once (a failure, or
// EventDisconnected: any end after establishment is one, as rdma_cm reports a REJ
// then), and EventTimeWaitExit at the very end. s.mu is held.
func (c *Conn) report(t EventType, err error) {
	if t != EventTimeWaitExit {
		if c.reported {
			return
		}
		c.reported = true
		if c.isEstab {
			t, err = EventDisconnected, nil
		}
	}
	c.s.emit(Event{Type: t, Conn: c, Err: err})
}

// end marks the connection ended with err (the first reason stays); s.mu is held.
func (c *Conn) end(err error) {
	if c.ended {
		return
	}
	c.ended, c.err = true, err
	if !c.isEstab {
		close(c.established)
	}
	close(c.done)
}

// setDisconnected closes Disconnected; s.mu is held.
func (c *Conn) setDisconnected() {
	if !c.isDisc {
		c.isDisc = true
		close(c.disc)
	}
}

// waitingFor names the message this side waits an answer to.
func (c *Conn) waitingFor() string {
	switch {
	case c.ps == cm.PortSpaceUDP:
		return "SIDR_REQ"
	case c.id.Passive():
		return "REP"
	}
	return "REQ"
}

// RejectError is a REJ from the peer (RDMA_CM_EVENT_REJECTED): its reason, its
// Additional Rejection Information and private data (rdma_reject's).
type RejectError struct {
	Peer        netip.AddrPort
	Reason      cm.RejectReason
	ARI         []byte
	PrivateData []byte
}

func (e *RejectError) Error() string {
	hint := ""
	switch e.Reason {
	case cm.RejInvalidServiceID:
		hint = fmt.Sprintf(" (nothing listens on port %d there: start the server first, or check the port)", e.Peer.Port())
	case cm.RejConsumerReject:
		hint = " (the application there refused the connection)"
	case cm.RejStaleConnection:
		hint = " (the peer still holds an old connection with these IDs: retry in a few seconds)"
	case cm.RejTimeout:
		hint = " (the peer gave up waiting for us)"
	}
	return fmt.Sprintf("rdmacm: %v rejected the connection: %v (REJ reason %d)%s", e.Peer, e.Reason, uint8(e.Reason), hint)
}

// Unwrap makes errors.Is(err, ErrRejected) hold.
func (e *RejectError) Unwrap() error { return ErrRejected }

func rejectError(c *Conn, rej *cm.REJ) error {
	n := min(int(rej.RejectedInfoLength), len(rej.ARI))
	return &RejectError{Peer: c.remote, Reason: rej.Reason, ARI: append([]byte(nil), rej.ARI[:n]...),
		PrivateData: append([]byte(nil), rej.PrivateData[:]...)}
}
