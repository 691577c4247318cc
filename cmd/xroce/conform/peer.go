package conform

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/xroce/xroce/cmd/xroce/oob"
)

// peerCmd is a peer server started for one scenario (Options.PeerCmd).
type peerCmd struct {
	cmd     *exec.Cmd
	out     bytes.Buffer // read only after the command ended (exec's copying is done then)
	done    chan error
	ended   bool  // wait saw the end
	exitErr error // and its error
}

// expandPeerCmd fills a --peer-cmd template: {server} (write_bw, ...), {size}
// (the server's -s), {iters} (its -n), {port} (its TCP port), {mtu} (bytes).
func expandPeerCmd(tmpl string, s *Scenario, port int) string {
	return strings.NewReplacer("{server}", s.Setup.Server, "{size}", strconv.Itoa(s.Setup.Size),
		"{iters}", strconv.Itoa(s.Setup.Iters), "{port}", strconv.Itoa(port), "{mtu}", strconv.Itoa(s.Setup.MTU)).Replace(tmpl)
}

// startPeer runs line with sh -c, its output collected.
func startPeer(line string) (*peerCmd, error) {
	p := &peerCmd{cmd: exec.Command("sh", "-c", line), done: make(chan error, 1)}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("--peer-cmd %q: %w", line, err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	running.Lock()
	running.m[p] = struct{}{}
	running.Unlock()
	return p, nil
}

// running are the peer commands started and not yet waited for.
var running = struct {
	sync.Mutex
	m map[*peerCmd]struct{}
}{m: map[*peerCmd]struct{}{}}

// KillPeers kills the process groups of the peer commands still running: for
// xroce's SIGINT and SIGTERM handling, so an interrupted run leaves no server.
func KillPeers() {
	running.Lock()
	defer running.Unlock()
	for p := range running.m {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
}

// wait waits up to limit for the peer command to end; past it the command's
// process group is killed. It returns the command's error (exit status) and output.
func (p *peerCmd) wait(limit time.Duration) (string, error) {
	if !p.ended {
		select {
		case err := <-p.done:
			p.end(err)
		case <-time.After(limit):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
			p.end(fmt.Errorf("still running %v after the scenario: killed", limit))
		}
	}
	return p.out.String(), p.exitErr
}

// kill ends the command's process group now and waits for it.
func (p *peerCmd) kill() {
	if p.ended {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	p.end(<-p.done)
}

// end records the command's end.
func (p *peerCmd) end(err error) {
	p.ended, p.exitErr = true, err
	running.Lock()
	delete(running.m, p)
	running.Unlock()
}

// exited says, without waiting, whether the command has ended, and how.
func (p *peerCmd) exited() (bool, error) {
	if p.ended {
		return true, p.exitErr
	}
	select {
	case err := <-p.done:
		p.end(err)
		return true, p.exitErr
	default:
		return false, nil
	}
}

// dial connects to the server's TCP port, retrying while the connection is
// refused (a server between two runs, or still starting) until limit passes; then
// the error says what was tried. A peer command that ends first ends the wait.
func dial(ctx context.Context, addr string, limit time.Duration, peer *peerCmd) (net.Conn, error) {
	end := time.Now().Add(limit)
	var last error
	for {
		left := time.Until(end)
		if left <= 0 {
			return nil, fmt.Errorf("cannot reach the perftest server at %s within %v: %v", addr, limit, last)
		}
		c, err := oob.Dial(addr, min(left, 2*time.Second))
		if err == nil {
			return c, nil
		}
		last = err
		if peer != nil {
			if done, perr := peer.exited(); done {
				return nil, fmt.Errorf("the peer command ended (%v) before its server took the connection: %s", perr, tail(peer.out.String(), 5))
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
