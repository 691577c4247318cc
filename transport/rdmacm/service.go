package rdmacm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/transport/ibcm"
)

// Options tune a Service; the zero value is rdma_cm's behaviour on RoCE.
type Options struct {
	// PacketLifeTime (5-bit, 4.096 µs × 2^value) is the path's packet lifetime;
	// zero picks ibcm.DefaultPacketLifeTime (18, ≈1.07 s), as rdma_cm on RoCE does.
	PacketLifeTime uint8
	// CMResponseTimeout (5-bit) is what this side promises in its REQs' CM Response
	// Timeouts; zero picks CMResponseTimeout (20, ≈4.3 s).
	CMResponseTimeout uint8
	// MaxCMRetries is the REQ's Max CM Retries (4 bits); zero picks MaxCMRetries.
	MaxCMRetries uint8
	// OnEvent, when set, is told every connection event, and takes the listeners'
	// connection requests instead of Listener.Accept, as an rdma_cm event channel
	// does. It is called with the Service locked, from the Service's goroutine or
	// the calling one: it must not block and must not call the Service.
	OnEvent func(Event)
}

// Stats counts what the Service dropped, beside its Manager's counters.
type Stats struct {
	ibcm.Stats
	BadMADs   uint64 // receives on QP1 that were not a whole MAD with a GRH
	SendDrops uint64 // MADs not sent: no send slot free or no path to the peer
}

// Service is the connection manager of one device. Create it with Start, end it
// with Close.
type Service struct {
	dev  *transport.Device
	opts Options

	mu        sync.Mutex
	g         *gsi
	mgr       *ibcm.Manager
	listeners map[uint64][]*Listener // by Service ID: one of every address, or one each of several addresses
	conns     map[*ibcm.Conn]*Conn
	ports     map[uint64]bool // ports bound, as Service IDs (port space and port): listeners, active connections, reservations
	reserved  map[uint64]bool // ports Reserve bound for a Listen to come
	wake      context.CancelFunc
	closed    bool
	stats     Stats
	in        []received

	stop context.CancelFunc
	done chan struct{}
}

// Start creates QP1 on dev (dev's engine must run, or run later: nothing is sent
// before a call asks for it) and the goroutine that serves it. It fails when dev
// already has a QP1, i.e. another Service.
func Start(dev *transport.Device, opts Options) (*Service, error) {
	if opts.PacketLifeTime == 0 {
		opts.PacketLifeTime = ibcm.DefaultPacketLifeTime
	}
	if opts.CMResponseTimeout == 0 {
		opts.CMResponseTimeout = CMResponseTimeout
	}
	if opts.MaxCMRetries == 0 {
		opts.MaxCMRetries = MaxCMRetries
	}
	g, err := openGSI(dev)
	if err != nil {
		return nil, err
	}
	s := &Service{dev: dev, opts: opts, g: g, listeners: map[uint64][]*Listener{}, conns: map[*ibcm.Conn]*Conn{},
		ports: map[uint64]bool{}, reserved: map[uint64]bool{}, done: make(chan struct{})}
	s.mgr = ibcm.New(ibcm.Config{LocalCAGUID: caGUID(dev.GIDTable()), HiTID: rand.Uint32(),
		FirstCommID: rand.Uint32(), PacketLifeTime: opts.PacketLifeTime})
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go s.run(ctx)
	return s, nil
}

// Stats returns the counters.
func (s *Service) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Stats = s.mgr.Stats()
	return st
}

// Close ends every connection as Conn.Close does, closes every Listener, waits up
// to a second for those last MADs to leave, and destroys QP1.
func (s *Service) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	now := time.Now()
	for _, ls := range s.listeners {
		for _, l := range slices.Clone(ls) {
			l.closeLocked(now)
		}
	}
	for _, c := range s.conns {
		c.closeLocked(now, ErrClosed)
	}
	s.settle(now)
	for _, c := range s.conns { // in TimeWait, or waiting for a DREP that will not come now
		c.setDisconnected()
	}
	s.mu.Unlock()
	s.stop()
	<-s.done
	s.g.drain(time.Second)
	return s.g.qp.Destroy()
}

// run serves QP1 and the CM timers until ctx ends.
func (s *Service) run(ctx context.Context) {
	defer close(s.done)
	for ctx.Err() == nil {
		s.wait(ctx)
		s.mu.Lock()
		var bad int
		s.in, bad = s.g.poll(s.in[:0])
		s.stats.BadMADs += uint64(bad)
		now := time.Now()
		for _, r := range s.in {
			s.mgr.Receive(now, r.from, r.mad)
		}
		s.mgr.Advance(now)
		s.settle(now)
		s.mu.Unlock()
	}
}

// wait blocks until QP1 completes something, the next CM timer is due, or a call
// changed the timers (kick).
func (s *Service) wait(ctx context.Context) {
	s.mu.Lock()
	var wctx context.Context
	var cancel context.CancelFunc
	if t, ok := s.mgr.NextDeadline(); ok {
		wctx, cancel = context.WithDeadline(ctx, t)
	} else {
		wctx, cancel = context.WithCancel(ctx)
	}
	s.wake = cancel
	s.mu.Unlock()
	_ = s.g.cq.Wait(wctx)
	cancel()
}

// kick makes the goroutine look at the timers again; s.mu is held.
func (s *Service) kick() {
	if s.wake != nil {
		s.wake()
	}
}

// settle sends what the Manager has to send and acts on its events, until both are
// empty (acting may send more); s.mu is held.
func (s *Service) settle(now time.Time) {
	for {
		sends, events := s.mgr.Sends(), s.mgr.Events()
		if len(sends) == 0 && len(events) == 0 {
			return
		}
		for _, m := range sends {
			if !s.g.send(m.To, m.MAD) {
				s.stats.SendDrops++
			}
		}
		for _, e := range events {
			s.handle(now, e)
		}
	}
}

// handle acts on one Manager event; s.mu is held.
func (s *Service) handle(now time.Time, e ibcm.Event) {
	switch e.Type {
	case ibcm.EventREQ:
		s.onREQ(now, e.Conn, e.REQ)
		return
	case ibcm.EventSIDRREQ:
		s.onSIDRREQ(e.Conn, e.SIDRREQ)
		return
	}
	c := s.conns[e.Conn]
	if c == nil {
		return
	}
	switch e.Type {
	case ibcm.EventREP:
		c.onREP(now, e.REP)
	case ibcm.EventSIDRREP:
		c.onSIDRREP(e.SIDRREP)
	case ibcm.EventEstablished:
		c.setEstablished()
	case ibcm.EventRejected:
		err := rejectError(c, e.REJ)
		c.report(EventRejected, err)
		c.end(err)
	case ibcm.EventTimeout:
		err := fmt.Errorf("rdmacm: %v did not answer our %s through %d retries: %w", c.remote, c.waitingFor(), s.opts.MaxCMRetries, ErrUnreachable)
		c.report(EventUnreachable, err)
		c.end(err)
	case ibcm.EventDREQ:
		c.report(EventDisconnected, nil)
		c.end(fmt.Errorf("rdmacm: %v disconnected: %w", c.remote, ErrDisconnected))
	case ibcm.EventTimeWait:
		c.report(EventDisconnected, nil)
		c.end(fmt.Errorf("rdmacm: connection with %v ended: %w", c.remote, ErrDisconnected))
		c.setDisconnected()
	case ibcm.EventTimeWaitExit:
		c.report(EventTimeWaitExit, nil)
	}
	if c.id.State() == ibcm.StateIdle { // a REJ, a timeout or the TimeWait's end
		s.forget(c)
	}
}

// forget drops c and frees its port; s.mu is held.
func (s *Service) forget(c *Conn) {
	c.setDisconnected()
	delete(s.conns, c.id)
	if !c.id.Passive() {
		delete(s.ports, cm.IPServiceID(c.ps, c.local.Port()))
	}
}

// Ephemeral ports for active connections, as Linux's ip_local_port_range.
const (
	ephemeralLow  = 32768
	ephemeralHigh = 60999
)

// allocPort returns a free port of port space ps and binds it; s.mu is held.
func (s *Service) allocPort(ps cm.PortSpace) (uint16, error) {
	start := ephemeralLow + rand.IntN(ephemeralHigh-ephemeralLow+1)
	for i := range ephemeralHigh - ephemeralLow + 1 {
		p := uint16(ephemeralLow + (start-ephemeralLow+i)%(ephemeralHigh-ephemeralLow+1))
		if id := cm.IPServiceID(ps, p); !s.ports[id] {
			s.ports[id] = true
			return p, nil
		}
	}
	return 0, fmt.Errorf("rdmacm: every port from %d to %d is in use: %w", ephemeralLow, ephemeralHigh, ErrPortInUse)
}

// psn returns a random 24-bit starting PSN, as rdma_cm draws one per connection
// (cma.c: get_random_u32() & 0xffffff).
func psn() uint32 { return rand.Uint32() & 0xFFFFFF }

// Conns returns how many connections the Service holds (those in TimeWait
// included) and how many ports are bound.
func (s *Service) Conns() (conns, ports int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns), len(s.ports)
}
