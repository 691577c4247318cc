package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/xroce/xroce/test/testnet"
)

// cpuTime is the CPU one process used, from its rusage.
type cpuTime struct {
	User, Sys time.Duration
}

// side is one process of a measurement: its command line and extra environment.
type side struct {
	args    []string
	env     []string
	sigterm bool // stopped with SIGTERM when the context ends (SIGKILL 5 s later), not SIGKILL
}

// proc is a process running in a network namespace under `ip netns exec` (which
// execs the command, so the rusage is the command's own).
type proc struct {
	cmd  *exec.Cmd
	out  testnet.Output
	done chan struct{}
	err  error
}

func start(ctx context.Context, ns string, s side) (*proc, error) {
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns}, s.args...)...)
	p.cmd.Env = append(os.Environ(), s.env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	p.cmd.WaitDelay = 5 * time.Second
	if s.sigterm {
		p.cmd.Cancel = func() error { return p.cmd.Process.Signal(syscall.SIGTERM) }
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// readiness is what a server has to show before its client starts.
type readiness struct {
	what  string // for the errors
	ready func(p *proc) bool
}

// printed is ready once the process printed s.
func printed(s string) readiness {
	return readiness{fmt.Sprintf("%q", s), func(p *proc) bool { return strings.Contains(p.out.String(), s) }}
}

// waitFor waits until the process is ready, and fails if it exits first or limit
// passes.
func (p *proc) waitFor(r readiness, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for !r.ready(p) {
		select {
		case <-p.done:
			return fmt.Errorf("exited before %s (%v):\n%s", r.what, p.err, p.out.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no %s within %v:\n%s", r.what, limit, p.out.String())
		}
	}
	return nil
}

// wait waits for the process to exit, killing it after limit, and returns its CPU
// time.
func (p *proc) wait(limit time.Duration) (cpuTime, error) {
	select {
	case <-p.done:
	case <-time.After(limit):
		_ = p.cmd.Process.Kill()
		<-p.done
		return cpuTime{}, fmt.Errorf("still running after %v, killed:\n%s", limit, p.out.String())
	}
	if p.err != nil {
		out := p.out.String()
		return cpuTime{}, fmt.Errorf("%v: %s\n%s", p.err, lastLine(out), out)
	}
	st := p.cmd.ProcessState
	return cpuTime{User: st.UserTime(), Sys: st.SystemTime()}, nil
}

// pairOut is what both processes of a measurement printed, and their CPU time.
type pairOut struct {
	server, client string
	cpu            [2]cpuTime // [0] the client (namespace A), [1] the server (B)
}

// runPair starts server in namespace B, waits until it is ready, runs client in
// namespace A to its end, then waits for the server to finish. Both are killed if
// the pair takes longer than limit.
func (b *bench) runPair(ctx context.Context, server, client side, ready readiness, limit time.Duration) (pairOut, error) {
	return b.runPairOn(ctx, b.net, server, client, ready, limit)
}

// runPairOn is runPair on the namespaces of net.
func (b *bench) runPairOn(ctx context.Context, net *testnet.Net, server, client side, ready readiness, limit time.Duration) (pairOut, error) {
	var r pairOut
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	srv, err := start(ctx, net.NsB, server)
	if err != nil {
		return r, err
	}
	if err := srv.waitFor(ready, 15*time.Second); err != nil {
		_ = srv.cmd.Process.Kill()
		<-srv.done
		return r, fmt.Errorf("server %s: %v", strings.Join(server.args, " "), err)
	}
	cli, err := start(ctx, net.NsA, client)
	if err != nil {
		_ = srv.cmd.Process.Kill()
		<-srv.done
		return r, err
	}
	r.cpu[0], err = cli.wait(limit)
	r.client = cli.out.String()
	if err != nil {
		_ = srv.cmd.Process.Kill()
		<-srv.done
		return r, fmt.Errorf("client %s: %v\nserver:\n%s", strings.Join(client.args, " "), err, srv.out.String())
	}
	r.cpu[1], err = srv.wait(20 * time.Second)
	r.server = srv.out.String()
	if err != nil {
		return r, fmt.Errorf("server %s: %v", strings.Join(server.args, " "), err)
	}
	return r, nil
}

// lastLine returns the last non-empty line of s: a failed command's error.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
