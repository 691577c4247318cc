package main

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xroce/xroce/test/testnet"
)

// TestInterruptFlushesRecording: Ctrl-C (SIGINT) on a server recording with --pcap
// in the middle of a run exits 130 and leaves a whole capture: dump reads every
// frame with a good ICRC.
func TestInterruptFlushesRecording(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	file := filepath.Join(t.TempDir(), "cut.pcapng")
	srv := startIn(t, n.NsB, 0, "write_bw", "-d", n.IfB, "-s", "64", "-t", "1", "-D", "20", "--pcap", file)
	for i := 0; i < 500 && !strings.Contains(srv.out.String(), "Waiting for client"); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	// The client is killed at cleanup.
	startIn(t, n.NsA, 0, "write_bw", "-d", n.IfA, "-s", "64", "-t", "1", "-D", "20", n.IPB.String())
	time.Sleep(time.Second) // into the test
	// ip netns exec execs xroce: the process is xroce.
	must(t, srv.cmd.Process.Signal(syscall.SIGINT))
	if err := srv.wait(time.Hour); exitCode(err) != 130 {
		t.Fatalf("server after SIGINT: %v, want exit status 130\n%s", err, srv.out.String())
	}
	out, err := exec.Command(bin, "dump", file).CombinedOutput()
	m := regexp.MustCompile(`(\d+) RoCE: (\d+) ICRC ok, 0 ICRC BAD`).FindStringSubmatch(string(out))
	if err != nil || m == nil || m[1] != m[2] || m[1] == "0" {
		t.Fatalf("dump of the interrupted recording: %v\n%s", err, lastLine(string(out)))
	}
	t.Logf("interrupted recording: %s frames, all whole", m[1])
}
