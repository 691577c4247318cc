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
// msgRate finds the same minimum without trying every pair.

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
// time per message; 0 before any completion.
//
// perftest tries every pair (O(n²/(postList·cqMod)), seconds to minutes with many
// QPs). Here the time per message from post i to completion j is the slope from
// the point (i, posted[i]) to (j+1, completed[j]), so for each completion the
// shortest is the tangent from its point to the upper convex hull of the posts
// before it: the same minimum in O(n log n) (TestPeakMatchesPairs checks it
// against every pair).
func (p *peakStamps) msgRate() float64 {
	n := p.nDone
	var hull []point
	next := 0 // the next post to add to the hull
	best := math.Inf(1)
	for j := p.cqMod - 1; j < n+p.cqMod-1; j += p.cqMod {
		j := min(j, n-1) // the last work request, signaled off the -Q grid
		for ; next <= j; next += p.postList {
			hull = addUpper(hull, point{float64(next), float64(p.posted[next])})
		}
		if c := p.completed[j]; c != 0 {
			best = min(best, tangentSlope(hull, point{float64(j + 1), float64(c - 1)}))
		}
	}
	if math.IsInf(best, 1) || best <= 0 {
		return 0
	}
	return 1e9 / best
}

// point is a post (its index, its time) or a completion (its index + 1, its time),
// time in nanoseconds.
type point struct{ x, y float64 }

// cross is the z of (a-o) × (b-o): positive when o, a, b turn left.
func cross(o, a, b point) float64 { return (a.x-o.x)*(b.y-o.y) - (a.y-o.y)*(b.x-o.x) }

// addUpper adds q, right of every point of the upper hull h, keeping h the upper
// convex hull (its edges' slopes decreasing).
func addUpper(h []point, q point) []point {
	for len(h) >= 2 && cross(h[len(h)-2], h[len(h)-1], q) >= 0 {
		h = h[:len(h)-1]
	}
	return append(h, q)
}

// slope is the slope from a to b (a.x < b.x).
func slope(a, b point) float64 { return (b.y - a.y) / (b.x - a.x) }

// tangentSlope returns the smallest slope from a point of the upper hull h to b,
// which lies right of all of them: moving along the hull lowers the slope to b
// while the next hull point lies above the line from the current one to b, and
// that holds up to the tangent point and not after it.
func tangentSlope(h []point, b point) float64 {
	lo, hi := 0, len(h)-1 // the tangent point is in h[lo..hi]
	for lo < hi {
		mid := (lo + hi) / 2
		if cross(h[mid], b, h[mid+1]) > 0 { // h[mid+1] above the line h[mid]→b
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return slope(h[lo], b)
}
