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

// timedPair is pairRaw that also returns how long the client and the server took
// from the client's start.
func timedPair(t *testing.T, n *testnet.Net, srvArgs, cliArgs []string) (srv, cli string, srvErr, cliErr error, cliTook, srvTook time.Duration) {
	t.Helper()
	server := startIn(t, n.NsB, 60*time.Second, srvArgs...)
	for i := 0; i < 500 && !strings.Contains(server.out.String(), "Waiting for client") && !listening(n.NsB, 18515); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	client := startIn(t, n.NsA, 60*time.Second, cliArgs...)
	cliErr = client.wait(time.Hour)
	cliTook = time.Since(start)
	srvErr = server.wait(time.Hour)
	srvTook = time.Since(start)
	return server.out.String(), client.out.String(), srvErr, cliErr, cliTook, srvTook
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
			srv, cli, srvErr, cliErr, cliTook, srvTook := timedPair(t, n, append(args, "-d", n.IfB), append(args, "-d", n.IfA, n.IPB.String()))
			if srvErr != nil || cliErr != nil {
				t.Fatalf("server: %v\n%s\nclient: %v\n%s", srvErr, srv, cliErr, cli)
			}
			bound := (d + 4) * time.Second
			if cliTook > bound || srvTook > bound {
				t.Errorf("-D %d: the client ended after %v, the server after %v; want both within %v", d, cliTook.Round(time.Millisecond), srvTook.Round(time.Millisecond), bound)
			}
			if m := bwLine.FindAllStringSubmatch(cli, -1); len(m) < 2 || m[len(m)-1][1] != c.size {
				t.Errorf("client: no table:\n%s", cli)
			}
		})
	}
}
