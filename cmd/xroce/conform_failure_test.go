package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/xroce/xroce/test/testnet"
)

// TestConformLinkDown: conform on an interface that is down says so at once,
// with the fix, instead of blaming the server it cannot reach. The bridge keeps
// the server's interface up, as on a real network.
func TestConformLinkDown(t *testing.T) {
	n := testnet.New(t, testnet.Options{Bridge: true})
	testnet.Sh(t, "ip", "-n", n.NsA, "link", "set", n.IfA, "down")
	peer := fmt.Sprintf("ip netns exec %s %s {server} -d %s -s {size} -n {iters} -m {mtu} -p {port}", n.NsB, bin, n.IfB)
	start := time.Now()
	p := startIn(t, n.NsA, time.Minute, "conform", "-d", n.IfA, "--run", "write-zero-length", "--peer-cmd", peer, n.IPB.String())
	err := p.wait(time.Minute)
	out := p.out.String()
	want := fmt.Sprintf("xroce conform: the interface %s is down: bring it up (ip link set %s up)\n", n.IfA, n.IfA)
	if exitCode(err) != 1 || !strings.Contains(out, want) || strings.Contains(out, "cannot reach") || time.Since(start) > 3*time.Second {
		t.Errorf("interface down: %v after %v:\n%s\nwant %q", err, time.Since(start), out, want)
	}
}

// TestConformPeerOutput: when the server that --peer-cmd started fails, before
// or after it took the connection, conform's error says how the command ended
// and shows its last lines (or that it printed nothing).
func TestConformPeerOutput(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	server := fmt.Sprintf("ip netns exec %s %s {server} -d %s -s {size} -n {iters} -m {mtu} -p {port}", n.NsB, bin, n.IfB)
	for _, c := range []struct {
		name, peer string
		want       []string
	}{
		// The server on its IPv6 GID takes the connection, then refuses ours.
		{"gid-kind", server + " -x 0", []string{"closed the exchange early", "the peer command (--peer-cmd) exited with status 1; its last lines:\n", "GID kind mismatch"}},
		{"marker", "echo peer-marker-123 >&2; exit 3", []string{"the peer command (--peer-cmd) exited with status 3; its last lines:\n", "peer-marker-123"}},
		{"false", "false", []string{"the peer command (--peer-cmd) exited with status 1 and printed nothing"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			p := startIn(t, n.NsA, time.Minute, "conform", "-d", n.IfA, "--run", "write-zero-length", "--peer-cmd", c.peer, n.IPB.String())
			err := p.wait(time.Minute)
			out := p.out.String()
			if exitCode(err) != 1 || time.Since(start) > 8*time.Second {
				t.Errorf("%v after %v:\n%s", err, time.Since(start), out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("no %q in\n%s", w, out)
				}
			}
		})
	}
}
