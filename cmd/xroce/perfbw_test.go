package main

import "testing"

// TestDurationNote: a -D run that completed no message says why it measured
// nothing; one that completed some, or one without -D, says nothing.
func TestDurationNote(t *testing.T) {
	for _, c := range []struct {
		duration int
		iters    uint64
		want     string
	}{
		{2, 0, "-D 2 ended before the first 2147483647-byte message completed, so the row measures nothing: give a longer -D or a smaller -s"},
		{2, 1, ""},
		{0, 0, ""},
	} {
		if got := durationNote(&perfOptions{duration: c.duration}, 2147483647, c.iters); got != c.want {
			t.Errorf("-D %d, %d iterations: %q, want %q", c.duration, c.iters, got, c.want)
		}
	}
}
