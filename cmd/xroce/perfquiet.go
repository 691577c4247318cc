package main

import (
	"fmt"
	"os"
	"time"
)

// quiet says on stderr that the peer sent nothing for silent while this side
// waits for it, and how long it goes on waiting (limit, without a frame; 0: for
// ever), so that a stopped or hung peer is named long before the wait ends.
func (c *conn) quiet(silent, limit time.Duration) {
	until := "for ever (--run_infinitely)"
	if limit > 0 {
		until = fmt.Sprintf("until %v without one", limit.Round(time.Second))
	}
	fmt.Fprintf(os.Stderr, "%s: no frame from the peer for %v while this side waits for it: the peer may be stopped (SIGSTOP, a debugger), hung, or cut off; waiting %s, or Ctrl-C\n", name0(c.t.name), silent.Round(time.Second), until)
}
