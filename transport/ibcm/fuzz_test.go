package ibcm_test

import (
	"testing"

	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/test/captures"
	"github.com/xroce/xroce/transport/ibcm"
)

// FuzzReceive: whatever MADs arrive, a Manager with connections in several states
// never panics, every MAD it sends decodes, and once every timer has run out only
// connections waiting for the consumer (or established) remain.
func FuzzReceive(f *testing.F) {
	for _, s := range captures.Sources(f) {
		for _, fr := range readCaptureTB(f, s) {
			f.Add(fr.mad, fr.mad)
		}
	}
	// The MADs of the fuzzed scenario itself (the wire is deterministic, so their
	// IDs match the Managers' connections): two connections, a disconnection.
	w := newWire(f)
	ca, _ := w.connect()
	_, _ = w.connect()
	_ = w.a.m.Disconnect(w.now, ca, nil)
	w.pump()
	for i, s := range w.sent {
		f.Add(s.mad, w.sent[(i+1)%len(w.sent)].mad)
	}
	f.Fuzz(func(t *testing.T, mad1, mad2 []byte) {
		w := newWire(t)
		ca, _ := w.connect()                                 // established
		_, err := w.a.m.Connect(w.now, addrB, testREQ(3, 3)) // REQ Sent / REQ Rcvd
		must(t, err)
		w.pump()
		must(t, w.a.m.Disconnect(w.now, ca, nil)) // DREQ Sent
		for _, mad := range [][]byte{mad1, mad2, mad1} {
			for _, s := range []*side{w.a, w.b} {
				s.m.Receive(w.now, w.other(s).addr, mad)
				for _, snd := range s.m.Sends() {
					if _, _, err := cm.Decode(snd.MAD); err != nil {
						t.Fatalf("sent a MAD that does not decode: %v", err)
					}
				}
				s.m.Events()
			}
		}
		for range 40 {
			w.now = w.now.Add(cm.Timeout(24))
			for _, s := range []*side{w.a, w.b} {
				s.m.Advance(w.now)
				s.m.Sends()
				s.m.Events()
			}
		}
		// Every timer has run out: what is left waits for its consumer.
		for _, s := range []*side{w.a, w.b} {
			for _, c := range s.m.Connections() {
				switch c.State() {
				case ibcm.StateREQRcvd, ibcm.StateMRAREQSent, ibcm.StateREPRcvd, ibcm.StateMRAREPSent,
					ibcm.StateDREQRcvd, ibcm.StateEstablished:
				default:
					t.Fatalf("%v: connection 0x%08x in %v after every timer", s.addr, c.LocalCommID(), c.State())
				}
			}
			if _, ok := s.m.NextDeadline(); ok {
				t.Fatalf("%v: a timer still runs", s.addr)
			}
		}
	})
}
