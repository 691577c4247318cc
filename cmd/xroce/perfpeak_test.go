package main

import (
	"math/rand/v2"
	"testing"
	"time"
)

// stamps builds peakStamps from posts and completions in nanoseconds since the
// start: posts[i] for work request i, and each completion as (work requests it
// stands for, time).
func stamps(postList, cqMod int, posts []int64, comps [][2]int64) *peakStamps {
	start := time.Unix(1000, 0)
	p := newPeakStamps(start, len(posts), postList, cqMod)
	for _, t := range posts {
		p.post(1, start.Add(time.Duration(t)))
	}
	for _, c := range comps {
		p.complete(int(c[0]), start.Add(time.Duration(c[1])))
	}
	return p
}

// TestPeakMsgRate: perftest's peak (print_report_bw) is one over the shortest
// time per message from a post i to a completion j ≥ i, j on the -Q grid (and the
// last work request); i steps by the post list; a completion never stamped does
// not count; nothing completed is no peak. The values are worked by hand.
func TestPeakMsgRate(t *testing.T) {
	for _, tc := range []struct {
		name            string
		postList, cqMod int
		posts           []int64
		comps           [][2]int64
		nsPerMsg        float64 // 0: no peak
	}{
		// Every request signaled: (130-0)/4 = 32.5 is the shortest.
		{"every completion", 1, 1, []int64{0, 10, 20, 30}, [][2]int64{{1, 100}, {1, 110}, {1, 120}, {1, 130}}, 32.5},
		// A burst of completions polled together does not make a peak: posts at 0,
		// 100, 200, 300, all four completions at 400: (400-0)/4 = 100, and from
		// post 3 to completion 3 also 100.
		{"burst", 1, 1, []int64{0, 100, 200, 300}, [][2]int64{{1, 400}, {1, 400}, {1, 400}, {1, 400}}, 100},
		// -Q 2: completions at indices 1 and 3 only. i=0: (50-0)/2 = 25, (90-0)/4
		// = 22.5; i=1: (50-5)/1 = 45, (90-5)/3 = 28.33; i=2: (90-40)/2 = 25; i=3:
		// (90-45)/1 = 45.
		{"cq mod 2", 1, 2, []int64{0, 5, 40, 45}, [][2]int64{{2, 50}, {2, 90}}, 22.5},
		// -Q 2 over 5 requests: the last (index 4) is signaled off the grid and
		// counts: i=0, j=4: (100-0)/5 = 20.
		{"last off the grid", 1, 2, []int64{0, 1, 2, 3, 4}, [][2]int64{{2, 60}, {2, 90}, {1, 100}}, 20},
		// -l 2: only posts 0 and 2 start an interval. i=0: (30-0)/2 = 15, (50-0)/4
		// = 12.5; i=2: (50-29)/2 = 10.5 (post 3 at 29 would give 21/1 but is not a
		// list head).
		{"post list 2", 2, 1, []int64{0, 0, 29, 29}, [][2]int64{{1, 20}, {1, 30}, {1, 40}, {1, 50}}, 10.5},
		{"nothing completed", 1, 1, []int64{0, 10}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := stamps(tc.postList, tc.cqMod, tc.posts, tc.comps).msgRate()
			want := 0.0
			if tc.nsPerMsg > 0 {
				want = 1e9 / tc.nsPerMsg
			}
			if d := got - want; d > 1e-6*want || d < -1e-6*want {
				t.Errorf("msgRate = %.6g msg/s, want %.6g (%.4g ns a message)", got, want, tc.nsPerMsg)
			}
		})
	}
}

// TestPeakStampBounds: more posts or completions than the run's size are not
// stamped past it (a -D run is noPeak and has no stamps; this guards the slices).
func TestPeakStampBounds(t *testing.T) {
	start := time.Unix(0, 0)
	p := newPeakStamps(start, 2, 1, 1)
	p.post(5, start.Add(10))
	p.complete(5, start.Add(100))
	if p.nPosted != 2 || p.nDone != 2 || p.completed[1] != 101 {
		t.Fatalf("posted %d, done %d, last stamp %d", p.nPosted, p.nDone, p.completed[1])
	}
	if got, want := p.msgRate(), 1e9/45.0; got < want*(1-1e-9) || got > want*(1+1e-9) {
		t.Errorf("msgRate = %v, want %v", got, want) // (100-10)/2
	}
}

// pairsRate is perftest's own loop (print_report_bw): every post i on the post-list
// grid against every stamped completion j ≥ i on the -Q grid, and the last.
func pairsRate(p *peakStamps) float64 {
	n, best := p.nDone, 0.0
	try := func(i, j int) {
		if c := p.completed[j]; c != 0 {
			if t := float64(c-1-p.posted[i]) / float64(j-i+1); t > 0 && (best == 0 || t < best) {
				best = t
			}
		}
	}
	for i := 0; i < n; i += p.postList {
		for j := (i+p.cqMod)/p.cqMod*p.cqMod - 1; j < n; j += p.cqMod {
			try(i, j)
		}
		if n%p.cqMod != 0 {
			try(i, n-1)
		}
	}
	if best == 0 {
		return 0
	}
	return 1e9 / best
}

// TestPeakMatchesPairs: the hull's minimum is perftest's every-pair minimum, over
// random runs: posts in bursts, completions that trail them by a varying delay,
// post lists 1-4, CQ moderation 1-7, lengths that are no multiple of either, and
// some completions never stamped.
func TestPeakMatchesPairs(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	start := time.Unix(0, 0)
	for run := range 400 {
		n := 1 + r.IntN(300)
		list := 1 + r.IntN(4)
		cqMod := list * (1 + r.IntN(2))
		if r.IntN(2) == 0 {
			cqMod = 1 + r.IntN(7)
		}
		p := newPeakStamps(start, n, list, cqMod)
		now := int64(0)
		for p.nPosted < n {
			now += int64(r.IntN(2000))
			p.post(1+r.IntN(8), start.Add(time.Duration(now)))
		}
		done := 0
		for done < n {
			k := min(cqMod, n-done)
			done += k
			at := max(p.posted[done-1]+1, now) + int64(r.IntN(5000))
			now = at
			if r.IntN(10) == 0 {
				p.nDone = done // a completion whose stamp was lost
				continue
			}
			p.complete(k, start.Add(time.Duration(at)))
		}
		got, want := p.msgRate(), pairsRate(p)
		if d := got - want; d > 1e-9*want || d < -1e-9*want {
			t.Fatalf("run %d (n %d, -l %d, -Q %d): hull %.9g msg/s, every pair %.9g", run, n, list, cqMod, got, want)
		}
	}
}
