package conform

import (
	"context"
	"errors"
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

// peerCmd is a peer server started for one scenario (Options.PeerCmd), or a
// responder-role scenario's client (Options.ClientCmd).
type peerCmd struct {
	cmd     *exec.Cmd
	what    string     // "peer command (--peer-cmd)" or "client command (--client-cmd)"
	out     peerOutput // its stdout and stderr
	done    chan error
	ended   bool  // wait saw the end
	killed  bool  // the suite ended it
	exitErr error // and its error
}

// peerOutputMax bounds the output kept of a peer command: its last bytes.
const peerOutputMax = 64 << 10

// peerOutput keeps the last peerOutputMax bytes a peer command wrote; it can be
// read while the command runs.
type peerOutput struct {
	mu  sync.Mutex
	b   []byte
	cut bool // earlier output was dropped
}

// Write appends p, dropping the oldest output past twice peerOutputMax; it never
// fails.
func (o *peerOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.b = append(o.b, p...)
	if len(o.b) > 2*peerOutputMax {
		o.b = append(o.b[:0], o.b[len(o.b)-peerOutputMax:]...)
		o.cut = true
	}
	return len(p), nil
}

// String returns the last peerOutputMax bytes written, from a line's start when
// earlier output was dropped.
func (o *peerOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	b := o.b
	if len(b) > peerOutputMax {
		b, o.cut = b[len(b)-peerOutputMax:], true
	}
	s := string(b)
	if o.cut {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	return s
}

// expandPeerCmd fills a --peer-cmd template: {server} (write_bw, ...), {size}
// (the server's -s), {iters} (its -n), {port} (its TCP port), {mtu} (bytes).
func expandPeerCmd(tmpl string, s *Scenario, port int) string {
	return strings.NewReplacer("{server}", s.Setup.Server, "{size}", strconv.Itoa(s.Setup.Size),
		"{iters}", strconv.Itoa(s.Setup.Iters), "{port}", strconv.Itoa(port), "{mtu}", strconv.Itoa(s.Setup.MTU)).Replace(tmpl)
}

// startPeer runs line with sh -c, its output collected; flag is the option it
// came from (--peer-cmd, --client-cmd), for the messages.
func startPeer(line, flag string) (*peerCmd, error) {
	what := "peer command"
	if flag == "--client-cmd" {
		what = "client command"
	}
	p := &peerCmd{cmd: exec.Command("sh", "-c", line), what: what + " (" + flag + ")", done: make(chan error, 1)}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s %q: %w", flag, line, err)
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
			p.killed = true
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
	p.killed = true
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
// the error says what was tried. A peer command that ends first ends the wait
// (explain says how), and so does this side's interface failing (linkState, when
// set: the error is a linkDown).
func dial(ctx context.Context, addr string, limit time.Duration, peer *peerCmd, linkState func() error) (net.Conn, error) {
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
		if err := checkLink(linkState); err != nil {
			return nil, fmt.Errorf("cannot reach the perftest server at %s: %w", addr, err)
		}
		if peer != nil {
			if done, _ := peer.exited(); done {
				return nil, fmt.Errorf("no server took the connection at %s before the peer command ended", addr)
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

// explain adds to err, a scenario's failure, how the peer command ended and its
// last lines: a peer that fails (a wrong flag, a GID of another kind) says why in
// its output, which the suite holds. It waits up to limit for the command to end
// (a peer that failed is exiting), then kills it. A nil p, or a failure of this
// side's interface (linkDown), which is the cause, leave err as it is.
func (p *peerCmd) explain(err error, limit time.Duration) error {
	if p == nil {
		return err
	}
	var ld linkDown
	if errors.As(err, &ld) {
		p.kill()
		return err
	}
	p.wait(limit)
	return fmt.Errorf("%w; the %s %s", err, p.what, p.ending())
}

// peerTailLines and peerTailMax bound the output explain shows.
const (
	peerTailLines = 10
	peerTailMax   = 4 << 10
)

// ending says how the ended command ended, and its last lines of output (or that
// it printed nothing).
func (p *peerCmd) ending() string {
	how := "exited with status 0"
	var ee *exec.ExitError
	switch {
	case p.killed:
		how = "was still running: the suite killed it"
	case errors.As(p.exitErr, &ee) && ee.ExitCode() >= 0:
		how = fmt.Sprintf("exited with status %d", ee.ExitCode())
	case p.exitErr != nil:
		how = fmt.Sprintf("ended: %v", p.exitErr)
	}
	out := strings.TrimSpace(p.out.String())
	if out == "" {
		return how + " and printed nothing"
	}
	if len(out) > peerTailMax {
		out = out[len(out)-peerTailMax:]
		out = out[strings.IndexByte(out, '\n')+1:] // a whole first line (none: all of it)
	}
	return how + "; its last lines:\n" + indent(tail(out, peerTailLines))
}

// indent puts each line of s behind "    | ".
func indent(s string) string {
	return "    | " + strings.ReplaceAll(s, "\n", "\n    | ")
}

// linkDown is this side's interface unable to carry frames (Options.LinkState's
// error): the cause of a failed wait or exchange, named instead of the peer.
type linkDown struct{ error }

func (e linkDown) Unwrap() error { return e.error }

// checkLink runs linkState (nil: no check) and marks its error as a linkDown.
func checkLink(linkState func() error) error {
	if linkState == nil {
		return nil
	}
	if err := linkState(); err != nil {
		return linkDown{err}
	}
	return nil
}
