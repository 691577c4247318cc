package main

import (
	"fmt"

	"github.com/xroce/xroce/cmd/xroce/oob"
	"github.com/xroce/xroce/transport"
)

// perftest's exchange does not name the test, but its key message shows the
// test's kind (perftest 4.5's set_up_connection, and every capture in testdata/):
// SEND tests register their buffer without remote access, so they offer rkey 0;
// READ and atomic tests ask for the device's outstanding READs/atomics (128 on
// rdma_rxe, 16 from xroce), every other test for 1. Two sides that run tests of
// different kinds stall or fail with a misleading completion error, so the side
// that sees the mismatch refuses the connection (the peer then sees it close).

// readsOrAtomics says whether the test issues RDMA READs or atomics.
func (t test) readsOrAtomics() bool {
	return t.op == transport.WR_RDMA_READ || t.op == transport.WR_ATOMIC_FETCH_AND_ADD || t.op == transport.WR_ATOMIC_CMP_AND_SWP
}

// checkPeerTest refuses a peer whose key message shows a test of another kind.
func (c *conn) checkPeerTest(remote oob.Dest) error {
	switch {
	case c.t.op != transport.WR_SEND && remote.RKey == 0:
		return fmt.Errorf("the peer runs a SEND test (send_bw or send_lat): its key message offers no rkey, so its buffer takes no RDMA WRITE, READ or atomic, and this side runs %s; run the same test on both sides", c.t.name)
	case !c.t.readsOrAtomics() && remote.OutReads > 1:
		return fmt.Errorf("the peer runs a READ or atomic test (read_bw, read_lat or atomic_bw): its key message asks for %d outstanding READs or atomics, and this side runs %s; run the same test on both sides", remote.OutReads, c.t.name)
	}
	return nil
}
