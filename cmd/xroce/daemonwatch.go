package main

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/xroce/xroce/cmd/xroce/daemon"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// linkWarnings says what, on the interface the daemon starts on, keeps its
// applications from reaching anyone: it is down or without carrier (the port is
// PORT_DOWN, as rdma_rxe's on such a netdev), or its MTU carries no RoCE frame.
// The daemon serves anyway, as rdma_rxe's device exists there; watchInterface logs
// what changes later.
func linkWarnings(name string) []string {
	var w []string
	if err := interfaceState(name); err != nil {
		w = append(w, fmt.Sprintf("%v (the port is PORT_DOWN until then)", err))
	}
	if ifi, err := net.InterfaceByName(name); err == nil && ifi.MTU < roce.LargestIPPacket(roce.MTU256, false) {
		w = append(w, fmt.Sprintf("the interface %s's MTU %d carries no RoCE frame (%s): nothing can be sent until it is raised (ip link set %s mtu 1500); the port reports active_mtu 256, as rdma_rxe does",
			name, ifi.MTU, smallestFrames, name))
	}
	return w
}

// smallestFrames says what the smallest path MTU's longest packets need.
var smallestFrames = fmt.Sprintf("a path MTU of 256 needs %d over IPv4, %d over IPv6", roce.LargestIPPacket(roce.MTU256, false), roce.LargestIPPacket(roce.MTU256, true))

// portChanged says that the served interface's state changed the port's: err is
// interfaceState's now (nil: up and running).
func portChanged(name string, err error) string {
	if err == nil {
		return fmt.Sprintf("the interface %s is up and has carrier: the port is PORT_ACTIVE", name)
	}
	return fmt.Sprintf("%v: the port is PORT_DOWN; connected QPs lose what they send until it is back (an RC QP fails when its retries run out)", err)
}

// watchPathMTU logs, at most once per oversizeLogEvery each, that the device
// refused packets longer than their QP's path MTU (rcvd_oversize moved) or FIRST
// and MIDDLE packets shorter than it (rcvd_undersize): a peer connected with a
// larger, or a smaller, path MTU than the QP it sends to. The application sees only
// its QP's error (RC: the peer's IBV_WC_REM_INV_REQ_ERR, its own flushed work
// requests; UD and UC: messages that never arrive), as on rdma_rxe, which logs
// nothing; the daemon's log names the cause.
func watchPathMTU(ctx context.Context, c *transport.Counters, logf func(string, ...any)) {
	go watchCount(ctx, c, transport.CntRcvdOversize, logf, "longer than their QP's path MTU refused", "larger")
	watchCount(ctx, c, transport.CntRcvdUndersize, logf, "shorter than their QP's path MTU in the middle of a message refused", "smaller")
}

// watchCount is watchPathMTU's watch of one counter: what the packets were, and
// whether the peer's path MTU is larger or smaller.
func watchCount(ctx context.Context, c *transport.Counters, cnt int, logf func(string, ...any), what, peer string) {
	daemon.WatchGrowth(ctx, ifaceWatch, oversizeLogEvery, func() uint64 { return c.Get(cnt) }, func(grew, n uint64) {
		logf("%d packet%s %s (%s %d): a peer sends with a %s path MTU than the QP it reaches; give both sides the same path MTU (perftest -m, ibv_rc_pingpong -m)",
			grew, plural(int(grew)), what, transport.CounterNames[cnt], n, peer)
	})
}

// oversizeLogEvery bounds watchCount's log lines, per counter.
const oversizeLogEvery = 10 * time.Second

// watchRNR logs, at most once per rnrLogEvery, that QPs of the device have been
// answered with RNR NAKs (rcvd_rnr_err) at every look for rnrSpell while none of
// their SENDs completed: a peer posts no receive for them, and with rnr_retry 7
// (perftest's and ibv_rc_pingpong's) the requester retries for ever, as rdma_rxe's
// does, so the application waits without a word. A receiver that is only slower
// than its sender (qperf rc_bw -m 1) makes short spells, or completes SENDs
// (rdma_sends) between its RNR NAKs: RC's flow control at work, not logged.
func watchRNR(ctx context.Context, c *transport.Counters, logf func(string, ...any)) {
	t := time.NewTicker(ifaceWatch)
	defer t.Stop()
	w := rnrWatch{rnr: c.Get(transport.CntRcvdRNRErr), sends: c.Get(transport.CntRdmaSends)}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if line := w.look(c.Get(transport.CntRcvdRNRErr), c.Get(transport.CntRdmaSends), time.Now()); line != "" {
			logf("%s", line)
		}
	}
}

// rnrWatch is watchRNR's state between looks.
type rnrWatch struct {
	rnr, sends    uint64    // the counters at the last look
	since, logged time.Time // the start of the current spell (zero: none); the last line
	from          uint64    // rcvd_rnr_err at the spell's start
}

// look takes the counters at now and returns the line to log, or "".
func (w *rnrWatch) look(rnr, sends uint64, now time.Time) string {
	moved, progressed := rnr != w.rnr, sends != w.sends
	prev := w.rnr
	w.rnr, w.sends = rnr, sends
	if !moved || progressed {
		w.since = time.Time{}
		return ""
	}
	if w.since.IsZero() {
		w.since, w.from = now, prev
	}
	if now.Sub(w.since) < rnrSpell || now.Sub(w.logged) < rnrLogEvery {
		return ""
	}
	w.logged = now
	return fmt.Sprintf("RNR NAKs for %v without a pause and no SEND completed (rcvd_rnr_err +%d): a peer posts no receive for the SENDs of a QP here, which retries them while its rnr_retry allows (7, as perftest and ibv_rc_pingpong set it: for ever); does the peer run the same test (ib_send_bw against ib_write_bw, say) and the same -n?",
		now.Sub(w.since).Round(time.Second), rnr-w.from)
}

// rnrSpell is how long watchRNR lets RNR NAKs go on before it logs them;
// rnrLogEvery bounds its lines.
const (
	rnrSpell    = 5 * time.Second
	rnrLogEvery = 30 * time.Second
)
