package rdmacm_test

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/transport/rdmacm"
)

// TestDisconnect: either side's Disconnect moves its QP to the error state (a
// posted receive flushes) and sends a DREQ; the peer's Done closes with
// ErrDisconnected and its Disconnect answers with the DREP in the DREQ's
// transaction (IBTA Vol 1 §12.6.10-11; rdma_disconnect). Both connections leave
// after TimeWait.
func TestDisconnect(t *testing.T) {
	for _, first := range []string{"client", "server"} {
		t.Run(first, func(t *testing.T) {
			a, b, _, _ := newPair(t, pairConfig{opts: fastCM})
			c := connect(t, a, b, 18515, rdmacm.Param{}, rdmacm.Param{})
			us, peer, ut, pt, un := c.client, c.server, a.tap, b.tap, a
			if first == "server" {
				us, peer, ut, pt, un = c.server, c.client, b.tap, a.tap, b
			}
			if _, err := us.QP().PostRecv(transport.RecvWR{WRID: 9, SGList: un.sge(0, 8)}); err != nil {
				t.Fatal(err)
			}
			if err := us.Disconnect(); err != nil {
				t.Fatal(err)
			}
			if us.QP().State() != transport.QPS_ERR || !errors.Is(us.Err(), rdmacm.ErrClosed) {
				t.Errorf("after Disconnect: QP %v, err %v", us.QP().State(), us.Err())
			}
			if wc := un.wc(t); wc.WRID != 9 || wc.Status != transport.WC_WR_FLUSH_ERR {
				t.Errorf("receive after Disconnect: %+v", wc)
			}
			select {
			case <-peer.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the peer never learnt of the DREQ")
			}
			if !errors.Is(peer.Err(), rdmacm.ErrDisconnected) || peer.QP().State() != transport.QPS_RTS {
				t.Errorf("peer: %v, QP %v", peer.Err(), peer.QP().State())
			}
			select {
			case <-us.Disconnected():
				t.Fatal("Disconnected closed before the peer's DREP")
			default:
			}
			if err := peer.Disconnect(); err != nil {
				t.Fatal(err)
			}
			// The DREP went out: the peer's exchange is over at once, ours when
			// the DREP arrives (RDMA_CM_EVENT_DISCONNECTED).
			for who, c := range map[string]*rdmacm.Conn{"peer": peer, "us": us} {
				select {
				case <-c.Disconnected():
				case <-time.After(5 * time.Second):
					t.Fatalf("%s: Disconnected not closed after the DREP", who)
				}
			}
			nu, np := 3, 2 // client: REQ, RTU, DREQ; server: REP, DREP
			if first == "server" {
				nu, np = 2, 3 // server: REP, DREQ; client: REQ, RTU, DREP
			}
			ums, pms := waitMADs(t, ut, nu), waitMADs(t, pt, np)
			if len(ums) != nu || len(pms) != np {
				t.Fatalf("%d and %d MADs, want %d and %d", len(ums), len(pms), nu, np)
			}
			dreq, ok1 := ums[len(ums)-1].(*cm.DREQ)
			drep, ok2 := pms[len(pms)-1].(*cm.DREP)
			if !ok1 || !ok2 || dreq.RemoteQPNEECN != peer.QP().QPN() || drep.RemoteCommID != dreq.LocalCommID || drep.LocalCommID != dreq.RemoteCommID {
				t.Fatalf("last MADs: %+v, %+v (peer QPN 0x%x)", ums[len(ums)-1], pms[len(pms)-1], peer.QP().QPN())
			}
			uh, _, _ := ut.cmSent(t)
			ph, _, _ := pt.cmSent(t)
			if uh[len(uh)-1].TransactionID != ph[len(ph)-1].TransactionID {
				t.Errorf("DREQ TID 0x%x, DREP TID 0x%x", uh[len(uh)-1].TransactionID, ph[len(ph)-1].TransactionID)
			}
			waitDrained(t, a.svc, b.svc)
		})
	}
}

// TestDisconnectCrossed: both sides disconnect at once, as perftest's -R ends its
// data connection; the DREQs cross, each side takes the other's as the end and
// answers it, nobody waits for the full DREQ timeout, and both connections leave.
func TestDisconnectCrossed(t *testing.T) {
	a, b, _, _ := newPair(t, pairConfig{opts: fastCM})
	c := connect(t, a, b, 18515, rdmacm.Param{}, rdmacm.Param{})
	c.client.Disconnect()
	c.server.Disconnect()
	waitDrained(t, a.svc, b.svc)
	if sa, sb := a.svc.Stats(), b.svc.Stats(); sa.Retransmits+sb.Retransmits != 0 {
		t.Errorf("retransmits: %+v %+v", sa, sb)
	}
}

// waitDrained waits until the Services hold no connection and no active port (the
// TimeWait is 134 ms with fastCM).
func waitDrained(t *testing.T, svcs ...*rdmacm.Service) {
	t.Helper()
	end := time.Now().Add(3 * time.Second)
	for _, s := range svcs {
		for {
			conns, ports := s.Conns()
			if conns == 0 && ports == 0 {
				break
			}
			if time.Now().After(end) {
				t.Fatalf("still %d connections, %d ports", conns, ports)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// TestCycles: 1,000 connect/SEND/disconnect cycles against one listener (rdma_rxe's
// user space CM once stopped answering after about 1,000: SoftRoCE/librxe-dev#14)
// leave no connection, port or QP behind, and the heap does not grow with them.
func TestCycles(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 connections")
	}
	a, b, _, _ := newPair(t, pairConfig{opts: fastCM})
	cycle := func() {
		c := connect(t, a, b, 18515, rdmacm.Param{}, rdmacm.Param{})
		sendPing(t, a, b, c)
		c.client.Disconnect()
		<-c.server.Done()
		c.server.Disconnect()
		c.client.QP().Destroy()
		c.server.QP().Destroy()
		a.tap.reset()
		b.tap.reset()
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for range 100 {
		cycle()
	}
	waitDrained(t, a.svc, b.svc)
	before := heap()
	for range 900 {
		cycle()
	}
	waitDrained(t, a.svc, b.svc)
	if after := heap(); after > before+4<<20 {
		t.Errorf("heap grew from %d to %d bytes over 900 cycles", before, after)
	}
	st := b.svc.Stats()
	if st.Dropped != 0 || st.BadMADs != 0 || st.SendDrops != 0 {
		t.Errorf("server stats %+v", st)
	}
}
