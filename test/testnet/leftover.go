package testnet

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Leftover is a process still running in one of a test network's namespaces.
type Leftover struct {
	Pid     int
	Ns      string
	Cmdline string
}

// Leftovers lists the processes that run in the network's namespaces, other than
// the test binary itself (its threads may visit them with setns).
func (n *Net) Leftovers() []Leftover {
	var left []Leftover
	for _, ns := range []string{n.NsA, n.NsB, n.NsBr} {
		if ns == "" {
			continue
		}
		out, _ := exec.Command("ip", "netns", "pids", ns).Output()
		for _, f := range strings.Fields(string(out)) {
			pid, err := strconv.Atoi(f)
			if err != nil || pid == os.Getpid() {
				continue
			}
			cmd, _ := os.ReadFile("/proc/" + f + "/cmdline")
			left = append(left, Leftover{Pid: pid, Ns: ns, Cmdline: strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))})
		}
	}
	return left
}

// reapLeftovers fails the test for each process the test left running in the
// network's namespaces (a test that starts a process stops it on every exit path),
// and kills them so that they do not outlive the test.
func (n *Net) reapLeftovers(t testing.TB) {
	left := n.Leftovers()
	for _, p := range left {
		t.Errorf("testnet: process %d (%s) still runs in namespace %s after the test: the test must stop what it starts", p.Pid, p.Cmdline, p.Ns)
		_ = syscall.Kill(p.Pid, syscall.SIGKILL)
	}
	for i := 0; i < 100 && len(left) > 0 && len(n.Leftovers()) > 0; i++ {
		time.Sleep(20 * time.Millisecond)
	}
}
