package daemon

import (
	"context"
	"time"

	"github.com/xroce/xroce/transport/rdmacm"
)

// refusedLook is how often watchRefused looks at the connection requests refused;
// refusedLogEvery bounds its log lines.
const (
	refusedLook     = time.Second
	refusedLogEvery = 10 * time.Second
)

// watchRefused logs, at most once per refusedLogEvery, the RDMA CM connection
// requests (and SIDR requests) that came for a port nothing listens on here and
// were refused (REJ Invalid Service ID, IBA Vol 1 12.6.7; SIDR_REP Service ID not
// supported), as the kernel's CM refuses them on an rdma_rxe host without a word:
// the peer's application sees RDMA_CM_EVENT_REJECTED (status 8) or UNREACHABLE,
// and this log says why, until ctx ends.
func watchRefused(ctx context.Context, svc *rdmacm.Service, logf func(string, ...any)) {
	WatchGrowth(ctx, refusedLook, refusedLogEvery, func() uint64 { return svc.Stats().Unlistened }, func(n, _ uint64) {
		logf("%d RDMA CM connection request%s refused: nothing listens on the port asked for here (the server not started, started without the RDMA CM such as perftest without -R, or listening only after the request came)",
			n, map[bool]string{true: "", false: "s"}[n == 1])
	})
}

// WatchGrowth looks at get every look until ctx ends, and calls log with how much it
// grew since the last call (or since the start) and its value, at most once per
// every.
func WatchGrowth(ctx context.Context, look, every time.Duration, get func() uint64, log func(grew, total uint64)) {
	t := time.NewTicker(look)
	defer t.Stop()
	seen := get()
	var logged time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n := get()
		if n == seen || time.Since(logged) < every {
			continue
		}
		log(n-seen, n)
		seen, logged = n, time.Now()
	}
}
