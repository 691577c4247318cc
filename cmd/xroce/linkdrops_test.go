package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xroce/xroce/test/testnet"
)

// TestDaemonLinkDrops: frames the kernel drops before the engine takes them in (a
// daemon stopped while 1500 datagrams to UDP port 4791 arrive) are logged with
// the cause, and `xroce stat` lists the AF_XDP counters that moved, under the
// link, after the engine's.
func TestDaemonLinkDrops(t *testing.T) {
	needRoot(t)
	n := testnet.New(t, testnet.Options{MTU: 1500})
	dir := t.TempDir()
	cmd, out, _ := spawnServing(t, n.NsA, n.IfA, dir)
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testnet.Sh(t, "ip", "netns", "exec", n.NsB, "bash", "-c", fmt.Sprintf("for i in $(seq 1500); do echo x > /dev/udp/%s/4791; done", n.IPA))
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(\d+) frames dropped by the kernel before the engine took them in, since \d\d:\d\d:\d\d \((\d+) in all, in xroce stat; xsk_rx_dropped with xsk_rx_fill_ring_empty_descs: no free receive chunk, as the engine had not handed them back\): the engine fell behind the link`)
	var m []string
	for deadline := time.Now().Add(5 * time.Second); m == nil; time.Sleep(50 * time.Millisecond) {
		if m = re.FindStringSubmatch(out.String()); m == nil && time.Now().After(deadline) {
			t.Fatalf("no drop logged within 5 s:\n%s", out.String())
		}
	}
	st := status(t, dir)
	t.Logf("%s\n%s", m[0], st)
	lost := 0
	for _, name := range []string{"xsk_rx_dropped", "xsk_rx_ring_full"} {
		if v := regexp.MustCompile(`(?m)^    ` + name + ` +(\d+)$`).FindStringSubmatch(st); v != nil {
			k, _ := strconv.Atoi(v[1])
			lost += k
		}
	}
	if m[1] != m[2] || strconv.Itoa(lost) != m[2] || lost < 100 || lost > 1500 ||
		!strings.Contains(st, "  link (AF_XDP sockets; the kernel's xdp_statistics):\n") || strings.Index(st, "rcvd_pkts") > strings.Index(st, "xsk_") {
		t.Errorf("logged %s of %s lost; status (%d lost):\n%s", m[1], m[2], lost, st)
	}
}
