package daemon

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/transport/rdmacm"
)

// cmDevice is the connection manager of one device, shared by its sessions: one
// rdmacm.Service (the device's QP1) and every session's rdma_cm_ids by handle.
// Lock order: a session's call takes mu, then the Service's lock; the Service's
// events are queued (queue) and delivered by a goroutine that takes mu alone.
type cmDevice struct {
	svc      *rdmacm.Service
	stopICMP context.CancelFunc

	mu         sync.Mutex
	next       uint32
	ids        map[uint32]*cmID
	byConn     map[*rdmacm.Conn]*cmID
	byListener map[*rdmacm.Listener]*cmID

	qmu   sync.Mutex
	queue []rdmacm.Event
	sig   chan struct{}
}

// cmID is one rdma_cm_id.
type cmID struct {
	handle        uint32
	owner         *session
	ch            *chanObj // the library's event channel
	cookie        uint64
	bound         netip.AddrPort // rdma_bind_addr's; the port listened on
	reserved      uint16         // a port bound as 0, reserved until rdma_listen
	ps            cm.PortSpace   // RDMA_PS_TCP or RDMA_PS_UDP
	local, remote netip.AddrPort
	passive       bool // made for a connection request
	listener      *rdmacm.Listener
	req           *rdmacm.Request // a connection request not yet accepted or rejected
	conn          *rdmacm.Conn
}

var cmDevices sync.Map // *transport.Device → *cmDevice

// cmFor returns dev's connection manager, starting it (QP1) and its ICMP watch
// (logging with logf) on first use.
func cmFor(dev *transport.Device, logf func(string, ...any)) (*cmDevice, error) {
	if c, ok := cmDevices.Load(dev); ok {
		return c.(*cmDevice), nil
	}
	// Handles start at random: an application's library reads every device's
	// events from one socket and tells the ids a daemon made (a request's) by
	// handle, so two devices' handles must not meet (a wildcard listener's
	// requests come from each device).
	c := &cmDevice{ids: map[uint32]*cmID{}, byConn: map[*rdmacm.Conn]*cmID{},
		byListener: map[*rdmacm.Listener]*cmID{}, sig: make(chan struct{}, 1), next: rand.Uint32()}
	svc, err := rdmacm.Start(dev, rdmacm.Options{OnEvent: c.enqueue})
	if err != nil {
		return nil, err
	}
	c.svc = svc
	if prev, loaded := cmDevices.LoadOrStore(dev, c); loaded {
		svc.Close()
		return prev.(*cmDevice), nil
	}
	go c.deliver()
	ctx, cancel := context.WithCancel(context.Background())
	c.stopICMP = cancel
	watchICMP(ctx, svc, logf)
	go watchRefused(ctx, svc, logf)
	return c, nil
}

// closeCM ends dev's connection manager: its connections are told (DREQ, REJ) and
// QP1 goes.
func closeCM(dev *transport.Device) {
	if v, ok := cmDevices.LoadAndDelete(dev); ok {
		v.(*cmDevice).stopICMP()
		v.(*cmDevice).svc.Close()
	}
}

// enqueue takes an event from the Service (its lock held: no blocking here).
func (c *cmDevice) enqueue(e rdmacm.Event) {
	c.qmu.Lock()
	c.queue = append(c.queue, e)
	c.qmu.Unlock()
	select {
	case c.sig <- struct{}{}:
	default:
	}
}

// deliver writes the queued events to their ids' channels, for the device's life.
func (c *cmDevice) deliver() {
	for range c.sig {
		c.qmu.Lock()
		q := c.queue
		c.queue = nil
		c.qmu.Unlock()
		for _, e := range q {
			c.mu.Lock()
			c.deliverOne(e)
			c.mu.Unlock()
		}
	}
}

// deliverOne sends one event; c.mu is held.
func (c *cmDevice) deliverOne(e rdmacm.Event) {
	if e.Type == rdmacm.EventConnectRequest {
		c.onRequest(e)
		return
	}
	id := c.byConn[e.Conn]
	if id == nil {
		return // its id was destroyed
	}
	m := CMEventMsg{Cookie: id.cookie, Handle: id.handle, Event: uint32(e.Type), Local: cmAddr(id.local), Remote: cmAddr(id.remote)}
	switch e.Type {
	case rdmacm.EventEstablished, rdmacm.EventConnectResponse:
		if !id.passive { // the REP's (or SIDR_REP's) private data and QPN; a passive side gets none
			qpn := e.Conn.RemoteQPN()
			if id.ps == rdmaPSUDP {
				qpn = e.Conn.UD().QPN
			}
			putParam(&m.Param, e.Conn.PeerParam(), qpn)
			m.QKey = e.Conn.UD().QKey
		}
		m.Local = cmAddr(e.Conn.LocalAddr())
	case rdmacm.EventRejected:
		var rej *rdmacm.RejectError
		if errors.As(e.Err, &rej) {
			m.Status = int32(rej.Reason)
			putParam(&m.Param, rdmacm.Param{PrivateData: rej.PrivateData}, 0)
		}
	case rdmacm.EventUnreachable:
		m.Status = -int32(unix.ETIMEDOUT)
		var ie *icmpError
		if errors.As(e.Err, &ie) { // ended by what ICMP said (icmpWatch)
			m.Status = -int32(unix.EHOSTUNREACH)
		}
		var se *rdmacm.SIDRError
		if errors.As(e.Err, &se) { // a SIDR_REP's status, as cma_sidr_rep_handler reports it
			m.Status = int32(se.Status)
		}
	case rdmacm.EventConnectError:
		m.Status = -int32(unix.EINVAL)
	case rdmacm.EventTimeWaitExit:
		delete(c.byConn, e.Conn)
		id.conn = nil
	}
	id.ch.write(encodeEvent(&m))
}

// onRequest makes an id of a connection request and tells the listening id's
// channel (RDMA_CM_EVENT_CONNECT_REQUEST); c.mu is held.
func (c *cmDevice) onRequest(e rdmacm.Event) {
	lid := c.byListener[e.Listener]
	r := e.Request
	if lid == nil { // its id was destroyed (rdmacm picked the listener by address)
		_ = r.Reject(nil)
		return
	}
	id := &cmID{handle: c.newHandle(), owner: lid.owner, ch: lid.ch, local: r.Local, remote: r.Remote, req: r, conn: e.Conn, passive: true, ps: lid.ps}
	c.ids[id.handle] = id
	c.byConn[e.Conn] = id
	m := CMEventMsg{Cookie: lid.cookie, Handle: id.handle, Event: uint32(e.Type), Local: cmAddr(r.Local), Remote: cmAddr(r.Remote)}
	putParam(&m.Param, r.Param, r.RemoteQPN)
	id.ch.write(encodeEvent(&m))
}

func (c *cmDevice) newHandle() uint32 {
	for {
		c.next++
		if c.next != 0 && c.ids[c.next] == nil {
			return c.next
		}
	}
}

// event writes an event the session itself makes (ADDR_RESOLVED, ROUTE_RESOLVED
// and their errors).
func (id *cmID) event(typ uint32, status int32) {
	m := CMEventMsg{Cookie: id.cookie, Handle: id.handle, Event: typ, Status: status, Local: cmAddr(id.local), Remote: cmAddr(id.remote)}
	id.ch.write(encodeEvent(&m))
}

// The rdma_cm event types the session makes (enum rdma_cm_event_type).
const (
	cmEventAddrResolved  = 0
	cmEventAddrError     = 1
	cmEventRouteResolved = 2
)

func encodeEvent(m *CMEventMsg) []byte {
	b, _ := binary.Append(nil, binary.LittleEndian, m)
	return b
}

// putParam writes p (and the peer's QPN) into a CMParam.
func putParam(dst *CMParam, p rdmacm.Param, qpn uint32) {
	*dst = CMParam{ResponderResources: p.ResponderResources, InitiatorDepth: p.InitiatorDepth,
		FlowControl: b2u(p.FlowControl), RetryCount: p.RetryCount, RNRRetryCount: p.RNRRetryCount, SRQ: b2u(p.SRQ),
		PrivateDataLen: uint8(copy(dst.PrivateData[:], p.PrivateData)), QPNum: qpn}
	copy(dst.PrivateData[:], p.PrivateData)
}

// param reads a CMParam of a request.
func (p *CMParam) param() rdmacm.Param {
	n := min(int(p.PrivateDataLen), len(p.PrivateData))
	return rdmacm.Param{PrivateData: append([]byte(nil), p.PrivateData[:n]...), ResponderResources: p.ResponderResources,
		InitiatorDepth: p.InitiatorDepth, FlowControl: p.FlowControl != 0, RetryCount: p.RetryCount,
		RNRRetryCount: p.RNRRetryCount, SRQ: p.SRQ != 0}
}

func b2u(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// cmAddr and addrPort convert between CMAddr and netip.
func cmAddr(a netip.AddrPort) CMAddr {
	var m CMAddr
	if !a.IsValid() {
		return m
	}
	m.Port = a.Port()
	if ip := a.Addr().Unmap(); ip.Is4() {
		m.Family = unix.AF_INET
		v := ip.As4()
		copy(m.Addr[:], v[:])
	} else {
		m.Family = unix.AF_INET6
		m.Addr = ip.As16()
	}
	return m
}

func (m *CMAddr) addrPort() (netip.AddrPort, bool) {
	switch m.Family {
	case unix.AF_INET:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(m.Addr[:4])), m.Port), true
	case unix.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16(m.Addr).Unmap(), m.Port), true
	case 0:
		return netip.AddrPort{}, true
	}
	return netip.AddrPort{}, false
}

// resolveRetry is how long rdma_resolve_addr waits before asking again for a
// neighbour that did not answer, within the application's timeout_ms.
const resolveRetry = 100 * time.Millisecond
