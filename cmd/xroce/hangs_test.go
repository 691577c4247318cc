package main

import (
	"strings"
	"testing"
	"time"

	"github.com/xroce/xroce/test/testnet"
)

// bottleneck puts a tbf of rate on the bridge's port towards B (the server): a
// switch port slower than the hosts, as in a network with a slow link.
func bottleneck(t *testing.T, n *testnet.Net, rate string) {
	t.Helper()
	port := "pb" + strings.TrimPrefix(n.IfB, "xb")
	testnet.Sh(t, "ip", "netns", "exec", n.NsBr, "tc", "qdisc", "add", "dev", port, "root", "tbf", "rate", rate, "burst", "32k", "latency", "10ms")
}

// pairRun is what timedPair returns: both outputs and exit errors, and how long
// the client and the server ran from the client's start.
type pairRun struct {
	srv, cli         string
	srvErr, cliErr   error
	srvTook, cliTook time.Duration
}

// timedPair is pairRaw, timed.
func timedPair(t *testing.T, n *testnet.Net, srvArgs, cliArgs []string) pairRun {
	t.Helper()
	server := startIn(t, n.NsB, 60*time.Second, srvArgs...)
	for i := 0; i < 500 && !strings.Contains(server.out.String(), "Waiting for client") && !listening(n.NsB, 18515); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	client := startIn(t, n.NsA, 60*time.Second, cliArgs...)
	var r pairRun
	r.cliErr = client.wait(time.Hour)
	r.cliTook = time.Since(start)
	r.srvErr = server.wait(time.Hour)
	r.srvTook = time.Since(start)
	r.srv, r.cli = server.out.String(), client.out.String()
	return r
}

// TestDurationBound: -D is a time bound even on a slow path. Through a 50 Mbit/s
// bottleneck, 128 1 MiB WRITEs in flight take 21 s to drain; the run ends at -D
// (+ the exchanges) on both sides all the same, with its table. send_bw with -D on
// both sides: the receiver ends at its -D too (it waited 30 s for a completion).
func TestDurationBound(t *testing.T) {
	n := testnet.New(t, testnet.Options{Bridge: true})
	bottleneck(t, n, "50mbit")
	const d = 3
	for _, c := range []struct{ cmd, size string }{{"write_bw", "1048576"}, {"send_bw", "65536"}} {
		t.Run(c.cmd, func(t *testing.T) {
			args := []string{c.cmd, "-s", c.size, "-D", "3"}
			r := timedPair(t, n, append(args, "-d", n.IfB), append(args, "-d", n.IfA, n.IPB.String()))
			if r.srvErr != nil || r.cliErr != nil {
				t.Fatalf("server: %v\n%s\nclient: %v\n%s", r.srvErr, r.srv, r.cliErr, r.cli)
			}
			bound := (d + 4) * time.Second
			if r.cliTook > bound || r.srvTook > bound {
				t.Errorf("-D %d: the client ended after %v, the server after %v; want both within %v", d, r.cliTook.Round(time.Millisecond), r.srvTook.Round(time.Millisecond), bound)
			}
			if m := bwLine.FindAllStringSubmatch(r.cli, -1); len(m) < 2 || m[len(m)-1][1] != c.size {
				t.Errorf("client: no table:\n%s", r.cli)
			}
		})
	}
}
