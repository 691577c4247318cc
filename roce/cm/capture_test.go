package cm_test

import (
	"bytes"
	"net/netip"
	"testing"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/roce/internal/rocetest"
	"github.com/xroce/xroce/test/captures"
)

// rdmacmCapture holds rdma_rxe's own CM exchange: two `ib_write_bw -R` runs, each
// with two connections (testdata/README.md).
const rdmacmCapture = "ib_write_bw_rdmacm.pcap"

// cmFrame is one CM MAD of a capture, decoded.
type cmFrame struct {
	rocetest.Frame
	MAD []byte
	Hdr cm.Header
	Msg cm.Message
}

// readCM returns the GSI frames (BTH DestQP 1) of the rdma_cm capture of s, each
// decoded, failing t on any error.
func readCM(t *testing.T, s captures.Source) []cmFrame {
	t.Helper()
	var out []cmFrame
	for _, f := range rocetest.ReadRoCE(t, []string{s.Path(t, rdmacmCapture)}) {
		if f.Err != nil {
			t.Fatalf("frame %d: %v", f.Index, f.Err)
		}
		if f.Pkt.BTH.DestQP != cm.GSIQPN {
			continue
		}
		mad, err := cm.MADFromPacket(&f.Pkt)
		if err != nil {
			t.Fatalf("frame %d: %v", f.Index, err)
		}
		h, m, err := cm.Decode(mad)
		if err != nil {
			t.Fatalf("frame %d: %v", f.Index, err)
		}
		out = append(out, cmFrame{f, mad, h, m})
	}
	return out
}

// cmCounts is, per source, how many of each CM message the capture holds (tshark -Y
// infiniband.bth.destqp==1). The recordings differ in their DREQs: in testdata's,
// both sides sent one for the second connection of each run (they crossed).
var cmCounts = map[string]map[cm.AttributeID]int{
	captures.Testdata: {cm.AttrREQ: 4, cm.AttrREP: 4, cm.AttrRTU: 4, cm.AttrDREQ: 6, cm.AttrDREP: 4},
	captures.Shared:   {cm.AttrREQ: 4, cm.AttrREP: 4, cm.AttrRTU: 4, cm.AttrDREQ: 4, cm.AttrDREP: 4},
}

// TestCaptureRebuild: every CM MAD of rdma_rxe's exchange decodes, and encoding
// what was decoded gives the MAD byte for byte; so does the whole frame, rebuilt
// from the captured Ethernet/IP/UDP fields, SetGSIDatagram and Packet.Encode.
func TestCaptureRebuild(t *testing.T) {
	captures.Run(t, func(t *testing.T, s captures.Source) {
		frames := readCM(t, s)
		counts := map[cm.AttributeID]int{}
		mad := make([]byte, cm.MADLen)
		buf := make([]byte, 2048)
		for _, f := range frames {
			counts[f.Hdr.AttributeID]++
			if n := cm.Encode(mad, f.Hdr, f.Msg); n != cm.MADLen || !bytes.Equal(mad, f.MAD) {
				t.Errorf("frame %d %v: rebuilt MAD\n%x\nwant\n%x", f.Index, f.Hdr.AttributeID, mad, f.MAD)
			}
			q := f.Pkt
			cm.SetGSIDatagram(&q, append([]byte(nil), mad...), f.Pkt.BTH.PKey, f.Pkt.BTH.PSN)
			n, err := q.Encode(buf)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf[:n], f.Pkt.Frame()) {
				t.Errorf("frame %d: rebuilt frame\n%x\nwant\n%x", f.Index, buf[:n], f.Pkt.Frame())
			}
			if f.Pkt.UDP.SrcPort != cm.RxeGSISourcePort || f.Pkt.DETH.SrcQP != cm.GSIQPN {
				t.Errorf("frame %d: UDP source port %d, DETH source QP %d", f.Index, f.Pkt.UDP.SrcPort, f.Pkt.DETH.SrcQP)
			}
		}
		want := captures.Pick(t, s, cmCounts)
		if len(counts) != len(want) {
			t.Errorf("messages %v, want %v", counts, want)
		}
		for a, n := range want {
			if counts[a] != n {
				t.Errorf("%d %v, want %d", counts[a], a, n)
			}
		}
	})
}

// TestCaptureConnections follows each connection of the capture through its
// messages and checks what must agree: comm IDs and transaction IDs, the REQ's
// addresses (path GIDs and IP CM header) against the frame's IP header, perftest's
// port (18515) in the Service ID, the flow label rdma_cm derives from the ports,
// path MTU 1024 (netdev MTU 1500), and the QPNs and PSNs that the RC traffic after
// the RTU uses: each side sends to the QPN the other side's REQ or REP named,
// starting at the PSN that REQ or REP named.
func TestCaptureConnections(t *testing.T) {
	captures.Run(t, func(t *testing.T, s captures.Source) {
		frames := readCM(t, s)
		all := rocetest.ReadRoCE(t, []string{s.Path(t, rdmacmCapture)})
		conns, used := 0, 0
		for i, f := range frames {
			req, ok := f.Msg.(*cm.REQ)
			if !ok {
				continue
			}
			conns++
			src, dst := f.Pkt.SrcAddr(), f.Pkt.DstAddr()
			ipcm, err := req.IPCM()
			if err != nil {
				t.Fatalf("frame %d: %v", f.Index, err)
			}
			ps, port, ok := cm.ParseIPServiceID(req.ServiceID)
			switch {
			case !ok || ps != cm.PortSpaceTCP || port != 18515:
				t.Errorf("frame %d: Service ID 0x%016x", f.Index, req.ServiceID)
			case ipcm.IPVersion != 4 || ipcm.SourceIP != src || ipcm.DestinationIP != dst:
				t.Errorf("frame %d: IP CM header %+v, frame %v → %v", f.Index, ipcm, src, dst)
			case req.Primary.LocalPortGID != roce.GIDFromAddr(src) || req.Primary.RemotePortGID != roce.GIDFromAddr(dst):
				t.Errorf("frame %d: primary path GIDs %v → %v", f.Index, req.Primary.LocalPortGID, req.Primary.RemotePortGID)
			case req.Primary.FlowLabel != cm.RoCEFlowLabel(ipcm.SourcePort, port):
				t.Errorf("frame %d: Primary Flow Label 0x%05x, want 0x%05x", f.Index, req.Primary.FlowLabel, cm.RoCEFlowLabel(ipcm.SourcePort, port))
			case req.PathMTU != roce.MTU1024 || req.TransportServiceType != cm.TransportRC:
				t.Errorf("frame %d: MTU %v, transport %v", f.Index, req.PathMTU, req.TransportServiceType)
			}
			// The REP and RTU of this connection follow, in the same transaction.
			rep, rtu := findReply[*cm.REP](frames[i+1:], f.Hdr.TransactionID), findReply[*cm.RTU](frames[i+1:], f.Hdr.TransactionID)
			if rep == nil || rtu == nil {
				t.Fatalf("frame %d: no REP or RTU with transaction ID 0x%x", f.Index, f.Hdr.TransactionID)
			}
			if rep.RemoteCommID != req.LocalCommID || rtu.LocalCommID != req.LocalCommID || rtu.RemoteCommID != rep.LocalCommID {
				t.Errorf("frame %d: comm IDs REQ %x, REP %x/%x, RTU %x/%x", f.Index, req.LocalCommID,
					rep.LocalCommID, rep.RemoteCommID, rtu.LocalCommID, rtu.RemoteCommID)
			}
			// The first RC request each way to this connection's QPs. (perftest runs
			// its test on the first connection of a run; the second may carry none.)
			for _, dir := range []struct {
				from     netip.Addr
				qpn, psn uint32
			}{{src, rep.LocalQPN, rep.StartingPSN}, {dst, req.LocalQPN, req.StartingPSN}} {
				for _, g := range all {
					p := &g.Pkt
					if g.Index <= f.Index || p.SrcAddr() != dir.from || p.BTH.DestQP != dir.qpn || !p.BTH.Opcode.Is(roce.ClassRequest) {
						continue
					}
					if p.BTH.PSN != dir.psn {
						t.Errorf("frame %d: first request from %v to QP 0x%x has PSN 0x%x, want 0x%x",
							g.Index, dir.from, dir.qpn, p.BTH.PSN, dir.psn)
					}
					used++
					break
				}
			}
		}
		if used < 4 {
			t.Errorf("RC requests found on %d connection directions, want at least 4 (two runs, both ways)", used)
		}
		t.Logf("%d connections, RC requests checked on %d connection directions", conns, used)
		if conns != 4 {
			t.Errorf("%d connections, want 4", conns)
		}
	})
}

// findReply returns the first message of type T in frames with transaction ID tid.
func findReply[T cm.Message](frames []cmFrame, tid uint64) T {
	var zero T
	for _, f := range frames {
		if m, ok := f.Msg.(T); ok && f.Hdr.TransactionID == tid {
			return m
		}
	}
	return zero
}
