package daemon

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/xroce/xroce/cmd/xroce/icmp"
	"github.com/xroce/xroce/transport/rdmacm"
)

// unreachableFor is how long ICMP errors about the CM's requests to a destination
// must keep coming before the connection attempts to it end: two REQs refused
// (they go about 6.4 s apart: the CM Response Timeout, 4.3 s, and twice the packet
// life time, 1.07 s each; ibcm.DefaultPacketLifeTime), not one that raced a peer's
// start.
const unreachableFor = 3 * time.Second

// runGap is the silence after which an ICMP error about a destination begins a new
// run of them (a new connection attempt): more than the 6.4 s between two REQs.
// Counting from an earlier attempt's errors ended the next attempt at its first
// error, 20 s "of errors" later (a fresh user's trial).
const runGap = 10 * time.Second

// icmpWatch ends, through the ICMP errors the kernel receives for our RoCEv2
// datagrams, the connection attempts that would otherwise wait through every CM
// retry (about 100 s): a peer host that runs no RoCE endpoint (port unreachable),
// or a router with no route to it (destination unreachable). A hop limit that
// runs out on the way (time exceeded) is logged once per destination: a QP's data
// then fails by itself with retry-exceeded, and the log says why. rdma_rxe's
// rdma_cm does neither. Without CAP_NET_RAW nothing is watched.
type icmpWatch struct {
	end  func(dst netip.Addr, err error) int // ends the attempts to dst (rdmacm.Service.Unreachable)
	logf func(string, ...any)
	now  func() time.Time

	mu    sync.Mutex
	first map[netip.Addr]time.Time // first error of the current run, by destination
	last  map[netip.Addr]time.Time // last error, by destination
	said  map[netip.Addr]bool      // time exceeded logged
}

func newICMPWatch(end func(netip.Addr, error) int, logf func(string, ...any)) *icmpWatch {
	return &icmpWatch{end: end, logf: logf, now: time.Now,
		first: map[netip.Addr]time.Time{}, last: map[netip.Addr]time.Time{}, said: map[netip.Addr]bool{}}
}

// watchICMP starts watching for svc until ctx ends.
func watchICMP(ctx context.Context, svc *rdmacm.Service, logf func(string, ...any)) {
	w := newICMPWatch(svc.Unreachable, logf)
	for _, v6 := range []bool{false, true} {
		if err := icmp.Watch(ctx, v6, w.report); err != nil {
			logf("not watching ICMP errors (%v): a connection to a host without a RoCE endpoint waits through every CM retry", err)
			return
		}
	}
}

// report takes one ICMP error about a RoCEv2 datagram.
func (w *icmpWatch) report(r icmp.Report) {
	now := w.now()
	w.mu.Lock()
	if r.Kind == icmp.TimeExceeded {
		once := !w.said[r.Dst]
		w.said[r.Dst] = true
		w.mu.Unlock()
		if once {
			w.logf("ICMP time exceeded from %v for RoCE frames to %v: their hop limit (the address handle's grh.hop_limit) ran out on the way; ibv_rc_pingpong and the other ibv_*_pingpong examples set 1, which no router passes: run them on one link, or use perftest or qperf, which set 64 or more", r.From, r.Dst)
		}
		return
	}
	t0, seen := w.first[r.Dst]
	if !seen || now.Sub(w.last[r.Dst]) > runGap { // a new run of errors
		w.first[r.Dst], t0 = now, now
	}
	w.last[r.Dst] = now
	w.mu.Unlock()
	if now.Sub(t0) < unreachableFor {
		return
	}
	hint := "no RoCE endpoint runs there (no rdma_rxe, RDMA NIC or xroce daemon): start one, or check the address"
	if r.Kind == icmp.Unreachable {
		hint = "the network or host is unreachable from there: check the address and the routes"
	}
	err := &icmpError{fmt.Sprintf("%v answered our connection requests to %v (UDP port 4791) with ICMP %v for %v: %s",
		r.From, r.Dst, r.Kind, now.Sub(t0).Round(100*time.Millisecond), hint)}
	if n := w.end(r.Dst, err); n > 0 {
		w.logf("rdma_connect to %v: %v", r.Dst, err)
		// The attempts it ended close this run: the next attempt, even one made at
		// once, counts its own errors (a client retrying its connect was ended at
		// its first refused REQ, 0.13 s in: a fresh user's trial).
		w.mu.Lock()
		if w.first[r.Dst] == t0 {
			delete(w.first, r.Dst)
			delete(w.last, r.Dst)
		}
		w.mu.Unlock()
	}
}

// icmpError ends a connection attempt that ICMP errors answered; it is an
// rdmacm.ErrUnreachable.
type icmpError struct{ msg string }

func (e *icmpError) Error() string { return e.msg }
func (e *icmpError) Unwrap() error { return rdmacm.ErrUnreachable }
