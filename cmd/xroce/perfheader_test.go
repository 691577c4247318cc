package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/xroce/xroce/test/testnet"
)

// TestPerftestHeader: the header lines perftest 4.5-0.17 prints (as captured on
// rdma_rxe, test/interop/testdata/libcells): TX depth on the client only, RX depth
// on a send test's receiver, CQ moderation, outstanding reads for READ, the
// address lines in C's formats with READ's OUT, and BW peak 0.00 where perftest
// computes none (-N, more than 20000 iterations, a send_bw server).
func TestPerftestHeader(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	head := func(lines ...string) string { return strings.Join(lines, "\n") + "\n" }
	addr := `(?m)^ local address: LID 0000 QPN 0x[0-9a-f]{4,} PSN (0x[0-9a-f]{4,}|000000)%s\n GID: ` // %#06x: 0x and at least 4 digits, or 000000
	for _, c := range []struct {
		cmd, args        string
		srvHead, cliHead string
		addrTail         string
		srvPeak, cliPeak bool // BW peak printed as 0.00
	}{
		{"send_bw", "-n 50 -s 64",
			head(" ibv_wr* API     : OFF", " RX depth        : 50", " CQ Moderation   : 50", " Mtu             : 1024[B]"),
			head(" ibv_wr* API     : OFF", " TX depth        : 50", " CQ Moderation   : 50", " Mtu             : 1024[B]"),
			"", true, false},
		{"read_bw", "-n 60 -s 64 -N",
			head(" PCIe relax order: ON", " ibv_wr* API     : OFF", " CQ Moderation   : 60", " Mtu             : 1024[B]"),
			head(" ibv_wr* API     : OFF", " TX depth        : 60", " CQ Moderation   : 60", " Mtu             : 1024[B]"),
			` OUT 0x10 RKey 0x[0-9a-f]{6,} VAddr 0x[0-9a-f]{14,}`, true, true},
		{"write_bw", "-n 20001 -s 2",
			head(" ibv_wr* API     : OFF", " CQ Moderation   : 100", " Mtu             : 1024[B]"),
			head(" ibv_wr* API     : OFF", " TX depth        : 128", " CQ Moderation   : 100", " Mtu             : 1024[B]"),
			` RKey 0x[0-9a-f]{6,} VAddr 0x[0-9a-f]{14,}`, true, true},
	} {
		args := append([]string{c.cmd}, strings.Fields(c.args)...)
		srv, cli := pair(t, n, append(args, "-d", n.IfB), append(args[:len(args):len(args)], "-d", n.IfA, n.IPB.String()))
		for _, s := range []struct {
			who, out, head string
			zeroPeak       bool
		}{{"server", srv, c.srvHead, c.srvPeak}, {"client", cli, c.cliHead, c.cliPeak}} {
			if !strings.Contains(s.out, s.head) {
				t.Errorf("%s %s: no\n%s in\n%s", c.cmd, s.who, s.head, s.out)
			}
			if c.cmd == "read_bw" && !strings.Contains(s.out, " Outstand reads  : 16\n") || c.cmd != "read_bw" && !strings.Contains(s.out, " Max inline data : 0[B]\n") {
				t.Errorf("%s %s: no outstanding reads or inline line in\n%s", c.cmd, s.who, s.out)
			}
			if !regexp.MustCompile(strings.Replace(addr, "%s", c.addrTail, 1)).MatchString(s.out) {
				t.Errorf("%s %s: no perftest address line in\n%s", c.cmd, s.who, s.out)
			}
			m := bwLine.FindStringSubmatch(s.out)
			if m == nil {
				t.Errorf("%s %s: no result line in\n%s", c.cmd, s.who, s.out)
				continue
			}
			if zero := m[3] == "0.00"; zero != s.zeroPeak {
				t.Errorf("%s %s: BW peak %s, want 0.00: %v", c.cmd, s.who, m[3], s.zeroPeak)
			}
		}
	}
}
