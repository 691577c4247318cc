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

// TestTimerNear: Run polls through to a timer due within timerHorizon and sleeps
// towards a later one; a timer re-armed later counts at its new time.
func TestTimerNear(t *testing.T) {
	ea, _ := NewPipe(PipeConfig{}, PipeConfig{})
	d, err := Open(ea, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d.timerNear() {
		t.Fatal("no timer armed: near")
	}
	qp := &QueuePair{dev: d}
	qp.req.timer = time.Now().Add(timerHorizon / 2)
	d.armed(qp, qp.req.timer)
	if !d.timerNear() {
		t.Fatalf("a timer due in %v: not near", timerHorizon/2)
	}
	qp.req.timer = time.Now().Add(5 * timerHorizon)
	if d.timerNear() {
		t.Fatalf("the timer re-armed to %v: still near", 5*timerHorizon)
	}
	qp.req.timer = timeZero
	if d.timerNear() {
		t.Fatal("the timer stopped: still near")
	}
}
