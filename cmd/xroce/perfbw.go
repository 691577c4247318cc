package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/xroce/xroce/cmd/xroce/oob"
	"github.com/xroce/xroce/transport"
)

// movesData says whether this side moves the data of a bandwidth test: the client,
// and send_bw's server, which receives. A bandwidth server of write/read/atomic
// only waits for its client and prints the client's results (of the last size with
// -a), as perftest's does.
func (c *conn) movesData() bool { return c.client || c.t.op == transport.WR_SEND || c.o.bidir }

// bwSizes runs a bandwidth test's sizes in turn, a table row each, and returns the
// last size's results.
func (c *conn) bwSizes(ctx context.Context, s *oob.Session) (oob.Results, error) {
	moves := c.movesData()
	if moves {
		c.printBWHead()
	}
	var res oob.Results
	for k, size := range c.sizes() {
		if k > 0 {
			if err := s.NextSize(func() error { return c.startSize(size) }); err != nil {
				return res, err
			}
		}
		if !moves {
			continue
		}
		var err error
		res, err = c.runBW(ctx)
		if err == nil {
			err = c.verifySize(true)
		}
		if err != nil {
			return res, err
		}
		if note := durationNote(c.o, size, res.Iters); note != "" {
			fmt.Fprintf(os.Stderr, "%s: warning: %s\n", name0(c.t.name), note)
		}
		// -b: the row is the sum of both directions (perftest's
		// print_full_bw_report with the peer's results).
		peer, both, err := s.AfterSize(res)
		if err == nil && c.o.bidir {
			err = c.bidirCheck(c.peerRequests)
		}
		if err != nil {
			return res, err
		}
		row := res
		if both {
			c.remoteIters += peer.Iters
			row.PeakBW, row.AvgBW, row.MsgRate = res.PeakBW+peer.PeakBW, res.AvgBW+peer.AvgBW, res.MsgRate+peer.MsgRate
		}
		c.printBWRow(row)
	}
	if moves {
		c.rule()
	}
	return res, nil
}

// printServerBW prints, on a server that does not move the data, the client's
// results got from the final exchange.
func (c *conn) printServerBW(got oob.Results) {
	c.remoteIters = got.Iters
	c.printBWHead()
	c.printBWRow(got)
	c.rule()
}

// runBW runs one size of a bandwidth test: the client posts on every QP, -n work
// requests each, up to -t in flight per QP, as perftest's run_iter_bw does; a
// send_bw server receives; with -b each side does both. The results count the
// iterations of all QPs: the messages this side sent, or a send_bw server's
// receives.
func (c *conn) runBW(ctx context.Context) (oob.Results, error) {
	res := oob.Results{Size: uint64(c.size)}
	r := c.newBWRun()
	wcs := make([]transport.WorkCompletion, 64)
	for !r.finished() {
		if !r.deadline.IsZero() && !time.Now().Before(r.deadline) {
			break // -D is a time bound: what is still in flight is not waited for
		}
		if r.sender {
			if err := r.post(); err != nil {
				return res, err
			}
		}
		c.awaitsPeerSends = r.sender && r.receiver && r.done >= r.iters*len(c.qps) && r.recvd == 0
		got, err := c.completionsUntil(wcs, r.deadline)
		if err != nil {
			return res, err
		}
		if err := r.reap(got); err != nil {
			return res, err
		}
		r.progress()
	}
	c.awaitsPeerSends = false
	done := r.counted()
	rate := float64(done) / time.Since(r.rate.start).Seconds()
	if r.sent > r.done {
		// -D ended the run with work requests in flight (a slow path holds up to
		// -t messages per QP): flush them, so that the QPs stop sending while the
		// closing exchange runs.
		if err := c.flushQPs(); err != nil {
			return res, err
		}
	}
	peak := 0.0 // perftest's noPeak: print_report_bw's peak_up is 0
	if r.peak != nil {
		peak = max(r.peak.msgRate(), rate)
	}
	res.Iters = uint64(done)
	res.PeakBW, res.AvgBW, res.MsgRate = c.bw(peak), c.bw(rate), rate/1e6
	return res, nil
}

// noPeak says whether the run reports no peak bandwidth, as perftest's parser
// decides: -N, -D, --run_infinitely, more than 20000 iterations, and a send_bw
// server without -b (perftest_parameters.c, perftest 4.5-0.17).
func (c *conn) noPeak() bool {
	o := c.o
	return o.noPeak || o.duration > 0 || o.runInf || o.iters > 20000 || c.t.op == transport.WR_SEND && !c.client && !o.bidir
}

// flushQPs moves the QPs to the error state: their outstanding work requests
// complete flushed and nothing more is sent.
func (c *conn) flushQPs() error {
	for i, qp := range c.qps {
		if err := qp.Modify(transport.QPAttr{State: transport.QPS_ERR}, transport.QP_STATE); err != nil {
			return fmt.Errorf("QP %d: flushing the work requests in flight at the end of -D: %w", i+1, err)
		}
	}
	return nil
}

// bwRun is one size of a bandwidth test in progress.
type bwRun struct {
	c                 *conn
	sender, receiver  bool               // this side posts the test's work requests; it receives SENDs
	iters             int                // per QP: -n, or without end with -D or --run_infinitely
	deadline          time.Time          // the end of -D's run; zero without -D
	wrs               []transport.SendWR // each QP's work request
	batch             []transport.SendWR // the list being posted
	posted, completed []int              // per QP
	sent, done        int                // work requests posted and completed, on all QPs
	recvd             int                // receives completed, on all QPs
	rate              rateMeter
	peak              *peakStamps // perftest's peak stamps; nil with noPeak (or on a receiver only)
}

func (c *conn) newBWRun() *bwRun {
	o := c.o
	q := len(c.qps)
	r := &bwRun{c: c, iters: o.iters, sender: c.client || o.bidir, receiver: c.t.op == transport.WR_SEND && (!c.client || o.bidir)}
	if o.duration > 0 || o.runInf {
		r.iters = 1 << 40
		if o.duration > 0 && !o.runInf {
			r.deadline = time.Now().Add(time.Duration(o.duration) * time.Second)
		}
	}
	r.wrs = make([]transport.SendWR, q)
	for i := range r.wrs {
		r.wrs[i] = c.wr(i)
	}
	r.batch = make([]transport.SendWR, 0, o.txDepth)
	r.posted, r.completed = make([]int, q), make([]int, q)
	now := time.Now()
	r.rate = rateMeter{start: now, last: now}
	if r.sender && !c.noPeak() {
		r.peak = newPeakStamps(now, r.iters*q, o.postList, o.cqMod)
	}
	return r
}

// counted is what the run measures: the work requests this side completed, or
// the receives of a send_bw server.
func (r *bwRun) counted() int {
	if r.sender {
		return r.done
	}
	return r.recvd
}

// finished says whether the run did all its iterations: the sends, and the
// receives of the peer's sends; a receiver with -D or --run_infinitely runs on.
func (r *bwRun) finished() bool {
	all := r.iters * len(r.c.qps)
	if r.receiver && (r.recvd < all || r.c.o.duration > 0 || r.c.o.runInf) {
		return false
	}
	return !r.sender || r.done >= all
}

// post posts what each QP's window allows. Without -l, the window goes as one
// list (ibv_post_send's chained list: one wake of the engine per batch); with -l
// N, in lists of N (perftest's post list). Only every -Q-th work request is
// signaled, and the last of the run (signaled).
func (r *bwRun) post() error {
	list, depth := r.c.o.postList, r.c.o.txDepth
	if !r.deadline.IsZero() && !time.Now().Before(r.deadline) {
		return nil // -D's time is up: one clock read a call, not one a work request
	}
	for i, qp := range r.c.qps {
		for {
			r.batch = r.batch[:0]
			for r.posted[i]+len(r.batch)+list <= r.iters && r.posted[i]+len(r.batch)+list-r.completed[i] <= depth &&
				(list == 1 || len(r.batch) == 0) {
				for j := 0; j < list; j++ {
					wr := r.wrs[i]
					wr.WRID = wrID(i, uint64(r.posted[i]+len(r.batch)))
					if r.c.o.verifyAll {
						r.c.toSlot(&wr, r.posted[i]+len(r.batch))
					}
					if !signaled(r.posted[i]+len(r.batch), r.c.o.cqMod, r.iters, r.deadline.IsZero() && !r.c.o.runInf) {
						wr.Flags &^= transport.SendSignaled
					}
					r.batch = append(r.batch, wr)
				}
			}
			if len(r.batch) == 0 {
				break
			}
			var at time.Time
			if r.peak != nil { // the clock only for the peak's stamps
				at = time.Now()
			}
			k, err := qp.PostSend(r.batch...)
			if r.peak != nil {
				r.peak.post(k, at)
			}
			r.posted[i] += k
			r.sent += k
			if err != nil {
				return err
			}
			if list == 1 {
				break
			}
		}
	}
	return nil
}

// reap counts successful completions per QP (a signaled completion stands for the
// unsignaled work requests before it) and posts each completed receive again
// (recvDone).
func (r *bwRun) reap(wcs []transport.WorkCompletion) error {
	for _, wc := range wcs {
		qp := wrQP(wc.WRID)
		if qp >= len(r.c.qps) {
			return fmt.Errorf("a completion for work request %#x of no QP of this test", wc.WRID)
		}
		if wc.Opcode == transport.WC_RECV {
			r.recvd++
			if err := r.c.recvDone(qp, wc.WRID&(1<<40-1), wc.ByteLen); err != nil {
				return err
			}
			continue
		}
		// A completion stands for its work request and the unsignaled ones
		// before it (an RC send queue completes in order).
		k := int(wc.WRID&(1<<40-1)) + 1
		if r.peak != nil {
			r.peak.complete(k-r.completed[qp], time.Now())
		}
		r.done += k - r.completed[qp]
		r.completed[qp] = k
	}
	return nil
}

// progress prints perftest's progress line of a -D or --run_infinitely run: every
// second, or every -D seconds with both.
func (r *bwRun) progress() {
	o, m := r.c.o, &r.rate
	if (o.duration > 0 || o.runInf) && r.c.verbose() && time.Since(m.last) >= max(time.Second, time.Duration(o.duration)*time.Second*boolDur(o.runInf)) {
		now := time.Now()
		done := r.counted()
		rate := float64(done-m.lastDone) / now.Sub(m.last).Seconds()
		// -D and --run_infinitely compute no peak (noPeak), as perftest's lines show.
		fmt.Fprintf(o.out, " %-10d %-14d %-18.2f %-20.2f %.6f\n", r.c.size, done-m.lastDone, 0.0, r.c.bw(rate), rate/1e6)
		m.last, m.lastDone = now, done
	}
}

// rateMeter follows a bandwidth run's start and its progress lines.
type rateMeter struct {
	start    time.Time // the run's start
	last     time.Time // the last progress line (or the start)
	lastDone int       // completions before it
}

func boolDur(b bool) time.Duration {
	if b {
		return 1
	}
	return 0
}

// bw converts messages per second to MB/s, or Gb/s with --report_gbits.
func (c *conn) bw(msgsPerSec float64) float64 {
	bytes := msgsPerSec * float64(c.size)
	if c.o.reportGbits {
		return bytes * 8 / 1e9
	}
	return bytes / (1 << 20)
}

// durationNote says why a -D run that completed no message measured nothing (iters
// is what the side counted): the message is too large for the time.
func durationNote(o *perfOptions, size int, iters uint64) string {
	if o.duration == 0 || iters > 0 {
		return ""
	}
	return fmt.Sprintf("-D %d ended before the first %d-byte message completed, so the row measures nothing: give a longer -D or a smaller -s", o.duration, size)
}
