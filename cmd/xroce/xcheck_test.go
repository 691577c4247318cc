package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/xroce/xroce/test/testnet"
	"github.com/xroce/xroce/transport"
)

// TestCrosscheckEngine runs the cross-check workload engine to engine, over both
// links and at path MTU 256 (many packets per message) and the link's largest: both
// sides must match the model (which the command checks) and print one wc line per
// completion, with the exact fields the interop harness compares.
func TestCrosscheckEngine(t *testing.T) {
	// reads is the READ requests the 16 READs take: at path MTU 256 the largest go
	// out in segments of 64 packets, half the window (transport/readseg.go).
	for _, c := range []struct {
		link, mtu string
		reads     int
	}{{"xdp", "256", 19}, {"xdp", "0", 16}, {"udp", "1024", 16}} {
		t.Run(c.link+"/"+c.mtu, func(t *testing.T) {
			n := testnet.New(t, testnet.Options{})
			srv, cli := pair(t, n, []string{"crosscheck", "--counters", "--link", c.link, "-d", n.IfB, "-m", c.mtu},
				[]string{"crosscheck", "--counters", "--link", c.link, "-d", n.IfA, "-m", c.mtu, n.IPB.String()})
			ops, recvs := xcheckScript()
			for who, out := range map[string]string{"server": srv, "client": cli} {
				want := len(ops)
				if who == "server" {
					want = len(recvs)
				}
				if got := len(regexp.MustCompile(`(?m)^wc `+who+` \d+ `).FindAllString(out, -1)); got != want {
					t.Errorf("%s: %d wc lines, want %d:\n%s", who, got, want, out)
				}
				if !strings.Contains(out, "crosscheck "+who+": ") || !strings.Contains(out, "match the model") {
					t.Errorf("%s output:\n%s", who, out)
				}
			}
			// Spot checks of exact lines: a 4097-byte READ, an atomic, a zero-length
			// WRITE_WITH_IMM's receive.
			for _, line := range []string{
				"wc client 63 wr_id=63 status=IBV_WC_SUCCESS opcode=IBV_WC_RDMA_READ byte_len=4097 imm=-",
				"wc client 78 wr_id=78 status=IBV_WC_SUCCESS opcode=IBV_WC_FETCH_ADD byte_len=8 imm=-",
				"wc server 1 wr_id=1 status=IBV_WC_SUCCESS opcode=IBV_WC_RECV_RDMA_WITH_IMM byte_len=0 imm=0x5a000000",
			} {
				if !strings.Contains(cli+srv, line+"\n") {
					t.Errorf("no line %q in\n%s\n%s", line, cli, srv)
				}
			}
			// --counters, by rdma_rxe's meaning of rdma_sends (SEND WRs completed) and
			// rdma_recvs (receives completed) and mlx5's rx_*_requests: 17 WRITEs and
			// 17 WRITE_WITH_IMMs, the READ requests, the atomics.
			sends, atomics := 0, 0
			for _, o := range ops {
				switch o.wr.Opcode {
				case transport.WR_SEND, transport.WR_SEND_WITH_IMM:
					sends++
				case transport.WR_ATOMIC_FETCH_AND_ADD, transport.WR_ATOMIC_CMP_AND_SWP:
					atomics++
				}
			}
			line := func(name string, v int) string { return fmt.Sprintf("\n  %-24s %d\n", name, v) }
			for _, w := range []struct{ out, line string }{
				{cli, line("rdma_sends", sends)}, {srv, line("rdma_recvs", len(recvs))},
				{srv, line("rx_write_requests", 34)}, {srv, line("rx_read_requests", c.reads)},
				{srv, line("rx_atomic_requests", atomics)},
			} {
				if !strings.Contains(w.out, w.line) {
					t.Errorf("counters: no %q in\n%s", strings.TrimSpace(w.line), w.out)
				}
			}
		})
	}
}
