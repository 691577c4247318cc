package main

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestYieldFor: the yield helper refuses no thread and an empty or reversed
// window with a message naming its flags (also through its command line), and
// two threads over a 20 ms window make at least one call each: each call takes
// microseconds, so thousands.
func TestYieldFor(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	now := time.Now()
	for _, c := range []struct {
		threads     int
		from, until time.Time
	}{
		{0, now, now.Add(time.Millisecond)},
		{1, now, now},
		{1, now.Add(time.Millisecond), now},
	} {
		if _, err := yieldFor(c.threads, c.from, c.until); err == nil || !strings.Contains(err.Error(), "want at least one thread and from before until") {
			t.Errorf("%d threads, %v to %v: %v", c.threads, c.from, c.until, err)
		}
	}
	if err := yieldHelper([]string{"-threads", "1"}); err == nil || !strings.Contains(err.Error(), "want at least one thread and from before until") {
		t.Errorf("no window on the command line: %v", err)
	}
	start := time.Now().Add(time.Millisecond)
	n, err := yieldFor(2, start, start.Add(20*time.Millisecond))
	if err != nil || n < 2 {
		t.Errorf("two threads for 20 ms: %d calls, %v", n, err)
	}
}
