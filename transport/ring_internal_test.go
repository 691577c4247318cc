package transport

import "testing"

// TestRingWraps: a ring keeps FIFO order across wrap-around and growth (its
// storage stays a power of two, which its index mask needs).
func TestRingWraps(t *testing.T) {
	var r ring[int]
	next, want := 0, 0
	for round := 0; round < 5; round++ {
		for i := 0; i < 13+round*11; i++ { // pushes outrun pops: the ring grows mid-wrap
			r.push(next)
			next++
		}
		for i := 0; i < 9; i++ {
			if got := *r.at(0); got != want {
				t.Fatalf("round %d: front %d, want %d", round, got, want)
			}
			r.popFront()
			want++
		}
		if n := len(r.buf); n&(n-1) != 0 {
			t.Fatalf("storage %d long, not a power of two", n)
		}
		for i := 0; i < r.len(); i++ {
			if got := *r.at(i); got != want+i {
				t.Fatalf("round %d: at(%d) = %d, want %d", round, i, got, want+i)
			}
		}
	}
	r.clear()
	if r.len() != 0 {
		t.Fatalf("len %d after clear", r.len())
	}
}
