package main

import (
	"fmt"
	"io"
)

// perftest's CQ moderation (-Q, --cq-mod; perftest_parameters.c and
// perftest_resources.c's run_iter_bw, perftest 4.5-0.17): a bandwidth test's sender
// asks for a completion only on every cqMod-th work request of a QP, and on the
// last one of an -n run, and counts each completion for the requests before it.
const (
	defCQMod      = 100  // DEF_CQ_MOD
	maxCQMod      = 1024 // MAX_CQ_MOD
	cqModMaxSize  = 8192 // MSG_SIZE_CQ_MOD_LIMIT: above it an unrequested moderation is 1
	cqModOptLong  = "cq-mod"
	cqModOptShort = "Q"
)

// checkCQMod refuses a -Q outside 1..1024 (perftest's CHECK_VALUE_IN_RANGE, for
// every test).
func (o *perfOptions) checkCQMod(set bool) error {
	if set && (o.cqMod < 1 || o.cqMod > maxCQMod) {
		return fmt.Errorf("-Q %d: the CQ moderation is 1..%d", o.cqMod, maxCQMod)
	}
	return nil
}

// resolveCQMod settles -Q as perftest's parser does, once -t is final (and
// checkCQMod passed): unset, it is 1 for messages above 8 KiB (except with
// -a or -e); it is at most -t; with -l it is the list size unless given, and must
// divide it. perftest's notes go to out, before the header.
func (o *perfOptions) resolveCQMod(set bool, out io.Writer) error {
	if o.size > cqModMaxSize && !o.all && !o.events {
		switch {
		case !set:
			o.cqMod = 1
		case o.cqMod > 1 && o.output == "":
			fmt.Fprintln(out, rule)
			fmt.Fprintln(out, "Warning: Large message requested and CQ moderation enabled")
			fmt.Fprintln(out, "Warning: It can lead to inaccurate results")
		}
	}
	o.cqMod = min(o.cqMod, o.txDepth)
	if o.postList > 1 {
		switch {
		case !set:
			o.cqMod = o.postList
			if o.output == "" {
				fmt.Fprintln(out, rule)
				fmt.Fprintln(out, "Post List requested - CQ moderation will be the size of the post list")
			}
		case o.postList%o.cqMod != 0:
			return fmt.Errorf("-l %d -Q %d: the post list size must be a multiple of the CQ moderation (as in perftest)", o.postList, o.cqMod)
		}
	}
	return nil
}

// signaled says whether work request k (from 0) of a QP asks for a completion:
// every cqMod-th, and the last of a run of iters (bounded: not -D or
// --run_infinitely).
func signaled(k, cqMod, iters int, bounded bool) bool {
	return (k+1)%cqMod == 0 || bounded && k == iters-1
}
