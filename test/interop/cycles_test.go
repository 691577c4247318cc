package interop

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCMCycles: connection churn against rdma_rxe (issue 15: rdma_rxe's user-space
// CM once stopped answering after about 1,000 cycles, SoftRoCE/librxe-dev#14).
// XROCE_INTEROP_CYCLES=N runs N `xroce rping -c -C 1 -V` connections against one
// `rping -s -P` on rdma_rxe, then N of the guest's `rping -c -C 1 -V` against one
// `xroce rping -s -P`; every one must pass. It prints the counts and the QPs rdma_rxe
// holds after each half.
func TestCMCycles(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("XROCE_INTEROP_CYCLES"))
	if n <= 0 {
		t.Skip("set XROCE_INTEROP_CYCLES=N (e.g. 1000)")
	}
	lab, bin := rxeLab(t, 1500)
	qps := func() string {
		out, _, _ := lab.Guest("rdma resource show qp | grep -vc 'lqpn 1 '")(20 * time.Second)
		return strings.TrimSpace(out)
	}

	// xroce clients against rxe's persistent server.
	srv := lab.Guest("rping -s -P -p 7176 >/tmp/rping-s.out 2>&1")
	_ = srv
	lab.Guest("i=0; while ! rdma resource show cm_id | grep -q LISTEN && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done")(40 * time.Second)
	start := time.Now()
	for i := range n {
		cmd := exec.Command("ip", "netns", "exec", lab.NS, "timeout", "30", bin, "rping", "-c", "-a", lab.GuestIP.String(),
			"-p", "7176", "-C", "1", "-V")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("xroce → rxe cycle %d: %v\n%s", i, err, out)
		}
	}
	t.Logf("%d xroce rping clients against rdma_rxe's rping -s -P passed in %v; rdma_rxe QPs left (not QP1): %s", n, time.Since(start).Round(time.Second), qps())
	lab.Guest("killall rping; true")(10 * time.Second)

	// rxe clients against xroce's persistent server.
	p, err := startHost(nil, "ip", "netns", "exec", lab.NS, bin, "rping", "-s", "-P", "-p", "7177", "--pcap", "/tmp/xroce-cycles.pcap")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	start = time.Now()
	out, rc, err := lab.Guest(fmt.Sprintf("f=0; for i in $(seq %d); do rping -c -a %s -p 7177 -C 1 -V >/tmp/rc.out 2>&1 || { f=$((f+1)); echo fail $i; cat /tmp/rc.out; }; done; echo failures $f", n, lab.XIP))(time.Duration(n) * 10 * time.Second)
	if err != nil || rc != 0 || !strings.Contains(out, "failures 0\n") {
		t.Fatalf("rxe → xroce: rc %d %v\n%s\nxroce server:\n%s", rc, err, tail(out, 2000), tail(p.out.String(), 2000))
	}
	t.Logf("%d rdma_rxe rping clients against xroce rping -s -P passed in %v; rdma_rxe QPs left (not QP1): %s", n, time.Since(start).Round(time.Second), qps())
	_ = p.cmd.Process.Kill()
}

// rxeLab prepares the guest image and starts a lab at netdev MTU mtu for a test
// outside the matrix, and builds xroce; the lab and any host processes go with the
// test.
func rxeLab(t *testing.T, mtu int) (*Lab, string) {
	t.Helper()
	img, err := Prepare(15 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	bin := xroceBin(t)
	lab, err := NewLab(img, mtu)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		killHostProcs()
		lab.Close()
	})
	return lab, bin
}
