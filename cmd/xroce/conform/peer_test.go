package conform

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xroce/xroce/cmd/xroce/oob"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// errFakeDown is what a test's Options.LinkState reports.
var errFakeDown = errors.New("the interface fake0 is down: bring it up (ip link set fake0 up)")

// closedPort returns a TCP port on 127.0.0.1 where nothing listens.
func closedPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// fakeServer listens on 127.0.0.1 and runs serve on each connection it takes.
func fakeServer(t *testing.T, serve func(net.Conn)) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			serve(c)
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// scenario returns the built-in scenario name.
func scenario(t *testing.T, name string) *Scenario {
	t.Helper()
	all, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range all {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no built-in scenario %s", name)
	return nil
}

// runFor runs one scenario against 127.0.0.1:port and returns its results, how
// long it took and the run's error.
func runFor(t *testing.T, o Options, name string) ([]Result, time.Duration, error) {
	t.Helper()
	o.Server, o.GID = "127.0.0.1", roce.GIDFromAddr(netip.MustParseAddr("127.0.0.1"))
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	start := time.Now()
	res, err := Run(context.Background(), o, []*Scenario{scenario(t, name)})
	return res, time.Since(start), err
}

// TestRunLinkDownWait: with this side's interface down, the wait for the
// server ends at once and names the interface, not the server.
func TestRunLinkDownWait(t *testing.T) {
	o := Options{Port: closedPort(t), LinkState: func() error { return errFakeDown }}
	_, took, err := runFor(t, o, "write-zero-length")
	want := "scenario write-zero-length: cannot reach the perftest server at 127.0.0.1:" + strconv.Itoa(o.Port) + ": " + errFakeDown.Error()
	if err == nil || err.Error() != want || took > time.Second {
		t.Errorf("after %v: %v\nwant %s", took, err, want)
	}
	// The responder role's wait for its client too.
	o.Port = closedPort(t)
	_, took, err = runFor(t, o, "resp-ghost-ack")
	if err == nil || !strings.HasSuffix(err.Error(), ": "+errFakeDown.Error()) || !strings.Contains(err.Error(), "waiting for the perftest client") || took > time.Second {
		t.Errorf("responder role, after %v: %v", took, err)
	}
}

// TestRunLinkDownMidRun: an exchange that fails after this side's interface
// went down puts the interface first, as the likely cause.
func TestRunLinkDownMidRun(t *testing.T) {
	var down atomic.Bool
	port := fakeServer(t, func(c net.Conn) { down.Store(true) }) // takes the connection, closes it
	o := Options{Port: port, LinkState: func() error {
		if down.Load() {
			return errFakeDown
		}
		return nil
	}}
	_, _, err := runFor(t, o, "write-zero-length")
	want := "scenario write-zero-length: " + errFakeDown.Error() + "; that is likely why: oob: 127.0.0.1:" + strconv.Itoa(port) + " closed the exchange early"
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got %v\nwant %s...", err, want)
	}
}

// silentLink is a transport.Link on which nothing answers.
type silentLink struct{ transport.Link }

func (silentLink) Send(f [][]byte) (int, error)        { return len(f), nil }
func (silentLink) Recv([][]byte) (int, error)          { return 0, nil }
func (silentLink) HardwareAddr() [6]byte               { return [6]byte{2, 0, 0, 0, 0, 1} }
func (silentLink) Resolve(netip.Addr) ([6]byte, error) { return [6]byte{2, 0, 0, 0, 0, 2}, nil }
func (silentLink) Wait(deadline time.Time) error       { time.Sleep(time.Until(deadline)); return nil }

// TestRunFailedScenarioNamesLink: a scenario that fails while this side's
// interface is down says so among its problems.
func TestRunFailedScenarioNamesLink(t *testing.T) {
	var down atomic.Bool
	port := fakeServer(t, func(c net.Conn) {
		sess := oob.NewSession(c, false, oob.BW, 10*time.Second)
		d := oob.Dest{QPN: 0x11, RKey: 1, VAddr: 0x1000, GID: roce.GIDFromAddr(netip.MustParseAddr("127.0.0.1"))}
		if _, _, err := sess.Connect([]oob.Dest{d}, roce.MTU1024, func([]oob.Dest, roce.MTU) error { return nil }); err != nil {
			return
		}
		down.Store(true)
		_, _ = sess.Finish(oob.Results{})
	})
	o := Options{Port: port, Link: silentLink{}, LinkState: func() error {
		if down.Load() {
			return errFakeDown
		}
		return nil
	}}
	res, _, err := runFor(t, o, "write-zero-length")
	if err != nil || len(res) != 1 {
		t.Fatalf("%v, %d results", err, len(res))
	}
	want := "this side: " + errFakeDown.Error()
	if p := res[0].Problems; res[0].Pass || len(p) == 0 || p[len(p)-1] != want {
		t.Errorf("pass %v, problems %q; want the last %q", res[0].Pass, p, want)
	}
}

// TestRunPeerOutput: a scenario that fails says how its peer command ended and
// shows its last lines, or that it printed nothing; a peer still running is
// killed and said to be.
func TestRunPeerOutput(t *testing.T) {
	closeAtOnce := fakeServer(t, func(net.Conn) {}) // a server that failed after taking the connection
	for _, c := range []struct {
		name, cmd string
		port      int
		want      []string
	}{
		{"after-connect", "echo 'xroce write_bw: GID kind mismatch: peer-marker-123' >&2; sleep 0.2; exit 1", closeAtOnce,
			[]string{"closed the exchange early", "; the peer command (--peer-cmd) exited with status 1; its last lines:\n    | xroce write_bw: GID kind mismatch: peer-marker-123"}},
		{"before-connect", "echo one; echo peer-marker-123 >&2; exit 3", closedPort(t),
			[]string{"no server took the connection at 127.0.0.1:", "before the peer command ended; the peer command (--peer-cmd) exited with status 3; its last lines:\n    | one\n    | peer-marker-123"}},
		{"silent", "false", closedPort(t),
			[]string{"before the peer command ended; the peer command (--peer-cmd) exited with status 1 and printed nothing"}},
		{"still-running", "echo waiting-marker; exec sleep 30", closeAtOnce,
			[]string{"closed the exchange early", "; the peer command (--peer-cmd) was still running: the suite killed it; its last lines:\n    | waiting-marker"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, took, err := runFor(t, Options{Port: c.port, PeerCmd: c.cmd, ConnectTimeout: 5 * time.Second}, "write-zero-length")
			if err == nil || took > 4*time.Second {
				t.Fatalf("after %v: %v", took, err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("no %q in\n%v", w, err)
				}
			}
		})
	}
}

// TestPeerOutputBound: the output kept of a peer command is its last
// peerOutputMax bytes, from a line's start.
func TestPeerOutputBound(t *testing.T) {
	var o peerOutput
	line := strings.Repeat("x", 99) + "\n"
	for i := 0; i < 5000; i++ {
		o.Write([]byte(line))
	}
	o.Write([]byte("last\n"))
	s := o.String()
	if len(s) > peerOutputMax || !strings.HasSuffix(s, line+"last\n") || !strings.HasPrefix(s, line) || len(o.b) > 2*peerOutputMax {
		t.Errorf("kept %d bytes (buffer %d), ends %q", len(s), len(o.b), s[max(0, len(s)-10):])
	}
}
