package transport

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestTimerHeapOrder: entries come out of the heap in time order, whatever the
// order they went in.
func TestTimerHeapOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Unix(1796000000, 0)
	var h timerHeap
	var want []time.Time
	for range 1000 {
		at := base.Add(time.Duration(rng.IntN(5000)) * time.Microsecond)
		h.push(timerEntry{at: at})
		want = append(want, at)
	}
	slices.SortFunc(want, func(a, b time.Time) int { return a.Compare(b) })
	for i, w := range want {
		if got := h.pop().at; !got.Equal(w) {
			t.Fatalf("pop %d: %v, want %v", i, got.Sub(base), w.Sub(base))
		}
	}
	if len(h) != 0 {
		t.Fatalf("%d entries left", len(h))
	}
}
