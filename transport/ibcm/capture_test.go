package ibcm_test

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/test/captures"
	"github.com/xroce/xroce/transport/ibcm"
)

// hiTID is the upper half of every transaction ID in both recordings: the two
// guests' MAD agents' hi_tid.
const hiTID = 2

// capFrame is one CM MAD of rdma_rxe's ib_write_bw -R capture.
type capFrame struct {
	index    int
	time     time.Time
	src, dst netip.Addr
	mad      []byte
	h        cm.Header
	msg      cm.Message
}

func readCapture(t *testing.T, s captures.Source) []capFrame { return readCaptureTB(t, s) }

func readCaptureTB(t testing.TB, s captures.Source) []capFrame {
	t.Helper()
	return readCMFile(t, s.Path(t, "ib_write_bw_rdmacm.pcap"))
}

// readCMFile returns the CM MADs of a capture file.
func readCMFile(t testing.TB, path string) []capFrame {
	t.Helper()
	frames, err := pcap.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []capFrame
	for _, f := range frames {
		var p roce.Packet
		if p.Decode(f.Data) != nil || p.BTH.DestQP != cm.GSIQPN {
			continue
		}
		mad, err := cm.MADFromPacket(&p)
		if err != nil {
			t.Fatal(err)
		}
		h, m, err := cm.Decode(mad)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, capFrame{f.Index, f.Time, p.SrcAddr(), p.DstAddr(), mad, h, m})
	}
	return out
}

// replay plays one side of the capture with a Manager: the other side's MADs go to
// Receive; this side's REQ, REP and DREQ are the Manager's Connect, Accept and
// Disconnect, with the captured parameters; RTU and DREP are the Manager's answers
// to EventREP and EventDREQ. Every MAD the Manager sends must equal the captured
// one, byte for byte. It returns how many DREPs the Manager sent that rdma_rxe did
// not: Linux, in DREQ Sent, takes a crossing DREQ as the end without a DREP; this
// Manager answers it.
func replay(t *testing.T, frames []capFrame, self netip.Addr, m *ibcm.Manager) (extraDREPs int) {
	t.Helper()
	var queue []ibcm.Send
	conns := map[uint32]*ibcm.Conn{}   // by local comm ID
	pending := map[uint32]*ibcm.Conn{} // EventREQ, by the REQ's comm ID
	crossed := map[uint64]bool{}       // transaction IDs of DREQs that crossed ours
	take := func(now time.Time) {
		for _, e := range m.Events() {
			switch e.Type {
			case ibcm.EventREQ:
				pending[e.REQ.LocalCommID] = e.Conn
			case ibcm.EventREP:
				must(t, m.RTU(e.Conn, nil))
			case ibcm.EventDREQ:
				must(t, m.DREP(now, e.Conn, nil))
			}
		}
		queue = append(queue, m.Sends()...)
	}
	for _, f := range frames {
		m.Advance(f.time)
		take(f.time)
		if f.src != self {
			if d, ok := f.msg.(*cm.DREQ); ok && conns[d.RemoteCommID] != nil && conns[d.RemoteCommID].State() == ibcm.StateDREQSent {
				crossed[f.h.TransactionID] = true
			}
			m.Receive(f.time, f.src, f.mad)
			take(f.time)
			continue
		}
		switch msg := f.msg.(type) {
		case *cm.REQ:
			c, err := m.Connect(f.time, f.dst, *msg)
			must(t, err)
			conns[c.LocalCommID()] = c
		case *cm.REP:
			c := pending[msg.RemoteCommID]
			if c == nil {
				t.Fatalf("frame %d: REP to a REQ the Manager did not report", f.index)
			}
			must(t, m.Accept(f.time, c, *msg))
			conns[c.LocalCommID()] = c
		case *cm.DREQ:
			c := conns[msg.LocalCommID]
			if c == nil {
				t.Fatalf("frame %d: DREQ for an unknown connection", f.index)
			}
			must(t, m.Disconnect(f.time, c, nil))
		}
		take(f.time)
		matched := false
		for len(queue) > 0 && !matched {
			s := queue[0]
			queue = queue[1:]
			h, _, _ := cm.Decode(s.MAD)
			if h.AttributeID == cm.AttrDREP && crossed[h.TransactionID] {
				extraDREPs++
				continue
			}
			if s.To != f.dst || !bytes.Equal(s.MAD, f.mad) {
				t.Fatalf("frame %d (%v): the Manager sent to %v\n%x\nwant\n%x", f.index, f.h.AttributeID, s.To, s.MAD, f.mad)
			}
			matched = true
		}
		if !matched {
			t.Fatalf("frame %d (%v): the Manager sent nothing", f.index, f.h.AttributeID)
		}
	}
	if len(queue) != 0 {
		t.Errorf("%d MADs sent that the capture does not hold", len(queue))
	}
	return extraDREPs
}

// TestReplayClient: as the capture's client (10.77.0.12, ib_write_bw -R 10.77.0.11),
// the Manager sends every CM MAD rdma_rxe's client sent, byte for byte: four REQs
// (with Linux's comm IDs and transaction IDs), the RTUs, the DREQs and DREPs.
func TestReplayClient(t *testing.T) {
	captures.Run(t, func(t *testing.T, s captures.Source) {
		frames := readCapture(t, s)
		req := frames[0].msg.(*cm.REQ)
		m := ibcm.New(ibcm.Config{LocalCAGUID: req.LocalCAGUID, HiTID: hiTID, FirstCommID: req.LocalCommID})
		extra := replay(t, frames, frames[0].src, m)
		if want := captures.Pick(t, s, map[string]int{captures.Testdata: 2, captures.Shared: 0}); extra != want {
			t.Errorf("%d DREPs to crossed DREQs, want %d", extra, want)
		}
	})
}

// TestReplayServer: as the capture's server for its first connection, the Manager
// sends rdma_rxe's REP and, where the server disconnected, its DREQ, byte for
// byte. (rdma_rxe's server skipped a comm ID between connections, so only the
// first one has IDs a Manager picks alike.)
func TestReplayServer(t *testing.T) {
	captures.Run(t, func(t *testing.T, s captures.Source) {
		frames := readCapture(t, s)
		req, rep := frames[0].msg.(*cm.REQ), frames[1].msg.(*cm.REP)
		ids := map[uint32]bool{req.LocalCommID: true, rep.LocalCommID: true}
		var first []capFrame
		for _, f := range frames {
			var local, remote uint32
			switch msg := f.msg.(type) {
			case *cm.REQ:
				local = msg.LocalCommID
			case *cm.REP:
				local, remote = msg.LocalCommID, msg.RemoteCommID
			case *cm.RTU:
				local, remote = msg.LocalCommID, msg.RemoteCommID
			case *cm.DREQ:
				local, remote = msg.LocalCommID, msg.RemoteCommID
			case *cm.DREP:
				local, remote = msg.LocalCommID, msg.RemoteCommID
			}
			if ids[local] && (remote == 0 || ids[remote]) {
				first = append(first, f)
			}
		}
		if len(first) < 5 {
			t.Fatalf("first connection: %d MADs", len(first))
		}
		m := ibcm.New(ibcm.Config{LocalCAGUID: rep.LocalCAGUID, HiTID: hiTID, FirstCommID: rep.LocalCommID})
		m.Listen(req.ServiceID)
		if extra := replay(t, first, frames[1].src, m); extra != 0 {
			t.Errorf("%d extra DREPs", extra)
		}
		t.Logf("%d MADs of the first connection", len(first))
	})
}

// TestReplayOwnCapture replays xroce's own rdma_cm capture,
// testdata/xroce/rping_rdmacm.pcap (`xroce rping -s -P --pcap` serving two
// `xroce rping -c -C 3 -V` runs, 2026-12-01), as its server: a Manager with the
// server's CA GUID and first Communication ID answers the two REQs and DREQs with
// the recorded REPs and DREPs, byte for byte; and as each client (a process of its
// own, so a Manager each), it sends the recorded REQ, RTU and DREQ.
func TestReplayOwnCapture(t *testing.T) {
	frames := readCMFile(t, "../../testdata/xroce/rping_rdmacm.pcap")
	if len(frames) != 10 {
		t.Fatalf("%d CM MADs, want two connections of 5", len(frames))
	}
	req, rep := frames[0].msg.(*cm.REQ), frames[1].msg.(*cm.REP)
	srv := ibcm.New(ibcm.Config{LocalCAGUID: rep.LocalCAGUID, FirstCommID: rep.LocalCommID})
	srv.Listen(req.ServiceID)
	if extra := replay(t, frames, frames[1].src, srv); extra != 0 {
		t.Errorf("server: %d extra DREPs", extra)
	}
	for i := 0; i < len(frames); i += 5 {
		conn := frames[i : i+5]
		r := conn[0].msg.(*cm.REQ)
		cli := ibcm.New(ibcm.Config{LocalCAGUID: r.LocalCAGUID, HiTID: uint32(conn[0].h.TransactionID >> 32), FirstCommID: r.LocalCommID})
		if extra := replay(t, conn, conn[0].src, cli); extra != 0 {
			t.Errorf("client %d: %d extra DREPs", i/5, extra)
		}
	}
}
