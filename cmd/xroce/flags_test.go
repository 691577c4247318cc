package main

import (
	"fmt"
	"math"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xroce/xroce/test/testnet"
)

// TestBidirectional: -b on every bandwidth test, with --verify: both sides run the
// test, each checks what the other sent, and both print perftest's one row, the
// sum of both directions (the same figures on both sides), under the
// "Bidirectional" title; -a and -q 2 too; with -D both end at -D.
func TestBidirectional(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	for _, c := range []struct {
		cmd   string
		args  []string
		rows  int
		title string
	}{
		{"write_bw", []string{"-n", "300"}, 1, "RDMA_Write Bidirectional BW Test"},
		{"read_bw", []string{"-n", "300"}, 1, "RDMA_Read Bidirectional BW Test"},
		{"send_bw", []string{"-n", "300", "-s", "4000"}, 1, "Send Bidirectional BW Test"},
		{"atomic_bw", []string{"-n", "300"}, 1, "Atomic FETCH_AND_ADD Bidirectional BW Test"},
		// -t 2: 20 8 MiB messages in flight each way at once overwhelm this
		// machine's veth (go-back-N then runs out of retries: issue 18).
		{"write_bw", []string{"-n", "20", "-a", "-t", "2"}, 23, "RDMA_Write Bidirectional BW Test"},
		{"send_bw", []string{"-n", "20", "-a", "-t", "2"}, 23, "Send Bidirectional BW Test"},
		{"write_bw", []string{"-n", "300", "-q", "2", "-l", "10"}, 1, "RDMA_Write Bidirectional Post List BW Test"},
	} {
		t.Run(c.cmd+strings.Join(c.args, ""), func(t *testing.T) {
			args := append([]string{c.cmd, "-b", "--verify"}, c.args...)
			srv, cli := pair(t, n, append(args, "-d", n.IfB), append(args, "-d", n.IfA, n.IPB.String()))
			var figures [2][]string
			for i, out := range []string{srv, cli} {
				rows := bwLine.FindAllStringSubmatch(out, -1)
				if len(rows) != c.rows || !strings.Contains(out, "                    "+c.title+"\n") || !strings.Contains(out, " Data verified: ") {
					t.Fatalf("want %d rows, the title %q and a data verification in\n%s", c.rows, c.title, out)
				}
				for _, r := range rows {
					figures[i] = append(figures[i], r[3]+" "+r[4]+" "+r[5]) // the sums
				}
			}
			if strings.Join(figures[0], ",") != strings.Join(figures[1], ",") {
				t.Errorf("the sums differ: server %v, client %v", figures[0], figures[1])
			}
		})
	}
	t.Run("send_bw-D", func(t *testing.T) {
		args := []string{"send_bw", "-b", "-D", "2", "-s", "4096"}
		r := timedPair(t, n, append(args, "-d", n.IfB), append(args, "-d", n.IfA, n.IPB.String()))
		if r.srvErr != nil || r.cliErr != nil || r.cliTook > 6*time.Second || r.srvTook > 6*time.Second {
			t.Errorf("send_bw -b -D 2: server %v after %v, client %v after %v; want both to succeed within 6 s", r.srvErr, r.srvTook, r.cliErr, r.cliTook)
		}
	})
}

var figureLine = regexp.MustCompile(`^\d+\.\d{6}\n$`)

// TestOutput: --output prints one positive figure per size ("%lf", as perftest)
// and nothing else, on both sides (the banner, header and table go too).
func TestOutput(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	for _, c := range []struct {
		cmd, output string
		args        []string
	}{
		{"write_bw", "bandwidth", []string{"-n", "500"}},
		{"send_bw", "message_rate", []string{"-n", "500", "-s", "4000"}},
		{"write_lat", "latency", []string{"-n", "300"}},
		{"read_bw", "bandwidth", []string{"-n", "500", "--report_gbits"}},
		{"write_bw", "bandwidth", []string{"-n", "200", "-l", "4", "--verify"}}, // its notes stay out of the figure's way
		{"send_bw", "message_rate", []string{"-n", "100", "--verify-all"}},
	} {
		t.Run(c.cmd+"/"+c.output, func(t *testing.T) {
			args := append([]string{c.cmd, "--output=" + c.output}, c.args...)
			srv, cli := pair(t, n, append(args, "-d", n.IfB), append(args, "-d", n.IfA, n.IPB.String()))
			for who, out := range map[string]string{"server": srv, "client": cli} {
				v, err := strconv.ParseFloat(strings.TrimSpace(out), 64)
				if !figureLine.MatchString(out) || err != nil || v <= 0 {
					t.Errorf("%s: want one positive figure, got\n%q", who, out)
				}
			}
		})
	}
	for _, c := range []struct{ args, want string }{
		{"write_lat --output=bandwidth", "--output=bandwidth: a latency test prints latency"},
		{"write_bw --output=latency", "--output=latency: a bandwidth test prints bandwidth or message_rate"},
		{"send_bw --output=speed", "--output=speed: the output is bandwidth, message_rate or latency"},
	} {
		out, err := exec.Command(bin, strings.Fields(c.args)...).CombinedOutput()
		if exitCode(err) != 1 || !strings.Contains(string(out), c.want) {
			t.Errorf("%s: %v\n%s\nwant %q", c.args, err, out, c.want)
		}
	}
}

// TestReportGbits: --report_gbits reports Gb/s (10^9 bits): the table's head says
// so and the average is the message rate times the size in bits; below 0.1 Gb/s
// with six decimals, as perftest's REPORT_FMT_EXT.
func TestReportGbits(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	for _, size := range []int{65536, 2} {
		args := []string{"write_bw", "--report_gbits", "-n", "2000", "-s", fmt.Sprint(size)}
		srv, cli := pair(t, n, append(args, "-d", n.IfB), append(args, "-d", n.IfA, n.IPB.String()))
		for who, out := range map[string]string{"server": srv, "client": cli} {
			if !strings.Contains(out, " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n") {
				t.Errorf("%s: no Gb/s head in\n%s", who, out)
			}
			m := bwLine.FindStringSubmatch(out)
			if m == nil {
				t.Fatalf("%s: no row in\n%s", who, out)
			}
			avg, _ := strconv.ParseFloat(m[4], 64)
			rate, _ := strconv.ParseFloat(m[5], 64)
			if want := rate * float64(size) * 8 / 1e3; math.Abs(avg-want) > 0.02*want+1e-5 {
				t.Errorf("%s: %s Gb/s at %s Mpps of %d bytes: want %.6f", who, m[4], m[5], size, want)
			}
			if decimals := len(m[4]) - strings.Index(m[4], ".") - 1; avg < 0.1 && decimals != 6 || avg >= 0.1 && decimals != 2 {
				t.Errorf("%s: %s Gb/s printed with %d decimals", who, m[4], decimals)
			}
		}
	}
}

// TestPostList: -l posts lists of that size with one signaled completion each:
// the title and header say so, every iteration is counted on every QP, the data
// checks; -n must be a multiple of it and -l at most -t, as in perftest.
func TestPostList(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	for _, cmd := range []string{"write_bw", "send_bw", "read_bw"} {
		args := []string{cmd, "-l", "8", "-q", "2", "-n", "400", "-s", "4000", "--verify", "--counters"}
		srv, cli := pair(t, n, append(args, "-d", n.IfB), append(args, "-d", n.IfA, n.IPB.String()))
		checkTable(t, cmd+" client", cli, false, 4000, 800, cmd == "read_bw")
		checkTable(t, cmd+" server", srv, false, 4000, 800, cmd != "read_bw")
		title := map[string]string{"write_bw": "RDMA_Write", "send_bw": "Send", "read_bw": "RDMA_Read"}[cmd] + " Post List BW Test"
		if !strings.Contains(cli, title) || !strings.Contains(cli, " Post List       : 8\n CQ Moderation   : 8\n") {
			t.Errorf("%s: no post list in the header:\n%s", cmd, cli)
		}
	}
	for _, c := range []struct{ args, want string }{
		{"write_bw -l 8 -n 100", "-l 8: -n 100 must be a multiple of the post list size (as in perftest)"},
		{"write_bw -l 200", "-l 200: the post list size is 1..-t (128)"},
		{"write_lat -l 2", "-l: post lists are for the bandwidth tests (as in perftest)"},
		{"write_lat -b", "-b is for the bandwidth tests: a latency test runs both ways already"},
	} {
		out, err := exec.Command(bin, strings.Fields(c.args)...).CombinedOutput()
		if exitCode(err) != 1 || !strings.Contains(string(out), c.want) {
			t.Errorf("%s: %v\n%s\nwant %q", c.args, err, out, c.want)
		}
	}
}

// TestEvents: -e (sleep on completion events, never poll) on a bandwidth and a
// latency test and pingpong: they run, and perftest's header line says so; -e with
// -D is refused, as in perftest.
func TestEvents(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	for _, c := range []struct {
		cmd  string
		args []string
	}{{"send_bw", []string{"-n", "500", "-s", "4000"}}, {"write_lat", []string{"-n", "300"}}, {"send_lat", []string{"-n", "300"}}} {
		args := append([]string{c.cmd, "-e", "--verify"}, c.args...)
		srv, cli := pair(t, n, append(args, "-d", n.IfB), append(args, "-d", n.IfA, n.IPB.String()))
		for who, out := range map[string]string{"server": srv, "client": cli} {
			dev := map[string]string{"server": n.IfB, "client": n.IfA}[who]
			if !strings.Contains(out, " Test with events. Using "+dev+"_comp0\n") || !strings.Contains(out, " Data verif") {
				t.Errorf("%s %s: no events line or no verification in\n%s", c.cmd, who, out)
			}
		}
	}
	srv, cli := pair(t, n, []string{"pingpong", "-e", "-n", "300", "-d", n.IfB}, []string{"pingpong", "-e", "-n", "300", "-d", n.IfA, n.IPB.String()})
	if !strings.Contains(srv+cli, "300 iters in ") {
		t.Errorf("pingpong -e:\n%s\n%s", srv, cli)
	}
	out, err := exec.Command(bin, "write_bw", "-e", "-D", "3").CombinedOutput()
	if want := "-e: duration mode does not work with events (as in perftest): use -n"; exitCode(err) != 1 || !strings.Contains(string(out), want) {
		t.Errorf("-e -D: %v\n%s\nwant %q", err, out, want)
	}
}
