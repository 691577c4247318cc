package main

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/xroce/xroce/cmd/xroce/oob"
	"github.com/xroce/xroce/transport"
)

// latSizes runs a latency test's sizes in turn and prints a table row for each
// size that measured (a read_lat server measures nothing).
func (c *conn) latSizes(s *oob.Session) error {
	if !c.client && c.t.op == transport.WR_RDMA_READ && c.verbose() {
		fmt.Fprintf(c.o.out, " The client reads; the server waits for it to finish.\n")
	}
	table := false
	for k, size := range c.sizes() {
		if k > 0 {
			if err := s.NextSize(func() error { return c.startSize(size) }); err != nil {
				return err
			}
		}
		lats, err := c.runLat()
		if err == nil {
			err = c.verifySize(false)
		}
		if err != nil {
			return err
		}
		if len(lats) > 0 {
			if !table {
				c.printLatHead()
				table = true
			}
			c.printLat(lats)
		}
	}
	if table {
		c.rule()
	}
	return nil
}

// runLat runs one size of a latency test (on the one QP) and returns the
// per-iteration times (one-way for WRITE and SEND ping-pong, round trip for READ),
// or nil on a read_lat server.
func (c *conn) runLat() ([]time.Duration, error) {
	wcs := make([]transport.WorkCompletion, 16)
	c.recvd = 0
	switch c.t.op {
	case transport.WR_RDMA_READ:
		return c.readLat(wcs)
	case transport.WR_RDMA_WRITE:
		return c.writeLat(wcs)
	}
	return c.sendLat(wcs)
}

// readLat is read_lat's client: each READ's round trip. The server only answers,
// in its engine or HCA.
func (c *conn) readLat(wcs []transport.WorkCompletion) ([]time.Duration, error) {
	if !c.client {
		return nil, nil
	}
	qp, wr := c.qps[0], c.wr(0)
	lats := make([]time.Duration, 0, c.o.iters)
	for i := 0; i < c.o.iters; i++ {
		t0 := time.Now()
		if _, err := qp.PostSend(wr); err != nil {
			return nil, err
		}
		if err := c.waitSend(wcs); err != nil {
			return nil, err
		}
		lats = append(lats, time.Since(t0))
	}
	return lats, nil
}

// writeLat is perftest's write_lat: the last byte of each message carries the
// iteration count; each side polls the last byte of its receive half for the
// peer's.
func (c *conn) writeLat(wcs []transport.WorkCompletion) ([]time.Duration, error) {
	qp, wr := c.qps[0], c.wr(0)
	iters := c.o.iters
	lats := make([]time.Duration, 0, iters)
	// perftest's run_iter_lat_write: the server writes first (the first RoCE
	// frame of ib_write_lat.pcap is the server's); each side then waits for the
	// peer's write i before its own write i+1... so the client waits for i and
	// answers i, the server writes i and waits for the answer i.
	mark := &c.buf[c.size-1]
	poll := c.half + c.size - 1
	for i := 1; i <= iters; i++ {
		t0 := time.Now()
		if c.client {
			limit := 30 * time.Second
			if i == 1 {
				limit = firstLimit
			}
			if err := c.pollByte(poll, byte(i), limit); err != nil {
				return nil, err
			}
			if now := time.Now(); i > 1 { // a round trip between two arrivals
				lats = append(lats, now.Sub(c.lastPoll)/2)
				c.lastPoll = now
			} else {
				c.lastPoll = now
			}
			// The server's last write is in place until our last answer lets it
			// go on to the next size: check it now.
			if i == iters && c.o.verify {
				if err := c.checkLatWrite(); err != nil {
					return nil, err
				}
			}
		}
		*mark = byte(i)
		if _, err := qp.PostSend(wr); err != nil {
			return nil, err
		}
		if err := c.waitSend(wcs); err != nil {
			return nil, err
		}
		if !c.client {
			if err := c.pollByte(poll, byte(i), 30*time.Second); err != nil {
				return nil, err
			}
			lats = append(lats, time.Since(t0)/2)
		}
	}
	return lats, nil
}

// sendLat is send_lat: the client sends and waits for the reply; the server
// replies.
func (c *conn) sendLat(wcs []transport.WorkCompletion) ([]time.Duration, error) {
	qp, wr := c.qps[0], c.wr(0)
	lats := make([]time.Duration, 0, c.o.iters)
	for i := 0; i < c.o.iters; i++ {
		t0 := time.Now()
		if c.client {
			if _, err := qp.PostSend(wr); err != nil {
				return nil, err
			}
			if err := c.waitSend(wcs); err != nil {
				return nil, err
			}
		}
		// The first message comes right after the barrier that starts the test:
		// a peer that does not send it runs another test.
		if i == 0 {
			c.limit = firstLimit
		}
		for c.recvd <= i {
			if err := c.waitSendOrRecv(wcs); err != nil {
				return nil, err
			}
		}
		c.limit = 0
		if !c.client {
			if _, err := qp.PostSend(wr); err != nil {
				return nil, err
			}
			if err := c.waitSend(wcs); err != nil {
				return nil, err
			}
		}
		if c.client || i > 0 {
			lats = append(lats, time.Since(t0)/2)
		}
	}
	return lats, nil
}

// waitSend handles completions until a send completes, posting each completed
// receive again and counting it.
func (c *conn) waitSend(wcs []transport.WorkCompletion) error {
	for {
		got, err := c.completions(wcs)
		if err != nil {
			return err
		}
		sent := false
		for _, wc := range got {
			if wc.Opcode != transport.WC_RECV {
				sent = true
				continue
			}
			if err := c.postRecv(0, wc.WRID); err != nil {
				return err
			}
			c.recvd++
		}
		if sent {
			return nil
		}
	}
}

// waitSendOrRecv handles one batch of completions, counting receives.
func (c *conn) waitSendOrRecv(wcs []transport.WorkCompletion) error {
	got, err := c.completions(wcs)
	if err != nil {
		return err
	}
	for _, wc := range got {
		if wc.Opcode == transport.WC_RECV {
			c.recvd++
			if err := c.postRecv(0, wc.WRID); err != nil {
				return err
			}
		}
	}
	return nil
}

// pollByte waits until buf[i] == want, reading it atomically (the provider writes
// it from its own thread, as an HCA writes host memory). It spins for the first
// pollSpin, as perftest does, then sleeps between looks: on a machine with few
// cores a spinning tool would take the CPU the engine needs to deliver the write.
// Every waitSlice it looks at the peer's exchange (peerCheck).
func (c *conn) pollByte(i int, want byte, limit time.Duration) error {
	w := i &^ 3
	p := (*uint32)(unsafe.Pointer(&c.buf[w]))
	shift := uint(i-w) * 8
	start := time.Now()
	look := start.Add(waitSlice)
	for n := 0; ; n++ {
		if byte(atomic.LoadUint32(p)>>shift) == want {
			return nil
		}
		if n&63 != 63 {
			continue
		}
		now := time.Now()
		el := now.Sub(start)
		if now.After(look) {
			look = now.Add(waitSlice)
			if err := c.peerCheck(el); err != nil {
				return err
			}
		}
		switch {
		case el > limit && want == 1 && c.client:
			return fmt.Errorf("the peer's first write did not arrive within %v: does the peer run write_lat? (a write_bw server only waits for its client's writes) If it does, check the GID index (%s), the path MTU (-m) and that UDP port 4791 is open", limit, c.gidOpt())
		case el > limit:
			return fmt.Errorf("the peer's write %d did not arrive within %v: the peer is not answering; check the GID index (%s), the path MTU (-m) and that UDP port 4791 is open", want, limit, c.gidOpt())
		case el > pollSpin:
			time.Sleep(pollSleep)
		default:
			runtime.Gosched()
		}
	}
}

// firstLimit bounds the wait for the peer's first message of a latency test: it
// comes right after the barrier that starts the test, so a peer that does not
// send it within seconds runs another test.
const firstLimit = 5 * time.Second

// write_lat's polling: spin this long, then look every pollSleep.
const (
	pollSpin  = 20 * time.Microsecond
	pollSleep = 5 * time.Microsecond
)
