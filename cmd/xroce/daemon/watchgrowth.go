package daemon

import (
	"context"
	"time"
)

// WatchGrowth looks at get every look until ctx ends, and calls log with how much it
// grew since the last call (or since it was 0: every counter watched belongs to an
// object made with its watcher) and its value, at most once per every.
func WatchGrowth(ctx context.Context, look, every time.Duration, get func() uint64, log func(grew, total uint64)) {
	t := time.NewTicker(look)
	defer t.Stop()
	var seen uint64 // from 0, not the first look: what grew before it (while the goroutine started) counts too
	var logged time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n := get()
		if n == seen || time.Since(logged) < every {
			continue
		}
		log(n-seen, n)
		seen, logged = n, time.Now()
	}
}
