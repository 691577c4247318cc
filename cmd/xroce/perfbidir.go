package main

import (
	"fmt"
	"time"

	"github.com/xroce/xroce/transport"
)

// -b on one side only: perftest exchanges nothing that says so (both sides just
// run), so the tools tell from the traffic. A WRITE or READ test's side knows
// after a size's results exchange whether the peer ran requests against it
// (the engine's rx_write_requests or rx_read_requests, mlx5's counter names); a send_bw -b side
// notices that it waits for SENDs that never come.

// bidirWatch follows the RDMA requests the peer runs against this side of a
// WRITE or READ bandwidth test, on xroce's own engine only (an HCA's counters
// count the whole device); nil otherwise.
func (c *conn) bidirWatch() func() uint64 {
	if c.env == nil || (c.t.op != transport.WR_RDMA_WRITE && c.t.op != transport.WR_RDMA_READ) {
		return nil
	}
	if _, ok := c.env.prov.(*engine); !ok {
		return nil
	}
	if c.t.op == transport.WR_RDMA_READ {
		return c.counterWatch("rx_read_requests")
	}
	return c.counterWatch("rx_write_requests")
}

// bidirCheck says whether the peer's -b differs from this side's: a -b side that
// got no request by a size's results exchange (the peer's come after its
// requests), or a client without -b that got some by the closing exchange.
func (c *conn) bidirCheck(requests func() uint64) error {
	if requests == nil {
		return nil
	}
	n := requests()
	op := "RDMA WRITE"
	if c.t.op == transport.WR_RDMA_READ {
		op = "RDMA READ"
	}
	switch {
	case c.o.bidir && n == 0:
		return fmt.Errorf("-b: the peer ran no %s against this side: it runs without -b; give both sides -b or neither", op)
	case !c.o.bidir && c.client && n > 0:
		return fmt.Errorf("the peer ran %d %s requests against this side's buffer: it runs with -b (bidirectional) and this side does not; give both sides -b or neither", n, op)
	}
	return nil
}

// bidirIdle is the error of a send_bw -b side whose own SENDs are done and which
// has waited waited for the peer's first SEND: the peer runs without -b.
func (c *conn) bidirIdle(waited time.Duration) error {
	if !c.awaitsPeerSends || waited < peerMovedOn {
		return nil
	}
	return fmt.Errorf("-b: this side's SENDs are done and the peer has sent none in %v: it runs without -b; give both sides -b or neither", waited.Round(time.Millisecond))
}
