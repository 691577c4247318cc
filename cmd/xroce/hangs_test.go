package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xroce/xroce/cmd/xroce/oob"
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

// TestStoppedPeerNamed: a client stopped (SIGSTOP) in the middle of its test
// leaves the server waiting for it, for a minute in the exchange (write_bw, whose
// server only waits for the end of the test) or half a minute for a completion
// (send_bw). Within oob.QuietAfter and a second or two of checking, and long
// before either ends, the server says on stderr that the peer went silent and
// how long it will wait.
func TestStoppedPeerNamed(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	for _, c := range []struct{ cmd, limit string }{{"write_bw", "until 1m0s without one"}, {"send_bw", "until 30s without one"}} {
		t.Run(c.cmd, func(t *testing.T) {
			args := []string{c.cmd, "-s", "65536", "-n", "100000000"}
			server := startIn(t, n.NsB, 90*time.Second, append(args, "-d", n.IfB)...)
			for i := 0; i < 500 && !listening(n.NsB, 18515); i++ {
				time.Sleep(20 * time.Millisecond)
			}
			client := startIn(t, n.NsA, 90*time.Second, append(args, "-d", n.IfA, n.IPB.String())...)
			for i := 0; i < 500 && !strings.Contains(client.out.String(), "#bytes"); i++ {
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(500 * time.Millisecond) // the test runs
			if err := syscall.Kill(-client.cmd.Process.Pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			stopped := time.Now()
			const want = "no frame from the peer for 5s while this side waits for it: the peer may be stopped (SIGSTOP, a debugger), hung, or cut off; waiting "
			for time.Since(stopped) < 12*time.Second && !strings.Contains(server.out.String(), want) {
				time.Sleep(50 * time.Millisecond)
			}
			took := time.Since(stopped)
			out := server.out.String()
			if !strings.Contains(out, "xroce "+c.cmd+": "+want+c.limit+", or Ctrl-C\n") {
				t.Fatalf("no notice naming the silent peer %v after the client stopped; server:\n%s", took.Round(time.Millisecond), out)
			}
			if took < oob.QuietAfter-time.Second {
				t.Errorf("notice %v after the client stopped, before %v of silence", took, oob.QuietAfter)
			}
			if err := server.wait(0); err != errRunning {
				t.Errorf("server ended (%v) at the notice, want it waiting:\n%s", err, out)
			}
		})
	}
}
