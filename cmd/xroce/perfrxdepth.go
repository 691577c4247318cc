package main

import "strings"

// perftest's receive depth (-r, --rx-depth; perftest_parameters.h DEF_RX_SEND,
// MAX_RX).
const (
	defRxSend  = 512
	maxRxDepth = 16384
)

// resolveRxDepth settles -r as perftest's parser does for a send test: at most -n
// (an -n run), and one more when odd in a regular run, not with -a or
// --run_infinitely (perftest's "WA for a bug when rx_depth is odd in SEND",
// RUN_REGULAR). The receives posted are at most -n.
func (o *perfOptions) resolveRxDepth(name string) {
	if !strings.HasPrefix(name, "send_") {
		return
	}
	if o.duration == 0 && !o.runInf {
		o.rxDepth = min(o.rxDepth, o.iters)
	}
	if o.rxDepth%2 == 1 && !o.all && !o.runInf {
		o.rxDepth++
	}
}
