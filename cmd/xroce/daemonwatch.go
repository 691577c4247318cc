package main

import (
	"context"
	"time"

	"github.com/xroce/xroce/transport"
)

// watchOversize logs, at most once per oversizeLogEvery, that the device refused
// packets longer than their QP's path MTU (rcvd_oversize moved): a peer connected
// with a larger path MTU than the QP it sends to. The application sees only its
// QP's error (RC: the peer's IBV_WC_REM_INV_REQ_ERR, its own flushed work
// requests; UD and UC: messages that never arrive), as on rdma_rxe, which logs
// nothing; the daemon's log names the cause.
func watchOversize(ctx context.Context, c *transport.Counters, logf func(string, ...any)) {
	t := time.NewTicker(ifaceWatch)
	defer t.Stop()
	seen := c.Get(transport.CntRcvdOversize)
	var logged time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n := c.Get(transport.CntRcvdOversize)
		if n == seen || time.Since(logged) < oversizeLogEvery {
			continue
		}
		logf("%d packet%s longer than their QP's path MTU refused (rcvd_oversize %d): a peer sends with a larger path MTU than the QP it reaches; give both sides the same path MTU (perftest -m, ibv_rc_pingpong -m)",
			n-seen, plural(int(n-seen)), n)
		seen, logged = n, time.Now()
	}
}

// oversizeLogEvery bounds watchOversize's log lines.
const oversizeLogEvery = 10 * time.Second
