package roce_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/internal/rocetest"
	"github.com/xroce/xroce/test/captures"
)

// hostPeer is the plain-UDP peer of the hostpeer_* captures; it always sends from
// port 4791, so its frames are not rdma_rxe's.
const hostPeer = rocetest.HostPeer

// TestUDPSourcePortMatchesRxe checks every RC frame rdma_rxe sent in the captures made
// without rdma_cm: its UDP source port is rdma_get_udp_sport of the flow's QPN pair.
// The sender's own QPN is the DestQP of the frame nearest in time flowing the other
// way (each capture holds runs seconds apart, and each run has its own QPNs).
func TestUDPSourcePortMatchesRxe(t *testing.T) {
	captures.Run(t, udpSourcePortMatchesRxe)
}

// sportChecked is, per source, how many frames rdma_rxe sent in the captures
// without rdma_cm and how many QPN pairs they belong to.
var sportChecked = map[string][2]int{captures.Shared: {2216, 15}, captures.Testdata: {2071, 21}}

func udpSourcePortMatchesRxe(t *testing.T, s captures.Source) {
	var files []string
	for _, f := range s.Files(t, "rxe") {
		if filepath.Base(f) != "ib_write_bw_rdmacm.pcap" {
			files = append(files, f)
		}
	}
	files = append(files, s.Files(t, "rxe-loss")...)
	checked, pairs := 0, map[[2]uint32]bool{}
	byFile := map[string][]rocetest.Frame{}
	for _, f := range rocetest.ReadRoCE(t, files) {
		byFile[f.File] = append(byFile[f.File], f)
	}
	for file, frames := range byFile {
		for _, f := range frames {
			p := &f.Pkt
			if p.SrcAddr().String() == hostPeer {
				if p.UDP.SrcPort != roce.UDPPort {
					t.Errorf("%s frame %d: host peer sport %d", file, f.Index, p.UDP.SrcPort)
				}
				continue
			}
			var rev *rocetest.Frame
			for j := range frames {
				q := &frames[j]
				if q.Pkt.SrcAddr() != p.DstAddr() || q.Pkt.DstAddr() != p.SrcAddr() {
					continue
				}
				if rev == nil || absDur(q.Time.Sub(f.Time)) < absDur(rev.Time.Sub(f.Time)) {
					rev = q
				}
			}
			if rev == nil {
				t.Fatalf("%s frame %d: no reverse flow", file, f.Index)
			}
			lqpn, rqpn := rev.Pkt.BTH.DestQP, p.BTH.DestQP
			if want := roce.UDPSourcePort(0, lqpn, rqpn); p.UDP.SrcPort != want {
				t.Errorf("%s frame %d: sport 0x%04x, rdma_get_udp_sport(0x%x, 0x%x) = 0x%04x",
					file, f.Index, p.UDP.SrcPort, lqpn, rqpn, want)
			}
			pairs[[2]uint32{lqpn, rqpn}] = true
			checked++
		}
	}
	if want := sportChecked[s.Name]; checked != want[0] || len(pairs) != want[1] {
		t.Errorf("checked %d frames in %d QPN pairs, want %d in %d", checked, len(pairs), want[0], want[1])
	}
	t.Logf("%d frames, %d QPN pairs", checked, len(pairs))
}

func TestUDPSourcePortVectors(t *testing.T) {
	// Worked by hand from rdma_calc_flow_label / rdma_flow_label_to_udp_sport:
	// 0x11*0x12 = 0x132; folding leaves 0x132; low 14 bits 0x132, high 6 bits 0 -> 0xC132.
	if got := roce.UDPSourcePort(0, 0x11, 0x12); got != 0xC132 {
		t.Errorf("UDPSourcePort(0, 0x11, 0x12) = 0x%04x", got)
	}
	// A flow label in the address handle wins: 0xFC001 -> low 0x0001 ^ 0x3F = 0x3E.
	if got := roce.UDPSourcePort(0xFC001, 0x11, 0x12); got != 0xC03E {
		t.Errorf("UDPSourcePort(0xFC001, …) = 0x%04x", got)
	}
	// 0xFFFFFF*0xFFFFFF = 0xFFFFFE000001: v ^= v>>20 gives 0xFFFFFE000001 ^ 0xFFFFFFE0 = 0xFFFF01FFFFE1;
	// v ^= v>>40 gives 0xFFFF01FFFFE1 ^ 0xFF = 0xFFFF01FFFF1E; & 0xFFFFF = 0xFFF1E.
	if got := roce.FlowLabel(0xFFFFFF, 0xFFFFFF); got != 0xFFF1E {
		t.Errorf("FlowLabel(max, max) = 0x%x", got)
	}
}

func absDur(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

// TestUDSourcePort checks the UD source port against every UD frame of the rdma_cm
// capture (both rdma_rxe hosts send their CM MADs from QP1, on port 55410), and
// values worked out by hand from hash_32: 17 × 0x61C88647 = 0x67D52EBB7, whose low 32
// bits 0x7D52EBB7 have 0x1F54 as their top 14 bits; 0xFFFFFF × 0x61C88647 mod 2^32 =
// 0x9E3779B9 (−0x61C88647), top 14 bits 0x278D.
func TestUDSourcePort(t *testing.T) {
	for _, c := range []struct {
		qpn  uint32
		want uint16
	}{{1, 55410}, {0, 0xC000}, {17, 0xC000 | 0x1F94}, {0xFFFFFF, 0xC000 | 0x394D}} {
		if got := roce.UDSourcePort(c.qpn); got != c.want {
			t.Errorf("UDSourcePort(%d) = %d, want %d", c.qpn, got, c.want)
		}
	}
	captures.Run(t, func(t *testing.T, s captures.Source) {
		n := 0
		for _, f := range rocetest.ReadRoCE(t, []string{s.Path(t, "ib_write_bw_rdmacm.pcap")}) {
			p := &f.Pkt
			if p.BTH.Opcode.Service() != roce.ServiceUD {
				continue
			}
			if want := roce.UDSourcePort(p.DETH.SrcQP); p.UDP.SrcPort != want {
				t.Errorf("frame %d: UD sport %d, want %d for source QP %d", f.Index, p.UDP.SrcPort, want, p.DETH.SrcQP)
			}
			n++
		}
		if n == 0 {
			t.Fatal("no UD frames in the capture")
		}
		t.Logf("%d UD frames", n)
	})
}
