package xdp_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xroce/xroce/bpf"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// nftCounter returns the packets counted by the rule of chain bridge cemark fw whose
// text contains match.
func nftCounter(t *testing.T, ns, match string) int {
	t.Helper()
	out := sh(t, "ip", "netns", "exec", ns, "nft", "list", "chain", "bridge", "cemark", "fw")
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, match) {
			if m := regexp.MustCompile(`counter packets (\d+)`).FindStringSubmatch(line); m != nil {
				v, _ := strconv.Atoi(m[1])
				return v
			}
		}
	}
	t.Fatalf("no counter for %q in\n%s", match, out)
	return 0
}

// TestDCQCNThroughBridge: A and B run DCQCN (transport.CCDCQCN) through a bridge
// whose nftables bridge-family forward chain sets CE on a tenth of the ECN-capable
// RoCE frames towards B, at random (`ip ecn ect0 numgen random mod 100 < 10 ip ecn
// set ce`: marking above a rate, `limit rate over`, depends on how fast this machine
// is at the moment; test/scripts/dcqcn-bench.sh measures with it). B answers with CNPs (opcode 0x81, counted on
// the bridge by their BTH byte), A takes every one with a good ICRC and cuts its rate,
// and every WRITE and SEND still moves the right bytes. A capture of the CNPs on the
// bridge port towards A decodes in tshark as CNPs to A's QP.
func TestDCQCNThroughBridge(t *testing.T) {
	n := newTestNet(t, 1500, true)
	nft := func(args ...string) { sh(t, append([]string{"ip", "netns", "exec", n.nsBr, "nft"}, args...)...) }
	nft("add", "table", "bridge", "cemark")
	nft("add", "chain", "bridge", "cemark", "fw", "{ type filter hook forward priority 0; }")
	nft("add", "rule", "bridge", "cemark", "fw", "ip", "daddr", n.ipB.String(), "udp", "dport", "4791", "ip", "ecn", "ect0",
		"numgen", "random", "mod", "100", "<", "10", "counter", "ip", "ecn", "set", "ce")
	nft("add", "rule", "bridge", "cemark", "fw", "ip", "daddr", n.ipA.String(), "udp", "dport", "4791", "@th,64,8", "0x81", "counter")
	nft("add", "rule", "bridge", "cemark", "fw", "ip", "daddr", n.ipB.String(), "udp", "dport", "4791", "ip", "ecn", "not-ect", "counter")
	capture := startCNPCapture(t, n)
	la, lb := openXDP(t, n, bpf.ModeNative)
	opts := transport.Options{CC: transport.CCDCQCN}
	a, b := newEndpointOpts(t, la, 2<<20+4096, opts), newEndpointOpts(t, lb, 2<<20+4096, opts)
	connect(t, a, b, n.ipB, roce.MTU1024)
	connect(t, b, a, n.ipA, roce.MTU1024)
	stop := run(t, a, b)
	defer stop()
	for i := range 20 {
		transfer(t, a, b, "WRITE", 1<<20, byte(2*i))
		transfer(t, a, b, "SEND", 1<<20, byte(2*i+1))
	}
	ca, cb := a.dev.Counters(), b.dev.Counters()
	marked, sent := cb.Get(transport.CntNpECNMarkedRoCEPackets), cb.Get(transport.CntNpCNPSent)
	handled := ca.Get(transport.CntRpCNPHandled)
	onWire := nftCounter(t, n.nsBr, "@th,64,8 0x81")
	t.Logf("bridge: %d frames marked CE, %d CNPs towards A; A %v; B %v", nftCounter(t, n.nsBr, "ip ecn set ce"), onWire,
		nonzero(ca.Map()), nonzero(cb.Map()))
	switch {
	case marked == 0 || sent == 0:
		t.Fatalf("B saw %d CE-marked frames and sent %d CNPs: the marking path was not exercised", marked, sent)
	case sent > marked || int(sent) != onWire || handled != sent:
		t.Fatalf("B sent %d CNPs for %d marked frames, the bridge saw %d, A handled %d", sent, marked, onWire, handled)
	case ca.Get(transport.CntRpCNPIgnored) != 0 || ca.Get(transport.CntRcvdICRCErr) != 0 || ca.Get(transport.CntRcvdMalformed) != 0:
		t.Fatalf("A dropped CNPs: %v", nonzero(ca.Map()))
	case nftCounter(t, n.nsBr, "not-ect") != 0:
		t.Fatalf("RoCE frames towards B left A without ECT")
	}
	capture(a.qp.QPN())
}

// startCNPCapture captures the first CNPs on the bridge port towards A (dumpcap, BPF
// filter on the BTH opcode byte). The function it returns waits for the capture and
// checks with tshark that every frame is a CNP to QPN qpn, not malformed. Without
// dumpcap and tshark the capture is skipped (logged).
func startCNPCapture(t *testing.T, n *testNet) func(qpn uint32) {
	if _, err := exec.LookPath("dumpcap"); err != nil {
		t.Log("no dumpcap: the CNPs are not captured")
		return func(uint32) {}
	}
	file := filepath.Join(t.TempDir(), "cnp.pcap")
	port := "pa" + strings.TrimSuffix(strings.TrimPrefix(n.nsA, "xr"), "a")
	cmd := exec.Command("ip", "netns", "exec", n.nsBr, "dumpcap", "-q", "-P", "-i", port, "-f", "udp dst port 4791 and udp[8] = 0x81",
		"-c", "5", "-a", "duration:60", "-w", file)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var werr error
	done := make(chan struct{})
	go func() { werr = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill() // ip netns exec has become dumpcap: the process this test started
			<-done
		}
	})
	for i := 0; i < 50; i++ { // dumpcap creates the file when it captures
		if _, err := os.Stat(file); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return func(qpn uint32) {
		select {
		case <-done:
			if werr != nil {
				t.Fatalf("dumpcap: %v", werr)
			}
		case <-time.After(60 * time.Second):
			t.Fatal("dumpcap did not capture 5 CNPs")
		}
		out, err := exec.Command("tshark", "-r", file, "-T", "fields", "-e", "infiniband.bth.opcode", "-e", "infiniband.bth.destqp",
			"-e", "infiniband.bth.p_key", "-e", "infiniband.bth.psn", "-e", "_ws.malformed").Output()
		if err != nil {
			t.Fatalf("tshark: %v\n%s", err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		want := "129\t0x" + strconv.FormatUint(uint64(qpn)|1<<24, 16)[1:] + "\t65535\t0" // and an empty _ws.malformed
		if len(lines) != 5 {
			t.Fatalf("tshark read %d frames, want 5:\n%s", len(lines), out)
		}
		for _, l := range lines {
			if strings.TrimRight(l, "\t") != want {
				t.Fatalf("tshark: %q, want %q (opcode 129, destqp, P_Key, PSN 0, not malformed)", l, want)
			}
		}
	}
}
