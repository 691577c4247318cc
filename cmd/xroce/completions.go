package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/xroce/xroce/cmd/xroce/oob"
	"github.com/xroce/xroce/transport"
)

// errCompletion explains a failed work completion the way users need it.
func (c *conn) errCompletion(wc transport.WorkCompletion) error {
	switch wc.Status {
	case transport.WC_RETRY_EXC_ERR:
		if err := c.linkCheck(); err != nil {
			return fmt.Errorf("completion %v (%v): the peer did not answer after every retry: %w", wc.Status, wc.Opcode, err)
		}
		stopped := "it exited or stopped (see its output)"
		switch {
		case c.t.name == "pingpong": // ibv_rc_pingpong's peer exits after its own -n
			stopped = "it exited or stopped (see its output), or was given a smaller -n"
		case c.o != nil && c.o.all: // a peer without -a ends after one size
			stopped = "it exited or stopped (see its output), or ran one size only (give -a to both sides)"
		}
		outage := fmt.Sprintf("about %v", retriesLast(transport.DefaultTimeout))
		if c.o != nil { // the perftest tools' -u
			outage = fmt.Sprintf("about %v at -u %d: a larger -u rides out longer outages", retriesLast(c.o.qpTimeout), c.o.qpTimeout)
		}
		return fmt.Errorf("completion %v (%v): the peer did not answer after every retry. If it ran until then, %s, or the path stopped carrying frames for longer than the retries last (%s); if it never answered, look for a wrong GID index (%s) on either side, a path MTU the peer cannot take (-m), a peer running another connection type (pingpong --connection, perftest -c), or a firewall dropping UDP port 4791",
			wc.Status, wc.Opcode, stopped, outage, c.gidOpt())
	case transport.WC_RNR_RETRY_EXC_ERR:
		return fmt.Errorf("completion %v (%v): the peer had no receive posted", wc.Status, wc.Opcode)
	case transport.WC_REM_ACCESS_ERR:
		if c.o != nil && c.o.all { // perftest sizes a buffer for -a's largest message only with -a
			return fmt.Errorf("completion %v (%v): the peer refused the access (rkey, address or size outside its region): its buffer is smaller than this side's message, as when the peer runs without -a (give -a to both sides), or it runs another test (give both sides the same test)", wc.Status, wc.Opcode)
		}
		return fmt.Errorf("completion %v (%v): the peer refused the access (rkey, address or size outside its region): its buffer is smaller than -s (give both sides the same -s), or it runs another test (give both sides the same test)", wc.Status, wc.Opcode)
	case transport.WC_REM_INV_REQ_ERR:
		return fmt.Errorf("completion %v (%v): the peer found the request invalid: a path MTU mismatch, a message larger than its receive buffer, or an operation its QP does not take, as when it runs another test (give both sides the same -m, -s and test)", wc.Status, wc.Opcode)
	case transport.WC_WR_FLUSH_ERR:
		if cause := c.pathMTUCause(); cause != "" {
			return fmt.Errorf("completion %v (%v): the QP went to the error state after %s", wc.Status, wc.Opcode, cause)
		}
		return fmt.Errorf("completion %v (%v): the QP went to the error state before this work request completed, after a request of the peer's that this side refused (a packet that does not fit this side's path MTU: longer than it, or shorter in the middle of a message, as a peer with a smaller -m sends; a message longer than its receive buffer; an access outside its region) or an earlier failed completion: give both sides the same -m, -s and test, and see the peer's output for its first error", wc.Status, wc.Opcode)
	case transport.WC_LOC_LEN_ERR:
		if wc.Opcode == transport.WC_RECV {
			return fmt.Errorf("completion %v (%v): the peer sent a message larger than our receive buffer: its -s is larger than ours, or it runs another test (give both sides the same -s and the same test)", wc.Status, wc.Opcode)
		}
	}
	return fmt.Errorf("completion %v (%v)", wc.Status, wc.Opcode)
}

// retriesLast is about how long a request goes unanswered before the tools' QPs
// (retry count 7) give up at local ACK timeout u: the first send and 7 retries,
// each 4.096 µs × 2^u apart (IBTA Vol 1 §11.2.4.2; the adaptive delay may
// shorten them on a lossy path).
func retriesLast(u int) time.Duration {
	if u <= 0 || u > 31 {
		return 0
	}
	return (8 * time.Duration(4096<<u) * time.Nanosecond).Round(time.Millisecond)
}

// counterWatch returns a function that reports how far the provider's counter
// name (rdma_rxe's hw_counters names) moved since its last call, or since
// counterWatch.
func (c *conn) counterWatch(name string) func() uint64 {
	read := func() uint64 {
		if c.env == nil {
			return 0
		}
		return c.env.prov.Counters()[name]
	}
	seen := read()
	return func() uint64 {
		now := read()
		moved := now - seen
		seen = now
		return moved
	}
}

// waitCQ polls the CQ into wcs, waiting for at least one completion. It returns
// 0 and no error once stop passes (zero: no stop), and an error when the peer
// closes the out-of-band exchange or sends its end of the test while this side
// still waits (peerCheck), when the interface goes away, or after limit without
// a completion or a frame from the peer; after oob.QuietAfter without either it
// says so (quiet).
func (c *conn) waitCQ(wcs []transport.WorkCompletion, limit time.Duration, stop time.Time) (int, error) {
	if n := c.cq.Poll(wcs); n > 0 {
		return n, nil
	}
	// Without -e the tool polls a while before it sleeps, as perftest polls (for
	// ever): a completion that comes within c.spin is taken without the wake-up
	// of a sleeping thread. With -e it sleeps on the CQ's event at once.
	// It polls after each yield before it looks at the clock: the engine's goroutine,
	// which shares the thread (procs.go), may keep it longer than c.spin, and what it
	// completed meanwhile is taken without the sleeping wait's context and timer.
	if c.spin > 0 {
		for end := time.Now().Add(c.spin); ; {
			runtime.Gosched()
			if n := c.cq.Poll(wcs); n > 0 {
				return n, nil
			}
			if !time.Now().Before(end) {
				break
			}
		}
	}
	// A long message (hundreds of MiB) may take longer than limit to complete: the
	// wait goes on while frames still arrive.
	// The counters are read from the end of the first slice on: most waits end
	// sooner, and reading them builds a map (a few µs, every wait of a 64 B write_bw).
	var alive, rnr func() uint64
	var rnrs uint64       // RNR NAKs since the wait's first slice, while nothing else came
	var rnrFrom time.Time // when the peer began answering with RNR NAKs only
	start := time.Now()
	lastFrame, told := start, false // the last slice in which a frame came; Quiet said
	for {
		slice := waitSlice
		if !stop.IsZero() {
			left := time.Until(stop)
			if left <= 0 {
				return 0, nil
			}
			slice = min(slice, left)
		}
		ctx, cancel := context.WithTimeout(context.Background(), slice)
		err := c.cq.Wait(ctx)
		cancel()
		if err == nil {
			return c.cq.Poll(wcs), nil
		}
		if !errors.Is(err, context.DeadlineExceeded) { // the CQ is in error (overrun)
			return 0, err
		}
		if alive == nil {
			alive, rnr = c.counterWatch("rcvd_pkts"), c.counterWatch("rcvd_rnr_err")
		}
		waited := time.Since(start)
		if err := c.peerCheck(waited); err != nil {
			return 0, err
		}
		if err := c.bidirIdle(waited); err != nil {
			return 0, err
		}
		// Packets that do not fit our path MTU came (UD and UC drop them; RC's NAK
		// fails the QP): the two sides' -m differ, for the whole run.
		if cause := c.pathMTUCause(); cause != "" {
			return 0, fmt.Errorf("no completion for %v: %s", waited.Round(time.Millisecond), cause)
		}
		// The peer answers, but only with RNR NAKs: it has no receive posted for our
		// SEND and, a few seconds on, never will (rnr_retry 7 retries for ever).
		if n := rnr(); n > 0 {
			rnrs += n
			if rnrFrom.IsZero() {
				rnrFrom = time.Now()
			}
		} else {
			rnrs, rnrFrom = 0, time.Time{}
		}
		if !rnrFrom.IsZero() && time.Since(rnrFrom) >= rnrOnly {
			return 0, fmt.Errorf("no completion for %v: the peer posts no receives (RNR NAK, %d times in the last %v): are -n (and pingpong's -r) the same on both sides, and does the peer run the same test?", waited.Truncate(time.Second), rnrs, rnrOnly)
		}
		if waited >= time.Second {
			if err := c.linkCheck(); err != nil {
				return 0, fmt.Errorf("no completion for %v: %w", waited.Round(time.Second), err)
			}
		}
		if waited >= strayOnly {
			if err := c.strays.check(c.env, waited); err != nil {
				return 0, err
			}
		}
		if alive() > 0 {
			lastFrame, told = time.Now(), false
		}
		silent := time.Since(lastFrame)
		if silent >= oob.QuietAfter && silent < limit && !told {
			told = true
			c.quiet(silent, limit)
		}
		if silent < limit {
			continue
		}
		if hint := c.ucDropHint(); hint != "" {
			return 0, fmt.Errorf("no completion for %v and %w since: %s", limit, errPeerSilent, hint)
		}
		return 0, fmt.Errorf("no completion for %v and %w: the peer is not answering (or has exited); check that both sides were given the same test, -n and -s, the GID index (%s), the path MTU (-m), and that UDP port 4791 is open", limit, errPeerSilent, c.gidOpt())
	}
}

// pathMTUCause names the packets this side refused for not fitting its path MTU,
// or is "" when there were none (the tools' device is their own, so all of them
// this run): longer than it (rcvd_oversize; UD and UC drop them, RC answers NAK
// Invalid Request), or FIRST and MIDDLE packets shorter than it (rcvd_undersize;
// such a packet carries exactly one path MTU, IBA §9.7.5.1.4). Either way the two
// sides' -m differ.
func (c *conn) pathMTUCause() string {
	if c.env == nil {
		return ""
	}
	cnt := c.env.prov.Counters()
	if n := cnt["rcvd_oversize"]; n > 0 {
		return fmt.Sprintf("this side refused %d packet%s longer than its path MTU (%d): the peer runs a larger -m; give both sides the same -m", n, plural(int(n)), c.mtu.Bytes())
	}
	if n := cnt["rcvd_undersize"]; n > 0 {
		return fmt.Sprintf("this side refused %d FIRST or MIDDLE packet%s shorter than its path MTU (%d): the peer runs a smaller -m; give both sides the same -m", n, plural(int(n)), c.mtu.Bytes())
	}
	return ""
}

// ucDropHint says, when this side dropped UC packets with the rest of their
// message (rcvd_msg_dropped), why a message never completed; "" otherwise.
// (Packets that do not fit the path MTU end a wait at once: waitCQ, pathMTUCause.)
func (c *conn) ucDropHint() string {
	if c.env == nil {
		return ""
	}
	if n := c.env.prov.Counters()["rcvd_msg_dropped"]; n > 0 {
		return fmt.Sprintf("this side dropped %d UC packets with the rest of their message (one was lost on the way, as when the interface's receive ring overflows): UC does not resend, so such a message never completes; use RC for messages of many packets, or smaller ones", n)
	}
	return ""
}

// errPeerSilent is in waitCQ's error when nothing came from the peer for its limit.
var errPeerSilent = errors.New("no frame from the peer")

// waitSlice is how long waitCQ and pollByte wait between looks at the peer and
// the interface.
const waitSlice = 250 * time.Millisecond

// rnrOnly is how long waitCQ lets the peer answer with nothing but RNR NAKs before
// it calls the test stuck: a receiver of these tools reposts its receives within
// microseconds, so seconds of RNR NAKs mean it stopped (a smaller -n than ours).
const rnrOnly = 5 * time.Second

// strayOnly is how long waitCQ waits before it looks whether every frame of the
// test so far came for no QP of it (strayMark.check).
const strayOnly = 3 * time.Second

// strayMark is where the device's counters stood before the exchange that
// connected the test's QPs: frames that came for no QP, a QP not ready, from
// another peer or with another service (rcvd_unknown_qp), and frames accepted for
// a QP (rcvd_pkts). The zero value checks nothing.
type strayMark struct {
	set               bool
	unknown, accepted uint64
}

// markStrays reads the counters for a strayMark.
func markStrays(e *env) strayMark {
	m := e.prov.Counters()
	return strayMark{set: true, unknown: m["rcvd_unknown_qp"], accepted: m["rcvd_pkts"]}
}

// check returns an error when, since the mark, frames came and not one was for a
// QP: the peer sends with another connection type (RC to a UD QP, ...) or to
// another QP, and no wait will end.
func (m strayMark) check(e *env, waited time.Duration) error {
	if !m.set || e == nil {
		return nil
	}
	now := markStrays(e)
	if now.accepted != m.accepted || now.unknown == m.unknown {
		return nil
	}
	return fmt.Errorf("no completion for %v: frames came since the exchange (%d) and none was for this test's QPs (counter rcvd_unknown_qp): the peer sends with another connection type or to another QP; give both sides the same tool and connection type (pingpong's --connection, perftest's -c)", waited.Truncate(time.Second), now.unknown-m.unknown)
}

// peerMovedOn is how long a side waits for completions (or the peer's write)
// while the peer has begun its end-of-test exchange before it calls the two
// tests different: long enough for the last completions of a run to be polled.
const peerMovedOn = 2 * time.Second

// peerCheck looks at the out-of-band connection of a test that has waited that
// long: an error if the peer closed it, or if it began its end-of-test exchange
// peerMovedOn ago or more while this side still waits.
func (c *conn) peerCheck(waited time.Duration) error {
	if err := c.linkCheckDue(); err != nil {
		return err
	}
	if c.peer == nil {
		return nil
	}
	pending, err := c.peer.Watch()
	if err != nil && !errors.Is(err, oob.ErrPeerClosed) {
		return err // the peer's host stopped answering: the error says so
	}
	if err != nil {
		return fmt.Errorf("%w while this side waits for its test's completions (none for %v): the peer exited or failed (see its output); if it ended without an error, it ran fewer iterations or sizes (-n, -D, -a) than this side: give both the same%s", err, waited.Round(time.Millisecond), c.peerHint())
	}
	if pending && waited >= peerMovedOn {
		return fmt.Errorf("the peer ended its test (it began the closing exchange) while this side still waits for it (%v): the two sides run different tests, -n, -D, -a or -b; give both the same", waited.Round(time.Millisecond))
	}
	return nil
}

// peerHint names, for an error, what the counters say the peer did: SENDs that
// found no receive here.
func (c *conn) peerHint() string {
	if c.env == nil {
		return ""
	}
	n := c.env.prov.Counters()["send_rnr_err"]
	switch {
	case n > 0 && c.o.rxDepth < defRxSend && c.t.op == transport.WR_SEND:
		return fmt.Sprintf("; %d SENDs found no receive here (RNR NAKs), as a sender faster than -r %d receives makes them", n, c.o.rxDepth)
	case n > 0:
		return fmt.Sprintf("; it sent SENDs this side had no receive for (%d RNR NAKs): does it run the same test?", n)
	}
	return ""
}

// completions waits up to 30 s (c.limit if set) for a batch of completions, polled into wcs, and
// returns it; a completion that failed gives its errCompletion instead.
func (c *conn) completions(wcs []transport.WorkCompletion) ([]transport.WorkCompletion, error) {
	return c.completionsUntil(wcs, time.Time{})
}

// completionsUntil is completions that returns no completion and no error once
// stop passes (zero: no stop).
func (c *conn) completionsUntil(wcs []transport.WorkCompletion, stop time.Time) ([]transport.WorkCompletion, error) {
	limit := 30 * time.Second
	if c.limit > 0 {
		limit = c.limit
	}
	n, err := c.waitCQ(wcs, limit, stop)
	if err != nil {
		return nil, err
	}
	if err := c.linkCheckDue(); err != nil {
		return nil, err
	}
	for _, wc := range wcs[:n] {
		if wc.Status != transport.WC_SUCCESS {
			return nil, c.errCompletion(wc)
		}
	}
	return wcs[:n], nil
}
