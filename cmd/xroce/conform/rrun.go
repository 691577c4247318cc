package conform

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/xroce/xroce/cmd/xroce/oob"
	"github.com/xroce/xroce/roce"
)

// The responder role: the suite is the server of a perftest client. It
// listens on its own address (the GID's) and perftest's port, takes the
// client's connection (the client started by Options.ClientCmd, or by hand),
// makes perftest's exchange as the server (handing over its QPN, PSN, rkey and
// address, learning the client's QPN and first PSN), then answers the client's
// requests on the link as the scenario's rules say, until the client ends its
// test, exits, or setup.limit passes.

// respBase is the address the suite advertises for its buffer.
const respBase = 0x7f5a_0000_0000

// respRKey is the rkey it advertises (0 for send_bw, as perftest's SEND tests).
const respRKey = 0x5a17

// lingerAfterEnd is how long the suite keeps answering after the client ended
// its test or exited: packets still on their way are recorded.
const lingerAfterEnd = 300 * time.Millisecond

// expandClientCmd fills a --client-cmd template: {client} (write_bw, ...),
// {size}, {iters}, {port}, {mtu} (bytes), {timeout} (the client's -u), {limit}
// (setup.limit in whole seconds, rounded up) and {addr} (the suite's address,
// the server the client connects to).
func expandClientCmd(tmpl string, s *Scenario, port int, addr string) string {
	limit := (time.Duration(s.Setup.Limit) + time.Second - 1) / time.Second
	return strings.NewReplacer("{client}", s.Setup.Client, "{size}", strconv.Itoa(s.Setup.Size),
		"{iters}", strconv.Itoa(s.Setup.Iters), "{port}", strconv.Itoa(port), "{mtu}", strconv.Itoa(s.Setup.MTU),
		"{timeout}", strconv.Itoa(s.Setup.Timeout), "{limit}", strconv.Itoa(int(limit)), "{addr}", addr).Replace(tmpl)
}

// listener is the suite's perftest port for the responder role, opened at the
// first responder scenario of a run and closed at its end.
type listener struct{ ln *net.TCPListener }

func (l *listener) open(addr string) error {
	if l.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listening for the perftest client on %s: %w", addr, err)
	}
	l.ln = ln.(*net.TCPListener)
	return nil
}

func (l *listener) close() {
	if l.ln != nil {
		l.ln.Close()
	}
}

// accept waits up to limit for the client's connection; a client command that
// ends first ends the wait (explain says how), and so does this side's interface
// failing (linkState, when set: the error is a linkDown).
func (l *listener) accept(ctx context.Context, limit time.Duration, peer *peerCmd, linkState func() error) (net.Conn, error) {
	end := time.Now().Add(limit)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if time.Now().After(end) {
			return nil, fmt.Errorf("no perftest client connected to %s within %v: start one (ib_write_bw ... %s), or give --client-cmd", l.ln.Addr(), limit, l.ln.Addr().(*net.TCPAddr).IP)
		}
		_ = l.ln.SetDeadline(time.Now().Add(100 * time.Millisecond))
		c, err := l.ln.Accept()
		if err == nil {
			return c, nil
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			return nil, err
		}
		if err := checkLink(linkState); err != nil {
			return nil, fmt.Errorf("waiting for the perftest client on %s: %w", l.ln.Addr(), err)
		}
		if peer != nil {
			if done, _ := peer.exited(); done {
				return nil, fmt.Errorf("no perftest client connected to %s before the client command ended", l.ln.Addr())
			}
		}
	}
}

// runResponder runs a responder-role scenario: the client command, the
// exchange as the server, the answers, the client's end, the verdict.
func runResponder(ctx context.Context, o *Options, s *Scenario, qpn uint32, l *listener) (res Result, err error) {
	res = Result{Name: s.Name, Role: RoleResponder, Client: s.Setup.Client, Spec: s.Spec}
	addr := o.GID.Addr().String()
	if err := l.open(net.JoinHostPort(addr, strconv.Itoa(o.Port))); err != nil {
		return res, err
	}
	var peer *peerCmd
	if o.ClientCmd != "" {
		if peer, err = startPeer(expandClientCmd(o.ClientCmd, s, o.Port, addr), "--client-cmd"); err != nil {
			return res, err
		}
		defer func() {
			if err != nil { // the client's output often says why
				err = peer.explain(err, peerExitWait)
			}
			peer.wait(time.Second) // on an error path: do not leave it running
		}()
	}
	nc, err := l.accept(ctx, o.ConnectTimeout, peer, o.LinkState)
	if err != nil {
		return res, err
	}
	limit := time.Duration(s.Setup.Limit)
	link, closeTap, err := o.scenarioLink(s, &res)
	if err != nil {
		nc.Close()
		return res, err
	}
	defer closeTap()
	(&exchange{link: link}).drain()
	sess := oob.NewSession(nc, false, kindOf(s.Setup.Client), limit+10*time.Second)
	done := make(chan error, 1) // the exchange's end
	quit := make(chan struct{}) // the exchange failed: stop answering
	served := make(chan serveEnd, 1)
	// The responder starts answering once the client's QP is known, before the
	// barriers that let the client start: no packet waits in the link.
	r, err := o.serverConnect(sess, s, qpn, func(r *responder) {
		r.link = link
		go func() { served <- r.serve(peer, done, quit, limit) }()
	})
	if err != nil {
		close(quit)
		if r != nil {
			<-served
		}
		sess.Abort()
		return res, err
	}
	go func() {
		_, err := sess.Finish(oob.Results{Size: uint64(s.Setup.Size), Iters: uint64(s.Setup.Iters)})
		done <- err
	}()
	end := <-served
	if end.err != nil {
		sess.Abort()
		return res, end.err
	}
	sess.Abort() // ends a Finish still waiting (the client failed or was ended)
	exchErr := end.exchErr
	if !end.finished {
		select {
		case exchErr = <-done:
		case <-time.After(2 * time.Second):
			exchErr = errors.New("the exchange did not end")
		}
	}
	killed := end.killed
	var exitErr error
	if peer != nil {
		res.PeerOutput, exitErr = peer.wait(15 * time.Second)
	} else {
		exitErr = exchErr
	}
	got := outcome(exitErr, res.PeerOutput, killed)
	ps := passes(r.reqs)
	res.Requests = r.reqs
	res.Expected = describeExpectedPasses(s.Expect.Requests, s.Expect.Client.Name)
	res.Observed = describePasses(ps) + " · client " + got
	bad := judgePasses(s.Expect.Requests, ps)
	if got != s.Expect.Client.Name {
		bad = append(bad, fmt.Sprintf("the client ended %s, want %s", got, s.Expect.Client.Name))
	} else if got == "success" && exchErr != nil {
		bad = append(bad, fmt.Sprintf("the exchange's end: %v", exchErr))
	}
	res.Problems, res.Pass = bad, len(bad) == 0
	return res, nil
}

// serverConnect runs perftest's exchange up to the test as the server, with
// the key message of the suite's responder: its QPN, a random PSN, its rkey
// and buffer address; it returns the responder, addressed to the client's QP.
func (o *Options) serverConnect(sess *oob.Session, s *Scenario, qpn uint32, ready func(*responder)) (*responder, error) {
	client := s.Setup.Client
	out := 1
	if client == "read_bw" || client == "atomic_bw" {
		out = 16 // as perftest's READ and atomic tests ask
	}
	rkey := uint32(respRKey)
	if client == "send_bw" {
		rkey = 0
	}
	local := oob.Dest{OutReads: out, QPN: qpn, PSN: rand.Uint32() & roce.PSNMask, RKey: rkey, VAddr: respBase, GID: o.GID}
	mtu, _ := roce.MTUFromBytes(s.Setup.MTU)
	b := max(s.Setup.Size, 4096)
	mem := make([]byte, 2*b)
	for i := range mem {
		mem[i] = byte(i*7 + i>>8) // READ data that shows an offset
	}
	if client == "atomic_bw" {
		clear(mem)
	}
	var r *responder
	_, _, err := sess.Connect([]oob.Dest{local}, mtu, func(remote []oob.Dest, m roce.MTU) error {
		d := remote[0]
		ip := d.GID.Addr()
		if !ip.Is4() {
			return fmt.Errorf("the client's GID %v is not IPv4-mapped: run it with the GID index of its IPv4 RoCEv2 GID (-x 1 on rdma_rxe, usually -x 3 on mlx5)", d.GID)
		}
		mac, err := o.Link.Resolve(ip)
		if err != nil {
			return fmt.Errorf("resolving %v's Ethernet address: %w", ip, err)
		}
		c := &Conn{LocalMAC: o.Link.HardwareAddr(), PeerMAC: mac, LocalIP: o.GID.Addr(), PeerIP: ip,
			LocalQPN: qpn, Peer: Peer{QPN: d.QPN}, EPSN: d.PSN, MTU: m}
		r = &responder{c: c, rules: s.Answer, mem: mem, base: respBase, rkey: rkey, start: time.Now(),
			atomics: map[int]uint64{}}
		ready(r)
		return nil
	})
	return r, err
}

// serveEnd is how responder.serve ended: killed says the suite ended the
// client at setup.limit, finished whether the exchange's end came (exchErr its
// error); err is a failed link.
type serveEnd struct {
	killed, finished bool
	exchErr, err     error
}

// serve answers the client's packets until the client ends its test (done
// delivers the exchange's end) or exits, and lingerAfterEnd more; until limit
// passes, when it ends the client (killed); or until quit is closed.
func (r *responder) serve(peer *peerCmd, done <-chan error, quit <-chan struct{}, limit time.Duration) (e serveEnd) {
	bufs := make([][]byte, 64)
	var stop time.Time
	for {
		n, err := r.link.Recv(bufs)
		if err != nil {
			e.err = fmt.Errorf("receiving: %w", err)
			return e
		}
		for _, f := range bufs[:n] {
			var pk roce.Packet
			if pk.Decode(f) != nil || pk.BTH.DestQP != r.c.LocalQPN || pk.SrcAddr() != r.c.PeerIP {
				continue
			}
			if e.err = r.handle(&pk, time.Now()); e.err != nil {
				return e
			}
		}
		if n > 0 {
			continue
		}
		now := time.Now()
		if !stop.IsZero() && now.After(stop) {
			return e
		}
		if stop.IsZero() {
			select {
			case e.exchErr = <-done:
				e.finished = true
				stop = now.Add(lingerAfterEnd)
			case <-quit:
				return e
			default:
			}
			if stop.IsZero() && peer != nil {
				if ended, _ := peer.exited(); ended {
					stop = now.Add(lingerAfterEnd)
				}
			}
			if stop.IsZero() && now.Sub(r.start) > limit {
				if peer != nil {
					peer.kill()
				}
				e.killed = true
				return e
			}
		}
		_ = r.link.Wait(now.Add(2 * time.Millisecond))
	}
}
