package main

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/xroce/xroce/test/testnet"
)

// bgProc is an xroce a test runs in the background in a namespace.
type bgProc struct {
	cmd  *exec.Cmd
	out  testnet.Output
	done chan struct{}
	err  error // the exit error, once done is closed
}

// startIn starts `xroce args...` in namespace ns, under timeout(1) when limit > 0,
// in a process group of its own: t.Cleanup kills the whole group (timeout and
// xroce) if it still runs, so no test leaves a process behind on any exit path.
func startIn(t testing.TB, ns string, limit time.Duration, args ...string) *bgProc {
	t.Helper()
	argv := []string{"netns", "exec", ns}
	if limit > 0 {
		argv = append(argv, "timeout", fmt.Sprint(int(limit.Seconds())))
	}
	p := &bgProc{cmd: exec.Command("ip", append(append(argv, bin), args...)...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	return p
}

// kill ends the process group (ip netns exec and timeout exec or fork into it)
// and waits for the process.
func (p *bgProc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// errRunning is wait's error for a process that still runs.
var errRunning = errors.New("still running")

// wait waits up to d for the process to end and returns its exit error, or
// errRunning if it still runs after d.
func (p *bgProc) wait(d time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		return errRunning
	}
}

// exitCode is the exit status err (from exec) stands for: 0 for nil, -1 when the
// process did not exit normally.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}
