package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xroce/xroce/test/testnet"
)

// TestPerftestRDMACM: -R on every test, xroce client against xroce server over
// AF_XDP in two namespaces: the exchange on a CM-connected QP and each test QP a
// CM connection of its own (perftest 4.5's rdma_cm mode), with --verify; both
// sides print their tables and say rdma_cm is the data exchange method. Two QPs
// (two test connections) on write_bw and read_bw; -b (both sides send) on
// write_bw and send_bw.
func TestPerftestRDMACM(t *testing.T) {
	n := testnet.New(t, testnet.Options{MTU: 1500})
	for _, c := range []struct {
		cmd        string
		size, qps  int
		verifyBoth bool   // the server's output has the verification line too
		flag       string // on both sides
	}{
		{"write_bw", 65536, 1, false, ""}, {"read_bw", 65536, 1, false, ""}, {"send_bw", 4000, 1, true, ""},
		{"atomic_bw", 8, 1, false, ""}, {"write_lat", 64, 1, true, ""}, {"read_lat", 64, 1, false, ""},
		{"send_lat", 64, 1, true, ""}, {"write_bw", 4096, 2, false, ""}, {"read_bw", 4096, 2, false, ""},
		{"write_bw", 4096, 1, true, "-b"}, {"send_bw", 4096, 1, true, "-b"},
	} {
		t.Run(fmt.Sprintf("%s/q%d%s", c.cmd, c.qps, c.flag), func(t *testing.T) {
			iters := 300
			args := []string{c.cmd, "-R", "--verify", "-s", fmt.Sprint(c.size), "-n", fmt.Sprint(iters), "-q", fmt.Sprint(c.qps)}
			if c.flag != "" {
				args = append(args, c.flag)
			}
			srv, cli := pair(t, n, append(slices.Clip(args), "-d", n.IfB), append(slices.Clip(args), "-d", n.IfA, n.IPB.String()))
			lat := strings.HasSuffix(c.cmd, "_lat")
			clientVerifies := c.cmd != "write_bw" && c.cmd != "send_bw" && c.cmd != "atomic_bw"
			checkTable(t, "client", cli, lat, c.size, iters*c.qps, clientVerifies)
			if c.cmd != "read_lat" {
				checkTable(t, "server", srv, lat, c.size, iters*c.qps, c.verifyBoth || c.cmd == "write_bw")
			}
			for side, out := range map[string]string{"client": cli, "server": srv} {
				if !strings.Contains(out, " Data ex. method : rdma_cm\n") || strings.Count(out, " local address: ") != c.qps {
					t.Errorf("%s: not an rdma_cm run of %d QPs:\n%s", side, c.qps, out)
				}
				// perftest 4.5-0.17's -R server says what to run, the client does not
				waiting := rule + "\n Waiting for client rdma_cm QP to connect\n Please run the same command with the IB/RoCE interface IP\n" + rule + "\n"
				if strings.Contains(out, waiting) != (side == "server") {
					t.Errorf("%s: perftest's rdma_cm waiting lines: want them on the server only:\n%s", side, out)
				}
			}
		})
	}
}

// TestPerftestRDMACMInterop: Debian's unmodified perftest with -R, through `xroce
// run` (libxroce's librdmacm functions and a daemon's connection manager) in one
// namespace, against xroce's own tool with -R running natively over AF_XDP in the
// other, in both roles: the real perftest's rdma_cm exchange against ours, and our
// tools' CM against the library's. Both sides print a table of 200 messages of
// 4096 bytes.
func TestPerftestRDMACMInterop(t *testing.T) {
	needRoot(t)
	libxroce(t)
	tools := []struct{ perftest, ours string }{
		{"ib_write_bw", "write_bw"}, {"ib_read_bw", "read_bw"}, {"ib_send_bw", "send_bw"}, {"ib_write_lat", "write_lat"},
	}
	for _, c := range tools {
		needTool(t, "/usr/bin/"+c.perftest, "perftest")
	}
	n := testnet.New(t, testnet.Options{MTU: 1500})
	p := &verbsPair{n: n, dirA: t.TempDir()}
	startDaemon(t, n.NsA, n.IfA, p.dirA) // B has no daemon: xroce's tool owns IfB
	port := 18730
	for _, c := range tools {
		for _, perftestServes := range []bool{true, false} {
			port++
			common := []string{"-R", "-F", "-p", fmt.Sprint(port), "-n", "200", "-s", "4096"}
			name := c.perftest + " server, xroce " + c.ours + " client"
			if !perftestServes {
				name = "xroce " + c.ours + " server, " + c.perftest + " client"
			}
			t.Run(name, func(t *testing.T) {
				var pout, xout string
				var perr, xerr error
				ours := append([]string{c.ours, "-d", n.IfB}, common...)
				theirs := append([]string{c.perftest}, common...)
				if perftestServes {
					sout, sdone := cmServer(t, p, theirs...)
					cli := startIn(t, n.NsB, 90*time.Second, append(ours, n.IPA.String())...)
					xerr = cli.wait(90 * time.Second)
					perr = wait(t, c.perftest+" server", sdone, sout, 20*time.Second)
					pout, xout = sout.String(), cli.out.String()
				} else {
					srv := startIn(t, n.NsB, 90*time.Second, ours...)
					for i := 0; i < 500 && !strings.Contains(srv.out.String(), "Waiting for client"); i++ {
						time.Sleep(20 * time.Millisecond)
					}
					_, cout, cdone := app(t, n.NsA, p.dirA, append(theirs, n.IPB.String())...)
					perr = wait(t, c.perftest+" client", cdone, cout, 90*time.Second)
					xerr = srv.wait(20 * time.Second)
					pout, xout = cout.String(), srv.out.String()
				}
				if perr != nil || xerr != nil {
					t.Fatalf("perftest: %v\n%s\nxroce: %v\n%s", perr, pout, xerr, xout)
				}
				lat := strings.HasSuffix(c.ours, "_lat")
				checkTable(t, c.perftest, pout, lat, 4096, 200, false)
				checkTable(t, "xroce "+c.ours, xout, lat, 4096, 200, false)
				if !strings.Contains(pout, "Data ex. method : rdma_cm") || !strings.Contains(xout, "Data ex. method : rdma_cm") {
					t.Errorf("not an rdma_cm run:\nperftest:\n%s\nxroce:\n%s", pout, xout)
				}
				if testing.Verbose() {
					t.Logf("perftest:\n%s\nxroce:\n%s", pout, xout)
				}
			})
		}
	}
}
