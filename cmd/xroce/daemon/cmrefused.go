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
		logf("RDMA CM connection requests refused: %d, for a port nothing listens on here (the server not started, started without the RDMA CM such as perftest without -R, or listening only after the request came)", n)
	})
}
