package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/xroce/xroce/cmd/xroce/oob"
	cmwire "github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/transport/rdmacm"
)

// perftest's rdma_cm mode (-R), as Debian's perftest 4.5-0.17 runs it
// (docs/rdmacm-peers.md §1): two kinds of RDMA CM connection to the server's
// port (-p, default 18515). The "comm" connection, made first, carries the whole
// exchange as SENDs on a one-deep RC QP; then, inside the exchange (between the
// MTU and the key messages, oob.Session.DataConnect), one connection per test QP.
// The RDMA CM brings every QP to RTS with the REQ's and REP's PSNs, path and
// resources: the key messages' PSNs are not used. At the end both sides
// disconnect the test QPs' connections (their DREQs cross), then the comm
// connection.

// cmConns are one run's RDMA CM connections.
type cmConns struct {
	c        *conn
	svc      *rdmacm.Service
	closeSvc func() // svc.Close, once: at the end, or at Ctrl-C and SIGTERM
	ch       *cmChannel
	dst      netip.AddrPort   // client: the server's CM address
	l        *rdmacm.Listener // server: the listener of the test QPs' connections
	data     []*rdmacm.Conn   // the test QPs' connections, one per QP in order
	peerQPN  []uint32         // server: the peer's QP of each of them
}

// cmMinRNRTimer is what perftest's server sets on its RC test QPs after
// rdma_accept (MIN_RNR_TIMER; ib_cm leaves 0 at RTR).
const cmMinRNRTimer = 12

// cmRetries and cmRetryDelay: a REJ (the server not listening yet) is retried,
// as perftest's rdma_cm_client_connection does 10 times, 100 ms apart; xroce
// tries for 5 s: a slow server (rdma_rxe in an emulated guest) can take more
// than a second between its hand-shake and its rdma_listen.
const (
	cmRetries    = 50
	cmRetryDelay = 100 * time.Millisecond
)

// icmpWait is how long a REQ waits once the server's host has answered one with
// ICMP port unreachable (dial).
const icmpWait = 1500 * time.Millisecond

// cmStepLimit bounds each CM connection's wait for its peer (the REP, a REQ of
// the test QPs' connections).
const cmStepLimit = 30 * time.Second

// cmConnect starts the device's connection manager and makes the comm
// connection: the server listens on -p and accepts one (then closes that
// listener and listens again for the test QPs, as perftest's server does), the
// client dials it.
func (c *conn) cmConnect(ctx context.Context) (*cmConns, error) {
	eng, ok := c.env.prov.(*engine)
	if !ok {
		return nil, errors.New("-R needs xroce's engine: the tools' RDMA CM is transport/rdmacm")
	}
	svc, err := rdmacm.Start(eng.dev, rdmacm.Options{})
	if err != nil {
		return nil, fmt.Errorf("-R: %w", err)
	}
	// Ctrl-C and SIGTERM disconnect every connection (DREQs) before the link goes,
	// so the peer ends at once instead of after its retries.
	closeSvc := atExit(func() { svc.Close() })
	cm := &cmConns{c: c, svc: svc, closeSvc: closeSvc}
	c.cm = cm
	ok = false
	defer func() {
		if !ok {
			cm.close()
		}
	}()
	if cm.ch, err = newCMChannel(eng); err != nil {
		return nil, err
	}
	// perftest's comm connection: its params' verb is SEND, so no responder
	// resources; retry and RNR retry 7.
	param := rdmacm.Param{RetryCount: 7, RNRRetryCount: 7}
	if c.client {
		if cm.dst, err = cmAddr(c.o.server, c.o.port); err != nil {
			return nil, err
		}
		// rdma_resolve_addr: the next hop answers ARP or neighbour discovery, or
		// nothing is there to send the REQs to.
		if _, err := svc.ResolveAddr(c.env.gid.GID.Addr(), cm.dst.Addr()); errors.Is(err, transport.ErrNoRoute) {
			return nil, fmt.Errorf("-R: no route to %v, check the server's address: %w", cm.dst.Addr(), err)
		} else if err != nil {
			return nil, fmt.Errorf("-R: nothing answers at %v, check the server's address: %w", cm.dst.Addr(), err)
		}
		if cm.ch.conn, err = cm.dial(ctx, cm.ch.qp, param); err != nil {
			return nil, err
		}
	} else {
		l, err := svc.Listen(uint16(c.o.port), 1)
		if err != nil {
			return nil, fmt.Errorf("-R: listening on RDMA CM port %d: %w", c.o.port, err)
		}
		if c.verbose() {
			fmt.Fprintf(c.o.out, "\n************************************\n* Waiting for client to connect... *\n************************************\n")
		}
		req, err := l.Accept(ctx)
		if err == nil {
			cm.ch.conn, err = req.Accept(cm.ch.qp, param)
		}
		l.Close()
		if err != nil {
			return nil, fmt.Errorf("-R: accepting the exchange's connection: %w", err)
		}
		// The test QPs' connections come to the same port once the exchange
		// reaches them: listen now, so that none finds the port closed.
		if cm.l, err = svc.Listen(uint16(c.o.port), len(c.qps)); err != nil {
			return nil, fmt.Errorf("-R: listening on RDMA CM port %d for the test QPs: %w", c.o.port, err)
		}
	}
	ok = true
	return cm, nil
}

// cmAddr resolves the client's server argument to its RDMA CM address (perftest
// resolves it as an IPv4 host name).
func cmAddr(server string, port int) (netip.AddrPort, error) {
	server = strings.TrimSuffix(strings.TrimPrefix(server, "["), "]")
	a, err := netip.ParseAddr(server)
	if err != nil {
		ips, lerr := net.LookupIP(server)
		if lerr != nil || len(ips) == 0 {
			return netip.AddrPort{}, fmt.Errorf("-R: %q is not an address, and it does not resolve: %v", server, lerr)
		}
		a, _ = netip.AddrFromSlice(ips[0])
		for _, ip := range ips {
			if ip4 := ip.To4(); ip4 != nil {
				a, _ = netip.AddrFromSlice(ip4)
				break
			}
		}
	}
	return netip.AddrPortFrom(a.Unmap().WithZone(""), uint16(port)), nil
}

// dataParam is the test QPs' conn_param, as perftest's rdma_cm_route_handler and
// rdma_cm_connection_request_handler set it: the outstanding READs/atomics as
// both responder resources and initiator depth (READ and atomic tests), retry
// count 7 and the RNR retry count equal to it.
func (cm *cmConns) dataParam() rdmacm.Param {
	p := rdmacm.Param{RetryCount: 7, RNRRetryCount: 7}
	if cm.c.t.readsOrAtomics() {
		p.ResponderResources = uint8(cm.c.local[0].OutReads)
		p.InitiatorDepth = p.ResponderResources
	}
	return p
}

// connectData makes one connection per test QP, in order: the client dials each,
// the server accepts as many on the listener cmConnect left open and sets
// min_rnr_timer on each QP, as perftest's server does.
func (cm *cmConns) connectData(ctx context.Context) error {
	p := cm.dataParam()
	for i, q := range cm.c.qps {
		qp, ok := q.(*transport.QueuePair)
		if !ok {
			return errors.New("-R needs xroce's engine: the tools' RDMA CM is transport/rdmacm")
		}
		if cm.c.client {
			var conn *rdmacm.Conn
			var err error
			if i == 0 {
				conn, err = cm.dial(ctx, qp, p)
			} else {
				conn, err = cm.dialMore(ctx, qp, p, i)
			}
			if err != nil {
				return fmt.Errorf("-R: QP %d of %d: %w", i+1, len(cm.c.qps), err)
			}
			cm.data = append(cm.data, conn)
			continue
		}
		req, err := cm.acceptData(ctx, i)
		if err != nil {
			return err
		}
		conn, err := req.Accept(qp, p)
		if err != nil {
			return fmt.Errorf("-R: accepting the connection of test QP %d: %w", i+1, err)
		}
		cm.data = append(cm.data, conn)
		cm.peerQPN = append(cm.peerQPN, req.RemoteQPN)
		if err := qp.Modify(transport.QPAttr{MinRNRTimer: cmMinRNRTimer}, transport.QP_MIN_RNR_TIMER); err != nil {
			return fmt.Errorf("-R: setting min_rnr_timer on test QP %d: %w", i+1, err)
		}
	}
	if cm.l != nil {
		cm.l.Close()
		cm.l = nil
	}
	return nil
}

// dialMore connects the test QP after the first i: the server took i already,
// so a REJ means it wanted no more, without a retry.
func (cm *cmConns) dialMore(ctx context.Context, qp *transport.QueuePair, p rdmacm.Param, i int) (*rdmacm.Conn, error) {
	conn, _, err := cm.dialOnce(ctx, qp, p, cmStepLimit, nil)
	// No listener (reason 8), or the listener closed with this REQ queued
	// (ib_cm's destroy of a REQ_RCVD id: consumer defined, 28).
	var rej *rdmacm.RejectError
	if errors.As(err, &rej) {
		return nil, fmt.Errorf("the server accepted %d of this side's %d test QP connections and then stopped listening (REJ reason %d): it runs with -q %d; give both sides the same -q", i, len(cm.c.qps), rej.Reason, i)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("no answer from %v within %v: %w", cm.dst, cmStepLimit, err)
	}
	return conn, err
}

// acceptData waits for the connection of test QP i+1 and looks, meanwhile, at the
// exchange's connection: the client's key message there means it connected all its
// test QPs, i of them.
func (cm *cmConns) acceptData(ctx context.Context, i int) (*rdmacm.Request, error) {
	end := time.Now().Add(cmStepLimit)
	for {
		actx, cancel := context.WithTimeout(ctx, min(cmPeek, time.Until(end)))
		req, err := cm.l.Accept(actx)
		cancel()
		if err == nil {
			return req, nil
		}
		moved, perr := cm.ch.Pending()
		if perr != nil { // the client went away
			return nil, fmt.Errorf("-R: waiting for the connection of test QP %d of %d: %w", i+1, len(cm.c.qps), perr)
		}
		if moved {
			return nil, fmt.Errorf("-R: the client connected %d of this side's %d test QPs and went on with the exchange: it runs with -q %d; give both sides the same -q", i, len(cm.c.qps), i)
		}
		if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil || !time.Now().Before(end) {
			return nil, fmt.Errorf("-R: no connection for test QP %d of %d within %v: does the peer run with -R and the same -q? %w", i+1, len(cm.c.qps), cmStepLimit, err)
		}
	}
}

// cmPeek is how often acceptData looks at the exchange's connection.
const cmPeek = 200 * time.Millisecond

// dial connects qp to the server, trying again after a REJ as perftest's client
// does (the server may not listen yet). A host with no RoCE endpoint answers the
// REQs with ICMP port unreachable (watchPortUnreachable), which is taken as a
// REJ too instead of waiting for the REQ's timeouts; the kernel sends a few such
// answers, then one a second (icmp_ratelimit), so after the first one each REQ
// waits only icmpWait.
func (cm *cmConns) dial(ctx context.Context, qp *transport.QueuePair, p rdmacm.Param) (*rdmacm.Conn, error) {
	wctx, unwatch := context.WithCancel(ctx)
	defer unwatch()
	hit := make(chan struct{}, 1)
	watchPortUnreachable(wctx, cm.dst.Addr(), hit)
	var firstICMP time.Time
	for i := 1; ; i++ {
		limit := cmStepLimit
		if !firstICMP.IsZero() {
			limit = icmpWait
		}
		conn, unreachable, err := cm.dialOnce(ctx, qp, p, limit, hit)
		if unreachable && firstICMP.IsZero() {
			firstICMP = time.Now()
		}
		noEndpoint := err != nil && !firstICMP.IsZero() && (unreachable || errors.Is(err, context.DeadlineExceeded))
		switch {
		case err == nil:
			return conn, nil
		case noEndpoint && time.Since(firstICMP) < cmRetries*cmRetryDelay,
			errors.Is(err, rdmacm.ErrRejected) && i < cmRetries:
			time.Sleep(cmRetryDelay)
			continue
		case noEndpoint:
			return nil, fmt.Errorf("-R: %w: start the server there (with -R), or check its address", errNoRoCEEndpoint(cm.dst.Addr(), time.Since(firstICMP).Round(100*time.Millisecond)))
		case errors.Is(err, context.DeadlineExceeded):
			return nil, fmt.Errorf("no answer from %v within %v: is the server running, with -R? %w", cm.dst, cmStepLimit, err)
		}
		var rej *rdmacm.RejectError
		if errors.As(err, &rej) && rej.Reason == cmwire.RejInvalidServiceID {
			return nil, fmt.Errorf("%w; so were all REQs for %v: the server is not running, listens on another -p, or runs without -R (give both sides -R, or neither)", err, time.Duration(i)*cmRetryDelay)
		}
		return nil, err
	}
}

// dialOnce is one REQ of dial: it waits up to limit for the connection, and
// gives up at once when hit reports the server's host unreachable (unreachable).
func (cm *cmConns) dialOnce(ctx context.Context, qp *transport.QueuePair, p rdmacm.Param, limit time.Duration, hit <-chan struct{}) (conn *rdmacm.Conn, unreachable bool, err error) {
	o := rdmacm.DialOptions{Src: cm.c.env.gid.GID.Addr(), TrafficClass: uint8(cm.c.o.tclass)}
	dctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	var hitNow atomic.Bool
	go func() {
		select {
		case <-hit:
			hitNow.Store(true)
			cancel()
		case <-dctx.Done():
		}
	}()
	conn, err = cm.svc.Dial(dctx, qp, cm.dst, p, o)
	return conn, hitNow.Load(), err
}

// pairRemote orders the peer's key messages by the test QPs they are connected
// to: a server takes the connections in the order their REQs come, which need not
// be the order of the client's QPs.
func (c *conn) pairRemote(remote []oob.Dest) []oob.Dest {
	if c.cm == nil || len(c.cm.peerQPN) != len(remote) {
		return remote
	}
	out := make([]oob.Dest, len(remote))
	for i, qpn := range c.cm.peerQPN {
		out[i] = remote[i]
		for _, d := range remote {
			if d.QPN == qpn {
				out[i] = d
			}
		}
	}
	return out
}

// close ends the run's connections as perftest's destroy_ctx does: the test QPs'
// first (a DREQ each; the peer's cross them), then the comm connection, then
// the connection manager (which lets those last messages leave).
func (cm *cmConns) close() {
	for _, d := range cm.data {
		_ = d.Disconnect()
	}
	if cm.l != nil {
		cm.l.Close()
	}
	if cm.ch != nil && cm.ch.conn != nil {
		_ = cm.ch.conn.Disconnect()
	}
	cm.closeSvc()
}

// cmChannel is the comm connection's QP as an oob.Channel: each message one
// SEND, cmRecvs receives of cmSlot bytes kept posted (perftest keeps one of 56).
type cmChannel struct {
	conn  *rdmacm.Conn
	qp    *transport.QueuePair
	cq    *transport.CompletionQueue
	mr    *transport.MemoryRegion
	buf   []byte
	inbox [][]byte // messages received, not yet read
	sent  int      // SENDs completed, not yet waited for
	wcs   []transport.WorkCompletion
}

const (
	cmRecvs = 4
	cmSlot  = 512 // larger than any message of perftest's exchange (a newer perftest's negotiation: 320)
)

// newCMChannel creates the comm QP, in INIT with its receives posted (they
// must be there before the peer can send).
func newCMChannel(e *engine) (*cmChannel, error) {
	ch := &cmChannel{cq: e.dev.CreateCQ(4 * cmRecvs), buf: make([]byte, (cmRecvs+1)*cmSlot), wcs: make([]transport.WorkCompletion, 8)}
	var err error
	if ch.mr, err = e.pd.RegMR(ch.buf, transport.AccessLocalWrite); err != nil {
		return nil, err
	}
	ch.qp, err = e.pd.CreateQP(transport.QPInitAttr{SendCQ: ch.cq, RecvCQ: ch.cq,
		Cap: transport.QPCap{MaxSendWR: 2, MaxRecvWR: cmRecvs, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return nil, err
	}
	if err := transport.BringUp(ch.qp, transport.QPS_RESET, transport.QPS_INIT, transport.ConnectParams{Access: transport.AccessRemoteWrite}); err != nil {
		return nil, err
	}
	for i := range cmRecvs {
		if err := ch.postRecv(i); err != nil {
			return nil, err
		}
	}
	return ch, nil
}

func (ch *cmChannel) postRecv(slot int) error {
	_, err := ch.qp.PostRecv(transport.RecvWR{WRID: uint64(slot),
		SGList: []transport.SGE{{Addr: ch.mr.Addr() + uint64(slot*cmSlot), Length: cmSlot, LKey: ch.mr.LKey()}}})
	return err
}

// Send posts msg as one SEND and waits for its completion.
func (ch *cmChannel) Send(msg []byte, deadline time.Time) error {
	if len(msg) > cmSlot {
		return fmt.Errorf("a %d-byte message: the exchange's messages are at most %d bytes", len(msg), cmSlot)
	}
	off := cmRecvs * cmSlot
	copy(ch.buf[off:], msg)
	_, err := ch.qp.PostSend(transport.SendWR{WRID: cmRecvs, Opcode: transport.WR_SEND, Flags: transport.SendSignaled,
		SGList: []transport.SGE{{Addr: ch.mr.Addr() + uint64(off), Length: uint32(len(msg)), LKey: ch.mr.LKey()}}})
	if err != nil {
		return err
	}
	for ch.sent == 0 {
		if err := ch.wait(deadline); err != nil {
			return err
		}
	}
	ch.sent--
	return nil
}

// Recv returns the next message.
func (ch *cmChannel) Recv(deadline time.Time) ([]byte, error) {
	for len(ch.inbox) == 0 {
		if err := ch.wait(deadline); err != nil {
			return nil, err
		}
	}
	m := ch.inbox[0]
	ch.inbox = ch.inbox[1:]
	return m, nil
}

// Pending looks for a message without waiting.
func (ch *cmChannel) Pending() (bool, error) {
	if err := ch.take(ch.cq.Poll(ch.wcs)); err != nil {
		return false, err
	}
	if len(ch.inbox) > 0 {
		return true, nil
	}
	return false, ch.ended()
}

func (ch *cmChannel) String() string { return ch.conn.RemoteAddr().String() }

// ended returns an error wrapping oob.ErrPeerClosed once the connection ended.
func (ch *cmChannel) ended() error {
	select {
	case <-ch.conn.Done():
		return fmt.Errorf("%w: %v", oob.ErrPeerClosed, ch.conn.Err())
	default:
		return nil
	}
}

// wait handles the next completions, waiting up to deadline (zero: none) for
// them; the connection's end is an error.
func (ch *cmChannel) wait(deadline time.Time) error {
	for {
		if n := ch.cq.Poll(ch.wcs); n > 0 {
			return ch.take(n)
		}
		if err := ch.ended(); err != nil {
			return err
		}
		slice := 100 * time.Millisecond
		if !deadline.IsZero() {
			left := time.Until(deadline)
			if left <= 0 {
				return os.ErrDeadlineExceeded
			}
			slice = min(slice, left)
		}
		ctx, cancel := context.WithTimeout(context.Background(), slice)
		_ = ch.cq.Wait(ctx)
		cancel()
	}
}

// take handles n completions in ch.wcs: a receive's message goes to the inbox
// and its slot is posted again.
func (ch *cmChannel) take(n int) error {
	for _, wc := range ch.wcs[:n] {
		if wc.Status != transport.WC_SUCCESS {
			if err := ch.ended(); err != nil {
				return err
			}
			return fmt.Errorf("the exchange's QP: completion %v (%v)", wc.Status, wc.Opcode)
		}
		if wc.Opcode != transport.WC_RECV {
			ch.sent++
			continue
		}
		slot := int(wc.WRID)
		ch.inbox = append(ch.inbox, append([]byte(nil), ch.buf[slot*cmSlot:slot*cmSlot+int(wc.ByteLen)]...))
		if err := ch.postRecv(slot); err != nil {
			return err
		}
	}
	return nil
}
