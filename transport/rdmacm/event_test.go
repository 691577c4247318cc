package rdmacm_test

import (
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/transport/rdmacm"
)

// events records what a Service's OnEvent is told.
type events struct {
	mu  sync.Mutex
	got []rdmacm.Event
}

func (e *events) add(ev rdmacm.Event) {
	e.mu.Lock()
	e.got = append(e.got, ev)
	e.mu.Unlock()
}

// wait returns the events once n arrived (or after 3 s).
func (e *events) wait(n int) []rdmacm.Event {
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		e.mu.Lock()
		if len(e.got) >= n {
			defer e.mu.Unlock()
			return append([]rdmacm.Event(nil), e.got...)
		}
		e.mu.Unlock()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]rdmacm.Event(nil), e.got...)
}

func types(evs []rdmacm.Event) []rdmacm.EventType {
	var t []rdmacm.EventType
	for _, e := range evs {
		t = append(t, e.Type)
	}
	return t
}

func sameTypes(a []rdmacm.EventType, b ...rdmacm.EventType) bool { return slices.Equal(a, b) }

// TestEvents: with OnEvent, a connection's life is told as rdma_cm tells it: the
// server gets CONNECT_REQUEST (no Listener.Accept), both sides ESTABLISHED, one
// DISCONNECTED each (the side that disconnects when its DREQ is answered), then
// TIMEWAIT_EXIT; a rejected connect is REJECTED with the REJ's reason.
func TestEvents(t *testing.T) {
	var ea, eb events
	endA, endB := transport.NewPipe(
		transport.PipeConfig{MAC: [6]byte{2, 0, 0, 0, 9, 1}, Addrs: []netip.Addr{ipA}},
		transport.PipeConfig{MAC: [6]byte{2, 0, 0, 0, 9, 2}, Addrs: []netip.Addr{ipB}})
	a := openNode(t, endA, rdmacm.Options{PacketLifeTime: 10, CMResponseTimeout: 12, MaxCMRetries: 3, OnEvent: ea.add})
	b := openNode(t, endB, rdmacm.Options{PacketLifeTime: 10, CMResponseTimeout: 12, MaxCMRetries: 3, OnEvent: eb.add})
	if _, err := b.svc.Listen(18515, 0); err != nil {
		t.Fatal(err)
	}
	ca, err := a.svc.Connect(a.newQP(t), netip.AddrPortFrom(ipB, 18515), rdmacm.Param{RetryCount: 7}, rdmacm.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := eb.wait(1)
	if !sameTypes(types(got), rdmacm.EventConnectRequest) || got[0].Request == nil || got[0].Listener == nil {
		t.Fatalf("server events %v", got)
	}
	cb, err := got[0].Request.Accept(b.newQP(t), rdmacm.Param{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.WaitEstablished(ctx5(t)); err != nil {
		t.Fatal(err)
	}
	if err := cb.WaitEstablished(ctx5(t)); err != nil {
		t.Fatal(err)
	}
	ca.Disconnect()
	eb.wait(3) // the server's DISCONNECTED: the DREQ came
	cb.Disconnect()
	ga := ea.wait(3)
	if !sameTypes(types(ga), rdmacm.EventEstablished, rdmacm.EventDisconnected, rdmacm.EventTimeWaitExit) || ga[0].Conn != ca {
		t.Errorf("client events %v", types(ga))
	}
	gb := eb.wait(4)
	if !sameTypes(types(gb), rdmacm.EventConnectRequest, rdmacm.EventEstablished, rdmacm.EventDisconnected, rdmacm.EventTimeWaitExit) || gb[1].Conn != cb {
		t.Errorf("server events %v", types(gb))
	}

	// A REQ for an unlistened port: REJECTED with reason 8.
	if _, err := a.svc.Connect(a.newQP(t), netip.AddrPortFrom(ipB, 9), rdmacm.Param{}, rdmacm.DialOptions{}); err != nil {
		t.Fatal(err)
	}
	ga = ea.wait(4)
	if len(ga) != 4 || ga[3].Type != rdmacm.EventRejected || ga[3].Err.(*rdmacm.RejectError).Reason != 8 {
		t.Errorf("client events %v", types(ga))
	}
}
