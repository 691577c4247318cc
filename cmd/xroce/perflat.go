package main

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/xroce/xroce/transport"
)

// runLat runs one size of a latency test (on the one QP) and returns the
// per-iteration times (one-way for WRITE and SEND ping-pong, round trip for READ),
// or nil on a read_lat server.
func (c *conn) runLat() ([]time.Duration, error) {
	o := c.o
	iters := o.iters
	lats := make([]time.Duration, 0, iters)
	wcs := make([]transport.WorkCompletion, 16)
	qp := c.qps[0]
	wr := c.wr(0)
	c.recvd = 0
	waitSend := func() error {
		for {
			n, err := c.waitCQ(wcs, 30*time.Second)
			if err != nil {
				return err
			}
			sent := false
			for _, wc := range wcs[:n] {
				if wc.Status != transport.WC_SUCCESS {
					return c.errCompletion(wc)
				}
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
	switch c.t.op {
	case transport.WR_RDMA_READ:
		if !c.client {
			return nil, nil
		}
		for i := 0; i < iters; i++ {
			t0 := time.Now()
			if _, err := qp.PostSend(wr); err != nil {
				return nil, err
			}
			if err := waitSend(); err != nil {
				return nil, err
			}
			lats = append(lats, time.Since(t0))
		}
		return lats, nil
	case transport.WR_RDMA_WRITE:
		// perftest's write_lat: the last byte of each message carries the iteration
		// count; each side polls the last byte of its receive half for the peer's.
		if c.size == 0 {
			return nil, fmt.Errorf("write_lat needs -s of at least 1")
		}
		// perftest's run_iter_lat_write: the server writes first (the first RoCE
		// frame of ib_write_lat.pcap is the server's); each side then waits for the
		// peer's write i before its own write i+1... so the client waits for i and
		// answers i, the server writes i and waits for the answer i.
		mark := &c.buf[c.size-1]
		poll := c.half + c.size - 1
		for i := 1; i <= iters; i++ {
			t0 := time.Now()
			if c.client {
				if err := c.pollByte(poll, byte(i), 30*time.Second); err != nil {
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
			if err := waitSend(); err != nil {
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
	// send_lat: the client sends and waits for the reply; the server replies.
	for i := 0; i < iters; i++ {
		t0 := time.Now()
		if c.client {
			if _, err := qp.PostSend(wr); err != nil {
				return nil, err
			}
			if err := waitSend(); err != nil {
				return nil, err
			}
		}
		for c.recvd <= i {
			if err := waitSendOrRecv(c, wcs); err != nil {
				return nil, err
			}
		}
		if !c.client {
			if _, err := qp.PostSend(wr); err != nil {
				return nil, err
			}
			if err := waitSend(); err != nil {
				return nil, err
			}
		}
		if c.client || i > 0 {
			lats = append(lats, time.Since(t0)/2)
		}
	}
	return lats, nil
}

// waitSendOrRecv handles one batch of completions, counting receives.
func waitSendOrRecv(c *conn, wcs []transport.WorkCompletion) error {
	n, err := c.waitCQ(wcs, 30*time.Second)
	if err != nil {
		return err
	}
	for _, wc := range wcs[:n] {
		if wc.Status != transport.WC_SUCCESS {
			return c.errCompletion(wc)
		}
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
func (c *conn) pollByte(i int, want byte, limit time.Duration) error {
	w := i &^ 3
	p := (*uint32)(unsafe.Pointer(&c.buf[w]))
	shift := uint(i-w) * 8
	start := time.Now()
	for n := 0; ; n++ {
		if byte(atomic.LoadUint32(p)>>shift) == want {
			return nil
		}
		if n&63 != 63 {
			continue
		}
		el := time.Since(start)
		switch {
		case el > limit:
			return fmt.Errorf("the peer's write %d did not arrive within %v: the peer is not answering; check the GID index (-x), the path MTU (-m) and that UDP port 4791 is open", want, limit)
		case el > pollSpin:
			time.Sleep(pollSleep)
		default:
			runtime.Gosched()
		}
	}
}

// write_lat's polling: spin this long, then look every pollSleep.
const (
	pollSpin  = 20 * time.Microsecond
	pollSleep = 5 * time.Microsecond
)
