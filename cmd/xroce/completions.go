package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/xroce/xroce/transport"
)

// errCompletion explains a failed work completion the way users need it.
func (c *conn) errCompletion(wc transport.WorkCompletion) error {
	switch wc.Status {
	case transport.WC_RETRY_EXC_ERR:
		return fmt.Errorf("completion %v (%v): the peer did not answer after every retry. If it ran until then, it exited or stopped (see its output); if it never answered, look for a wrong GID index (%s) on either side, a path MTU the peer cannot take (-m), or a firewall dropping UDP port 4791", wc.Status, wc.Opcode, c.gidOpt())
	case transport.WC_RNR_RETRY_EXC_ERR:
		return fmt.Errorf("completion %v (%v): the peer had no receive posted", wc.Status, wc.Opcode)
	case transport.WC_REM_ACCESS_ERR:
		return fmt.Errorf("completion %v (%v): the peer refused the access: rkey, address or size outside its region (-s larger than the peer's buffer?)", wc.Status, wc.Opcode)
	case transport.WC_REM_INV_REQ_ERR:
		return fmt.Errorf("completion %v (%v): the peer found the request invalid (a path MTU mismatch, or a size larger than its receive buffer)", wc.Status, wc.Opcode)
	case transport.WC_LOC_LEN_ERR:
		if wc.Opcode == transport.WC_RECV {
			return fmt.Errorf("completion %v (%v): the peer sent a message larger than our receive buffer (its -s is larger than ours?)", wc.Status, wc.Opcode)
		}
	}
	return fmt.Errorf("completion %v (%v)", wc.Status, wc.Opcode)
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

// waitCQ polls the CQ into wcs, waiting up to limit for at least one completion.
func (c *conn) waitCQ(wcs []transport.WorkCompletion, limit time.Duration) (int, error) {
	if n := c.cq.Poll(wcs); n > 0 {
		return n, nil
	}
	// A long message (hundreds of MiB) may take longer than limit to complete: the
	// wait goes on while frames still arrive.
	alive, rnr := c.counterWatch("rcvd_pkts"), c.counterWatch("rcvd_rnr_err")
	for {
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		err := c.cq.Wait(ctx)
		cancel()
		if err == nil {
			return c.cq.Poll(wcs), nil
		}
		if !errors.Is(err, context.DeadlineExceeded) { // the CQ is in error (overrun)
			return 0, err
		}
		// The peer answers, but only with RNR NAKs: it has no receive posted for
		// our SEND and never will (rnr_retry 7 retries for ever).
		if n := rnr(); n > 0 {
			return 0, fmt.Errorf("no completion for %v: the peer posts no receives (RNR NAK, %d times in that time): are -n (and pingpong's -r) the same on both sides, and does the peer run the same test?", limit, n)
		}
		if alive() > 0 {
			continue
		}
		if c.env != nil && c.env.ifname != "" {
			if _, err := net.InterfaceByName(c.env.ifname); err != nil {
				return 0, fmt.Errorf("no completion for %v: the interface %s is gone (deleted, or moved to another namespace)", limit, c.env.ifname)
			}
		}
		return 0, fmt.Errorf("no completion for %v and no frame from the peer: the peer is not answering (or has exited); check that both sides were given the same test, -n and -s, the GID index (%s), the path MTU (-m), and that UDP port 4791 is open", limit, c.gidOpt())
	}
}

// completions waits up to 30 s for a batch of completions, polled into wcs, and
// returns it; a completion that failed gives its errCompletion instead.
func (c *conn) completions(wcs []transport.WorkCompletion) ([]transport.WorkCompletion, error) {
	n, err := c.waitCQ(wcs, 30*time.Second)
	if err != nil {
		return nil, err
	}
	for _, wc := range wcs[:n] {
		if wc.Status != transport.WC_SUCCESS {
			return nil, c.errCompletion(wc)
		}
	}
	return wcs[:n], nil
}
