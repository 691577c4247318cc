package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// ucxEnv confines UCX to the xroce device's verbs transports, so that no byte goes
// through shared memory or TCP. UCX before openucx/ucx#10209 (Debian 12's 1.13.1)
// takes a UD packet's address family from the completion's sl (mlx5's habit);
// rdma_rxe, and xroce as it, report sl 0, so its UD transport drops every packet
// unless the GID check is off, on rdma_rxe alike (README, "UCX and MPI").
var ucxEnv = []string{"env", "UCX_NET_DEVICES=xroce0:1", "UCX_TLS=rc_verbs,ud_verbs", "UCX_UD_VERBS_ETH_DGID_CHECK=n"}

// TestVerbsUCX: Debian's unmodified ucx_info lists the xroce device with its
// rc_verbs and ud_verbs transports (UCX lists a device only when its
// /dev/infiniband node opens read-write: the daemon makes it), and ucx_perftest's
// tag-matching latency and bandwidth tests and RDMA PUT run between two namespaces
// over the xroce devices alone.
func TestVerbsUCX(t *testing.T) {
	if _, err := os.Stat("/usr/bin/ucx_perftest"); err != nil {
		t.Skip("no ucx_perftest: apt-get install ucx-utils (.ci/run installs it)")
	}
	p := newVerbsPair(t)
	_, out, done := app(t, p.n.NsA, p.dirA, "ucx_info", "-d")
	err := wait(t, "ucx_info -d", done, out, 30*time.Second)
	for _, want := range []string{"# Memory domain: xroce0", "#      Transport: rc_verbs", "#      Transport: ud_verbs", "#         Device: xroce0:1"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("ucx_info -d: %v: no %q in\n%s", err, want, out.String())
		}
	}
	final := regexp.MustCompile(`(?m)^Final: +\d+ `)
	for i, test := range [][]string{{"-t", "tag_lat", "-n", "2000"}, {"-t", "tag_bw", "-s", "65536", "-n", "500"}, {"-t", "ucp_put_bw", "-s", "65536", "-n", "500"}} {
		port := []string{"-p", fmt.Sprint(13340 + i)}
		_, sout, sdone := server(t, p.n.NsB, p.dirB, append(append(ucxEnv, "ucx_perftest"), port...)...)
		args := append(append(append(ucxEnv, "ucx_perftest", p.n.IPB.String()), port...), test...)
		_, cout, cdone := app(t, p.n.NsA, p.dirA, args...)
		cerr := wait(t, "ucx_perftest "+test[1]+" client", cdone, cout, 60*time.Second)
		serr := wait(t, "ucx_perftest "+test[1]+" server", sdone, sout, 10*time.Second)
		if cerr != nil || serr != nil || !final.MatchString(cout.String()) {
			t.Errorf("ucx_perftest %s: client %v, server %v\nclient:\n%s\nserver:\n%s", test[1], cerr, serr, cout.String(), sout.String())
		}
	}
}
