package rdmacm_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport/rdmacm"
)

// TestBadREQs: hostile or broken MADs on QP1 never reach a listener and never stop
// the Service: a REQ whose IP CM private data has IP version 5 gets a REJ with
// reason 28 (Consumer Reject, as ib_cm answers cma_req_handler's failure), one for
// a UC transport on RDMA_PS_TCP reason 9 (Invalid Transport Service Type); a MAD of
// another management class is dropped and counted, and so is a datagram that is no
// whole MAD. A good REQ afterwards still connects.
func TestBadREQs(t *testing.T) {
	a, b, endA, _ := newPair(t, pairConfig{opts: fastCM})
	l, err := b.svc.Listen(18515, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A REQ as a client sends it, to a port nobody listens on: its REJ ends Dial.
	if _, err := a.svc.Dial(ctx5(t), a.newQP(t), netip.AddrPortFrom(ipB, 9), rdmacm.Param{}, rdmacm.DialOptions{}); err == nil {
		t.Fatal("Dial to port 9 connected")
	}
	var tmpl roce.Packet
	for _, p := range a.tap.sent(t) {
		mad, err := cm.MADFromPacket(&p)
		if err != nil {
			continue
		}
		if h, _, err := cm.Decode(mad); err == nil && h.AttributeID == cm.AttrREQ {
			tmpl = p
			break
		}
	}
	_, msg, err := cm.Decode(tmpl.Payload)
	if err != nil {
		t.Fatal(err)
	}
	base := *msg.(*cm.REQ)
	base.ServiceID = cm.IPServiceID(cm.PortSpaceTCP, 18515)
	inject := func(payload []byte) {
		t.Helper()
		p := tmpl
		p.Payload = payload
		buf := make([]byte, 2048)
		n, err := p.Encode(buf)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := endA.Send([][]byte{buf[:n]}); err != nil {
			t.Fatal(err)
		}
	}
	injectREQ := func(id uint32, mutate func(*cm.REQ)) {
		req := base
		req.LocalCommID = id
		mutate(&req)
		mad := make([]byte, cm.MADLen)
		cm.Encode(mad, cm.CMHeader(uint64(id), cm.AttrREQ), &req)
		inject(mad)
	}
	rejFor := func(id uint32) *cm.REJ {
		t.Helper()
		for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
			_, ms, _ := b.tap.cmSent(t)
			for _, m := range ms {
				if r, ok := m.(*cm.REJ); ok && r.RemoteCommID == id {
					return r
				}
			}
		}
		t.Fatalf("no REJ for comm ID 0x%x", id)
		return nil
	}
	injectREQ(0x1001, func(r *cm.REQ) { r.PrivateData[1] = 5 << 4 })
	if r := rejFor(0x1001); r.Reason != cm.RejConsumerReject {
		t.Errorf("IP version 5: REJ %v", r.Reason)
	}
	injectREQ(0x1002, func(r *cm.REQ) { r.TransportServiceType = cm.TransportUC })
	if r := rejFor(0x1002); r.Reason != cm.RejInvalidTransportServiceType {
		t.Errorf("UC on RDMA_PS_TCP: REJ %v", r.Reason)
	}
	other := make([]byte, cm.MADLen)
	copy(other, tmpl.Payload)
	other[1] = 0x04 // management class 4, Performance Management
	inject(other)
	inject(tmpl.Payload[:100])
	for end := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
		st := b.svc.Stats()
		if st.Dropped == 1 && st.BadMADs == 1 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("stats %+v, want 1 dropped MAD and 1 bad datagram", st)
		}
	}
	select {
	case r := <-acceptCh(t, l):
		t.Fatalf("a bad REQ reached the listener: %+v", r)
	case <-time.After(100 * time.Millisecond):
	}
	c := connect(t, a, b, 18516, rdmacm.Param{}, rdmacm.Param{})
	sendPing(t, a, b, c)
}

// acceptCh delivers the listener's next request, if one comes within the test.
func acceptCh(t *testing.T, l *rdmacm.Listener) <-chan *rdmacm.Request {
	ch := make(chan *rdmacm.Request, 1)
	go func() {
		if r, err := l.Accept(ctx5(t)); err == nil {
			ch <- r
		}
	}()
	return ch
}
