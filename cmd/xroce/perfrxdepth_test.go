package main

import (
	"io"
	"strings"
	"testing"
)

// TestResolveRxDepth: -r as perftest's parser settles it: 512 for the send tests
// and 1 for the others, at most -n, one more when odd (not with -a), and its errors.
func TestResolveRxDepth(t *testing.T) {
	for _, c := range []struct {
		name, args string
		want       int
		err        string
	}{
		{"send_bw", "", 512, ""},
		{"send_lat", "", 512, ""},
		{"send_bw", "-n 100", 100, ""},
		{"send_bw", "-n 5", 6, ""},
		{"send_bw", "-r 7", 8, ""},
		{"send_bw", "-r 7 -a", 7, ""},
		{"send_bw", "-r 700 -D 3", 700, ""},
		{"send_bw", "-r 3 --run_infinitely", 3, ""},
		{"write_bw", "", 1, ""},
		{"read_lat", "-r 1", 1, ""},
		{"write_bw", "-r 2", 0, "-r 2: RDMA verbs post no receives: the RX depth can be only 1 (as in perftest)"},
		{"send_bw", "-r 0", 0, "-r 0: the RX depth is 1..16384"},
		{"send_bw", "-r 16385", 0, "-r 16385: the RX depth is 1..16384"},
	} {
		o, err := parsePerf(c.name, strings.Fields(c.args), io.Discard)
		switch {
		case c.err != "":
			if err == nil || err.Error() != c.err {
				t.Errorf("%s %s: error %v, want %q", c.name, c.args, err, c.err)
			}
		case err != nil:
			t.Errorf("%s %s: %v", c.name, c.args, err)
		case o.rxDepth != c.want:
			t.Errorf("%s %s: RX depth %d, want %d", c.name, c.args, o.rxDepth, c.want)
		}
	}
}

// TestDefaultIters: -n defaults as perftest's (perftest_parameters.c): 5000 for
// write_bw (DEF_ITERS_WB) and 1000 for every other test (DEF_ITERS), so a peer
// running Debian's ib_send_bw or ib_read_bw with its defaults runs as many (with
// 5000 for every bandwidth test, send_bw against ib_send_bw failed: issue 20's
// trial).
func TestDefaultIters(t *testing.T) {
	for name, want := range map[string]int{"write_bw": 5000, "read_bw": 1000, "send_bw": 1000, "atomic_bw": 1000,
		"write_lat": 1000, "read_lat": 1000, "send_lat": 1000, "atomic_lat": 1000} {
		o, err := parsePerf(name, nil, io.Discard)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if o.iters != want {
			t.Errorf("%s: -n defaults to %d, want %d", name, o.iters, want)
		}
	}
}
