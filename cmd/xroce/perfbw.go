package main

import (
	"context"
	"fmt"
	"time"

	"github.com/xroce/xroce/cmd/xroce/oob"
	"github.com/xroce/xroce/transport"
)

// runBW runs one size of a bandwidth test: the client posts on every QP, -n work
// requests each, up to -t in flight per QP, as perftest's run_iter_bw does; a
// send_bw server receives. The results count the iterations of all QPs.
func (c *conn) runBW(ctx context.Context) (oob.Results, error) {
	o := c.o
	res := oob.Results{Size: uint64(c.size)}
	q := len(c.qps)
	iters := o.iters
	deadline := time.Time{}
	if o.duration > 0 || o.runInf {
		iters = 1 << 40
		if o.duration > 0 && !o.runInf {
			deadline = time.Now().Add(time.Duration(o.duration) * time.Second)
		}
	}
	wcs := make([]transport.WorkCompletion, 64)
	wrs := make([]transport.SendWR, q)
	for i := range wrs {
		wrs[i] = c.wr(i)
	}
	batch := make([]transport.SendWR, 0, o.txDepth)
	posted, completed := make([]int, q), make([]int, q)
	sent, done := 0, 0
	start := time.Now()
	last, lastDone := start, 0
	peak := 0.0
	window := max(1, min(o.txDepth, iters*q/100))
	winStart, winDone := start, 0
	receiver := !c.client
	for done < iters*q {
		if !deadline.IsZero() && time.Now().After(deadline) && sent == done {
			break
		}
		// Post what each QP's window allows as one list (ibv_post_send's chained
		// list): one wake of the engine per batch, not one per work request.
		for i := 0; !receiver && i < q; i++ {
			batch = batch[:0]
			for posted[i]+len(batch) < iters && posted[i]+len(batch)-completed[i] < o.txDepth && (deadline.IsZero() || time.Now().Before(deadline)) {
				wrs[i].WRID = wrID(i, uint64(posted[i]+len(batch)))
				batch = append(batch, wrs[i])
			}
			if len(batch) > 0 {
				k, err := c.qps[i].PostSend(batch...)
				posted[i] += k
				sent += k
				if err != nil {
					return res, err
				}
			}
		}
		n, err := c.waitCQ(wcs, 30*time.Second)
		if err != nil {
			return res, err
		}
		for _, wc := range wcs[:n] {
			if wc.Status != transport.WC_SUCCESS {
				return res, c.errCompletion(wc)
			}
			qp := wrQP(wc.WRID)
			if qp >= q {
				return res, fmt.Errorf("a completion for work request %#x of no QP of this test", wc.WRID)
			}
			completed[qp]++
			if receiver {
				if err := c.postRecv(qp, wc.WRID&(1<<40-1)); err != nil {
					return res, err
				}
			}
		}
		done += n
		// The peak is the best rate over windows of completions that last at least a
		// millisecond: a burst of completions polled at once is not a rate.
		if done-winDone >= window && time.Since(winStart) >= time.Millisecond {
			now := time.Now()
			if r := float64(done-winDone) / now.Sub(winStart).Seconds(); r > peak {
				peak = r
			}
			winStart, winDone = now, done
		}
		if (o.duration > 0 || o.runInf) && time.Since(last) >= max(time.Second, time.Duration(o.duration)*time.Second*boolDur(o.runInf)) {
			now := time.Now()
			rate := float64(done-lastDone) / now.Sub(last).Seconds()
			fmt.Fprintf(o.out, " %-10d %-14d %-18.2f %-20.2f %.6f\n", c.size, done-lastDone, c.bw(rate), c.bw(rate), rate/1e6)
			last, lastDone = now, done
		}
		if receiver && done >= o.iters*q && deadline.IsZero() && !o.runInf {
			break
		}
	}
	el := time.Since(start).Seconds()
	rate := float64(done) / el
	peak = max(peak, rate)
	res.Iters = uint64(done)
	res.PeakBW, res.AvgBW, res.MsgRate = c.bw(peak), c.bw(rate), rate/1e6
	return res, nil
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
