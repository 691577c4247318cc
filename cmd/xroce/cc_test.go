package main

import (
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xroce/xroce/test/testnet"
	"github.com/xroce/xroce/transport"
)

// TestCCFlagErrors: --cc takes none or dcqcn, and only the engine's: an RDMA
// device runs its own congestion control.
func TestCCFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--cc", "reno"}, "--cc \"reno\": want none (rdma_rxe's wire: no ECN, no CNPs) or dcqcn"},
		{[]string{"--provider", "verbs", "-d", "rxe0", "--cc", "dcqcn"}, "--cc and --dcqcn are the engine's: with --provider verbs the RDMA device runs its own"},
	} {
		_, err := parsePerf("write_bw", c.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
	for _, cc := range []string{"none", "dcqcn"} {
		if o, err := parsePerf("write_bw", []string{"--cc", cc}, io.Discard); err != nil || o.cc != cc {
			t.Errorf("--cc %s: %v", cc, err)
		}
	}
}

// counterLine matches a --counters line: name and value.
var counterLine = regexp.MustCompile(`(?m)^  (\S+)\s+(\d+)$`)

func countersIn(out string) map[string]uint64 {
	m := map[string]uint64{}
	for _, l := range counterLine.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseUint(l[2], 10, 64)
		m[l[1]] += v
	}
	return m
}

// TestCCDCQCN: write_bw --cc dcqcn on both sides through a bridge that sets CE on a
// tenth of the ECN-capable RoCE frames towards the server (nftables): the server's
// --counters show the marked frames and the CNPs it sent, the client's the CNPs
// it handled (the same number: the bridge loses nothing), and the data is verified.
// With --cc none on the client its frames are not ECN-capable: nothing is marked.
func TestCCDCQCN(t *testing.T) {
	n := testnet.New(t, testnet.Options{Bridge: true})
	nft := bridgeChain(t, n, "cemark")
	nft("add", "rule", "bridge", "cemark", "fw", "ip", "daddr", n.IPB.String(), "udp", "dport", "4791", "ip", "ecn", "ect0",
		"numgen", "random", "mod", "100", "<", "10", "ip", "ecn", "set", "ce")
	args := []string{"write_bw", "-s", "1048576", "-n", "30", "--verify", "--counters"}
	srv, cli := pair(t, n, append(args, "--cc", "dcqcn", "-d", n.IfB), append(args, "--cc", "dcqcn", "-d", n.IfA, n.IPB.String()))
	sc, cc := countersIn(srv), countersIn(cli)
	if sc["np_ecn_marked_roce_packets"] == 0 || sc["np_cnp_sent"] == 0 || cc["rp_cnp_handled"] != sc["np_cnp_sent"] ||
		!strings.Contains(cli, " Data verified: ") && !strings.Contains(srv, " Data verified: ") {
		t.Fatalf("server counters %v, client counters %v\nserver:\n%s\nclient:\n%s", sc, cc, srv, cli)
	}
	if want := " xroce cc        : dcqcn, --dcqcn software\n"; !strings.Contains(cli, want) || !strings.Contains(srv, want) {
		t.Errorf("the header does not say %q:\nserver:\n%s\nclient:\n%s", want, srv, cli)
	}
	srv, cli = pair(t, n, append(args, "--cc", "dcqcn", "-d", n.IfB), append(args, "-d", n.IfA, n.IPB.String()))
	if sc := countersIn(srv); sc["np_ecn_marked_roce_packets"] != 0 || sc["np_cnp_sent"] != 0 {
		t.Fatalf("--cc none's frames were marked: server counters %v\n%s", sc, srv)
	}
	if strings.Contains(cli, "xroce cc") {
		t.Errorf("--cc none: the header names a congestion control:\n%s", cli)
	}
	// Over the UDP link DCQCN sees no CE marks: the header says so (a trial ran it
	// believing it was on).
	udp := []string{"write_bw", "--link", "udp", "--cc", "dcqcn", "-s", "64", "-n", "10"}
	_, cli = pair(t, n, append(udp, "-d", n.IfB), append(udp, "-d", n.IfA, n.IPB.String()))
	if want := " xroce cc        : dcqcn, --dcqcn software (no effect over the UDP link, which sees no CE marks: use --link xdp)\n"; !strings.Contains(cli, want) {
		t.Errorf("--link udp: the header does not say %q:\n%s", want, cli)
	}
}

// TestDCQCNFlag: --dcqcn sets the named parameters in their units and leaves the
// rest zero (mlx5's defaults); bad names, values and combinations are refused
// with the fix.
func TestDCQCNFlag(t *testing.T) {
	p, err := parseDCQCN("dce_tcp_rtt=55, dce_tcp_g=1020,rpg_max_rate=2000,rpg_time_reset=1500,rpg_byte_reset=1048576,min_time_between_cnps=50,rpg_ai_rate=40")
	if err != nil {
		t.Fatal(err)
	}
	if q, err := parseDCQCN(" dce_tcp_rtt = 55 , dce_tcp_g=1020"); err != nil || q.AlphaPeriod != 55*time.Microsecond || q.G != 1020 {
		t.Errorf("spaces around the items and '=': %+v, %v", q, err)
	}
	want := transport.SoftwareDCQCN()
	want.AlphaPeriod, want.G, want.MaxRate = 55*time.Microsecond, 1020, 2_000_000_000
	want.TimeReset, want.ByteReset, want.CNPInterval, want.AIRate = 1500*time.Microsecond, 1<<20, 50*time.Microsecond, 40_000_000
	if p != want {
		t.Fatalf("parsed %+v, want %+v", p, want)
	}
	for flag, want := range map[string]transport.DCQCNParams{"": transport.SoftwareDCQCN(), "software": transport.SoftwareDCQCN(), "mlx5": transport.DefaultDCQCN()} {
		if p, err := parseDCQCN(flag); err != nil || p != want {
			t.Errorf("--dcqcn %q: %+v, %v; want %+v", flag, p, err, want)
		}
	}
	p, err = parseDCQCN("mlx5,rpg_max_rate=2000")
	want = transport.DefaultDCQCN()
	want.MaxRate = 2_000_000_000
	if err != nil || p != want {
		t.Fatalf("mlx5,rpg_max_rate=2000: %+v, %v; want %+v", p, err, want)
	}
	if sw, mlx := transport.SoftwareDCQCN(), transport.DefaultDCQCN(); sw.MaxRate != 3_000_000_000 || sw.AlphaPeriod != 55*time.Microsecond ||
		sw.G != 1020 || sw.TimeReset != 1500*time.Microsecond || sw.ByteReset != 1<<20 || sw.AIRate != 40_000_000 || sw.HAIRate != 100_000_000 ||
		sw.Threshold != 5 || sw.ReducePeriod != mlx.ReducePeriod || sw.Gd != mlx.Gd || sw.CNPInterval != mlx.CNPInterval {
		t.Fatalf("SoftwareDCQCN %+v: not the set docs/congestion.md gives", sw)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--cc", "dcqcn", "--dcqcn", "rpg_gd=3,software"}, `--dcqcn "rpg_gd=3,software": one preset at most, and only as the first item, e.g. software,dce_tcp_rtt=55`},
		{[]string{"--cc", "dcqcn", "--dcqcn", "software,mlx5"}, `--dcqcn "software,mlx5": one preset at most, and only as the first item`},
		{[]string{"--cc", "dcqcn", "--dcqcn", "mlx5=1"}, `--dcqcn "mlx5=1": mlx5 is a preset and takes no value; name it alone, as the first item`},
		{[]string{"--dcqcn", "dce_tcp_g=1020"}, `--dcqcn "dce_tcp_g=1020" tunes DCQCN: add --cc dcqcn`},
		{[]string{"--provider", "verbs", "-d", "rxe0", "--dcqcn", "mlx5"}, "--cc and --dcqcn are the engine's: with --provider verbs the RDMA device runs its own"},
		{[]string{"--cc", "dcqcn", "--dcqcn", "alpha=3"}, `--dcqcn "alpha": not a DCQCN parameter; want one of mlx5's names: rpg_max_rate, `},
		{[]string{"--cc", "dcqcn", "--dcqcn", "dce_tcp_g"}, `--dcqcn "dce_tcp_g": "dce_tcp_g" is not NAME=VALUE`},
		{[]string{"--cc", "dcqcn", "--dcqcn", "dce_tcp_g=1024"}, "--dcqcn dce_tcp_g=1024: want a whole number from 1 to 1023 (1/1024)"},
		{[]string{"--cc", "dcqcn", "--dcqcn", "rpg_min_rate=0"}, "--dcqcn rpg_min_rate=0: want a whole number from 1 to 400000 (Mb/s)"},
		{[]string{"--cc", "dcqcn", "--dcqcn", "rpg_min_dec_fac=100"}, "--dcqcn rpg_min_dec_fac=100: want a whole number from 1 to 99 (per cent; 100 would forbid every cut)"},
		{[]string{"--cc", "dcqcn", "--dcqcn", "dce_tcp_rtt=1.5"}, "--dcqcn dce_tcp_rtt=1.5: want a whole number from 1 to 10000000 (µs)"},
		{[]string{"--cc", "dcqcn", "--dcqcn", "rpg_gd=3,rpg_gd=4"}, `--dcqcn "rpg_gd=3,rpg_gd=4": rpg_gd given twice`},
		{[]string{"--cc", "dcqcn", "--dcqcn", "mlx5,"}, `--dcqcn "mlx5,": item 2 is empty (a stray comma?)`},
		{[]string{"--cc", "dcqcn", "--dcqcn", "rpg_min_rate=5000,rpg_max_rate=100"}, "rpg_min_rate 5000 Mb/s is above rpg_max_rate 100 Mb/s, the line rate"},
		{[]string{"--cc", "dcqcn", "--dcqcn", "rpg_hai_rate=4000"}, "rpg_ai_rate 40 and rpg_hai_rate 4000 Mb/s must not exceed rpg_max_rate 3000 Mb/s"},
		{[]string{"--cc", "dcqcn", "--dcqcn", "dce_tcp_rtt=55", "--dcqcn", "dce_tcp_g=1020"}, `--dcqcn given twice ("dce_tcp_rtt=55", then "dce_tcp_g=1020"): give one, its items comma separated`},
		{[]string{"--cc", " dcqcn"}, `--cc " dcqcn": want none`},
	} {
		_, err := parsePerf("write_bw", c.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want %q", c.args, err, c.want)
		}
	}
}

// TestLinkFlagsCheckedFirst: every tool with the engine's link flags refuses a bad
// --cc or --dcqcn before it opens the interface (which does not exist here, so a
// tool that opened it first would name the interface instead).
func TestLinkFlagsCheckedFirst(t *testing.T) {
	for _, args := range [][]string{
		{"write_bw", "-d", "nosuch0"},
		{"pingpong", "-d", "nosuch0"},
		{"rping", "-s", "--dev", "nosuch0"},
		{"daemon", "-d", "nosuch0", "--name", "xrocetest9"},
		{"crosscheck", "-d", "nosuch0"},
	} {
		for _, bad := range [][]string{{"--cc", "bogus"}, {"--cc", "dcqcn", "--dcqcn", "mlx5,"}} {
			a := append(append([]string{}, args...), bad...)
			out, err := exec.Command(bin, a...).CombinedOutput()
			want := `--cc "bogus": want none`
			if bad[0] == "--cc" && len(bad) > 2 {
				want = `--dcqcn "mlx5,": item 2 is empty`
			}
			if err == nil || !strings.Contains(string(out), want) || strings.Contains(string(out), "nosuch0") {
				t.Errorf("xroce %s: %v\n%s\nwant %q before anything names the interface", strings.Join(a, " "), err, out, want)
			}
		}
	}
}
