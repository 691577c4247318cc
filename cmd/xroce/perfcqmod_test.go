package main

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/xroce/xroce/test/testnet"
)

// TestSignaled: the work requests that ask for a completion are perftest's:
// every -Q-th (k+1 a multiple of it) and the last of an -n run.
func TestSignaled(t *testing.T) {
	for _, c := range []struct {
		iters, cqMod int
		bounded      bool
		want         []int
	}{
		{250, 100, true, []int{99, 199, 249}},
		{16, 4, true, []int{3, 7, 11, 15}},
		{5, 1, true, []int{0, 1, 2, 3, 4}},
		{250, 100, false, []int{99, 199}},
		{100, 128, true, []int{99}},
	} {
		var got []int
		for k := range c.iters {
			if signaled(k, c.cqMod, c.iters, c.bounded) {
				got = append(got, k)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("-n %d -Q %d bounded %v: signaled %v, want %v", c.iters, c.cqMod, c.bounded, got, c.want)
		}
	}
}

// TestResolveCQMod: -Q's value after perftest's parser rules, the notes it prints
// before the header, and its errors.
func TestResolveCQMod(t *testing.T) {
	for _, c := range []struct {
		name, args string
		want       int
		note, err  string
	}{
		{"write_bw", "-s 64", 100, "", ""},
		{"write_bw", "-s 8192", 100, "", ""},
		{"write_bw", "-s 8193", 1, "", ""},
		{"write_bw", "", 1, "", ""}, // perftest's 64 KiB default
		{"write_bw", "-a", 100, "", ""},
		{"send_bw", "-s 65536 -e", 100, "", ""},
		{"read_bw", "-s 65536 -Q 7", 7, "Warning: Large message requested and CQ moderation enabled\nWarning: It can lead to inaccurate results\n", ""},
		{"write_bw", "-s 64 -t 50", 50, "", ""},
		{"write_bw", "-s 64 -n 20", 20, "", ""},
		{"write_bw", "-s 64 -l 8", 8, "Post List requested - CQ moderation will be the size of the post list\n", ""},
		{"write_bw", "-s 64 -l 8 -Q 4", 4, "", ""},
		{"write_bw", "-s 64 -l 8 -Q 3", 0, "", "-l 8 -Q 3: the post list size must be a multiple of the CQ moderation (as in perftest)"},
		{"write_bw", "-Q 0", 0, "", "-Q 0: the CQ moderation is 1..1024"},
		{"atomic_bw", "-Q 1025", 0, "", "-Q 1025: the CQ moderation is 1..1024"},
		{"write_lat", "-Q 4", 0, "", ""}, // hidden, unused: a latency test signals every request
		{"send_lat", "-Q 0", 0, "", "-Q 0: the CQ moderation is 1..1024"},
	} {
		var out bytes.Buffer
		o, err := parsePerf(c.name, strings.Fields(c.args), &out)
		switch {
		case c.err != "":
			if err == nil || err.Error() != c.err {
				t.Errorf("%s %s: error %v, want %q", c.name, c.args, err, c.err)
			}
			continue
		case err != nil:
			t.Errorf("%s %s: %v", c.name, c.args, err)
			continue
		case c.name == "write_lat":
			continue
		}
		if o.cqMod != c.want {
			t.Errorf("%s %s: CQ moderation %d, want %d", c.name, c.args, o.cqMod, c.want)
		}
		note := ""
		if c.note != "" {
			note = rule + "\n" + c.note
		}
		if out.String() != note {
			t.Errorf("%s %s: printed %q, want %q", c.name, c.args, out.String(), note)
		}
	}
}

// TestCQModeration: runs with a CQ moderation that does not divide -n, on two
// QPs and with the default of 100, count every iteration and check the data; the
// header says the moderation, as perftest's does for every bandwidth test.
func TestCQModeration(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	for _, c := range []struct {
		cmd, args   string
		size, iters int
		mod         string
	}{
		{"write_bw", "-Q 7 -q 2 -n 100", 3000, 200, "7"},
		{"read_bw", "-n 250", 64, 250, "100"},
		{"send_bw", "-n 300", 65536, 300, "1"},
	} {
		args := append([]string{c.cmd, "--verify", "-s", fmt.Sprint(c.size)}, strings.Fields(c.args)...)
		srv, cli := pair(t, n, append(args, "-d", n.IfB), append(slices.Clip(args), "-d", n.IfA, n.IPB.String()))
		checkTable(t, c.cmd+" client", cli, false, c.size, c.iters, c.cmd == "read_bw")
		if c.cmd != "read_bw" && !strings.Contains(srv, " Data verified: ") {
			t.Errorf("%s server: no data verification in\n%s", c.cmd, srv)
		}
		for who, out := range map[string]string{"server": srv, "client": cli} {
			if !strings.Contains(out, " CQ Moderation   : "+c.mod+"\n") {
				t.Errorf("%s %s: no CQ moderation %s in the header:\n%s", c.cmd, who, c.mod, out)
			}
		}
	}
}
