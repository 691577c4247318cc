package daemon

import (
	"context"
	"testing"
	"time"
)

// TestWatchGrowthFromZero: what a counter grew before the watcher's first look
// (drops while the daemon was stopped, or while its goroutine started) is logged,
// with the counter's value; nothing is logged again while it stays.
func TestWatchGrowthFromZero(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	type call struct{ grew, total uint64 }
	var calls []call
	WatchGrowth(ctx, 10*time.Millisecond, 0, func() uint64 { return 1500 }, func(grew, total uint64) {
		calls = append(calls, call{grew, total})
	})
	if len(calls) != 1 || calls[0] != (call{1500, 1500}) {
		t.Errorf("logged %+v, want one call of 1500 grown, 1500 in all", calls)
	}
}
