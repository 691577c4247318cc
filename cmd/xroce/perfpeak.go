package main

import (
	"math"
	"time"
)

// Peak bandwidth as perftest computes it (print_report_bw in perftest_parameters.c,
// run_iter_bw in perftest_resources.c, perftest 4.5-0.17): the send loop stamps
// every post (tposted, by the running count of work requests posted on all QPs)
// and every send completion (tcompleted, at the running count of work requests
// completed, minus one); the peak is the message size over the shortest time per
// message between any post i (a post list's first) and any completion j at or after
// it: min over i, j of (tcompleted[j] - tposted[i]) / (j - i + 1). j runs over the
// completions the CQ moderation produces (every -Q-th work request, and the last),
// so the figure is a sustained rate, not a burst of completions polled at once.

// peakStamps holds one bandwidth run's stamps, in nanoseconds since its start; a
// completion stamp of 0 means none was taken there.
type peakStamps struct {
	start             time.Time
	posted, completed []int64
	nPosted, nDone    int
	postList, cqMod   int
}

// newPeakStamps sizes the stamps for n work requests on all QPs, posted in lists of
// postList and signaled every cqMod.
func newPeakStamps(start time.Time, n, postList, cqMod int) *peakStamps {
	return &peakStamps{start: start, posted: make([]int64, n), completed: make([]int64, n),
		postList: max(1, postList), cqMod: max(1, cqMod)}
}

// post stamps k work requests posted together at now.
func (p *peakStamps) post(k int, now time.Time) {
	t := int64(now.Sub(p.start))
	for ; k > 0 && p.nPosted < len(p.posted); k-- {
		p.posted[p.nPosted] = t
		p.nPosted++
	}
}

// complete stamps a completion, polled at now, that stands for k work requests.
func (p *peakStamps) complete(k int, now time.Time) {
	p.nDone = min(p.nDone+k, len(p.completed))
	if p.nDone > 0 {
		p.completed[p.nDone-1] = int64(now.Sub(p.start)) + 1 // never 0
	}
}

// msgRate returns perftest's peak in messages per second: one over the shortest
// time per message; 0 before any completion. It takes O(n²/(postList·cqMod)) steps,
// as perftest's loop does (noPeak spares runs of more than 20000 iterations).
func (p *peakStamps) msgRate() float64 {
	n := p.nDone
	best := math.Inf(1) // nanoseconds per message
	for i := 0; i < n; i += p.postList {
		pi := p.posted[i]
		for j := (i+p.cqMod)/p.cqMod*p.cqMod - 1; j < n; j += p.cqMod {
			best = p.shorter(best, pi, i, j)
		}
		if n%p.cqMod != 0 { // the last work request was signaled off the -Q grid
			best = p.shorter(best, pi, i, n-1)
		}
	}
	if math.IsInf(best, 1) {
		return 0
	}
	return 1e9 / best
}

// shorter returns the time per message from post i (at pi) to completion j when
// that is shorter than best, else best; a completion not stamped does not count.
func (p *peakStamps) shorter(best float64, pi int64, i, j int) float64 {
	c := p.completed[j]
	if c == 0 {
		return best
	}
	d, m := float64(c-1-pi), float64(j-i+1)
	if d > 0 && d < best*m {
		return d / m
	}
	return best
}
