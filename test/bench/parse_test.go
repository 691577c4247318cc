package main

import (
	"maps"
	"math"
	"slices"
	"testing"
)

// Outputs as xroce prints them (cmd/xroce/report.go).
const (
	bwOut = ` #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 65536      4096           549.54             372.82               0.005965
---------------------------------------------------------------------------------------
`
	latOut = ` #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]
 64      4999          33.68          11878.43     407.07             1110.65        1278.14            5729.57                7968.89
---------------------------------------------------------------------------------------
`
)

func TestParseBW(t *testing.T) {
	r, err := parseBW(bwOut)
	if err != nil {
		t.Fatal(err)
	}
	if r.size != 65536 || r.iters != 4096 || r.avgMiBs != 372.82 {
		t.Errorf("%+v", r)
	}
	if _, err := parseBW("no table"); err == nil {
		t.Error("no error without a table")
	}
}

func TestParseLat(t *testing.T) {
	r, err := parseLat(latOut)
	if err != nil {
		t.Fatal(err)
	}
	if r.size != 64 || r.iters != 4999 || math.Abs(r.p50-407.07e-6) > 1e-12 || math.Abs(r.p99-5729.57e-6) > 1e-12 {
		t.Errorf("%+v", r)
	}
}

// Debian's perftest (4.5-0.17) through the verbs library, as it prints them: tabs
// in the columns, and t_stdev "-nan" when rounding made the variance negative.
const (
	perftestBWOut = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n" +
		" 64         150000           0.00               21.65  \t\t   0.354755\n" +
		"---------------------------------------------------------------------------------------\n"
	perftestLatOut = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n" +
		" 64      2000          15.43          131238.73      91.49    \t       901.27      \t-nan   \t\t10681.71 \t\t93885.85\n" +
		"---------------------------------------------------------------------------------------\n"
)

func TestParsePerftest(t *testing.T) {
	bw, err := parseBW(perftestBWOut)
	if err != nil {
		t.Fatal(err)
	}
	if bw.size != 64 || bw.iters != 150000 || bw.avgMiBs != 21.65 {
		t.Errorf("bandwidth %+v", bw)
	}
	lat, err := parseLat(perftestLatOut)
	if err != nil {
		t.Fatal(err)
	}
	if lat.size != 64 || lat.iters != 2000 || math.Abs(lat.p50-91.49e-6) > 1e-12 || math.Abs(lat.p99-10681.71e-6) > 1e-12 {
		t.Errorf("latency %+v", lat)
	}
	// A NaN where a figure is read is an error, not a figure.
	if _, err := parseLat(" 64      2000          15.43          131238.73      nan    \t       901.27      \t-nan   \t\t10681.71 \t\t93885.85\n"); err == nil {
		t.Error("no error for t_typical nan")
	}
}

// TestListening reads /proc/PID/net/tcp and tcp6 tables as the kernel writes them:
// perftest's server listening on 18515 (0x4853) over IPv4, and other sockets.
func TestListening(t *testing.T) {
	tcp := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode                                                     \n" +
		"   0: 00000000:4853 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 114786 1 00000000a310f410 100 0 0 10 0                    \n" +
		"   1: 0100000A:C350 0200000A:4854 01 00000000:00000000 00:00000000 00000000     0        0 114790 1 00000000b310f410 20 4 30 10 -1                   \n"
	tcp6 := "  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: 00000000000000000000000000000000:1451 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 20001 1 0000000000000000 100 0 0 10 0\n"
	for _, c := range []struct {
		name, table string
		port        int
		want        bool
	}{
		{"tcp", tcp, 18515, true},
		{"tcp", tcp, 18516, false}, // an established connection to 18516, not a listener
		{"tcp", tcp, 50000, false}, // 0xC350: established, not listening
		{"tcp6", tcp6, 5201, true},
		{"tcp6", tcp6, 18515, false},
		{"empty", "", 18515, false},
	} {
		if got := listening(c.table, c.port); got != c.want {
			t.Errorf("port %d in the %s table: %v, want %v", c.port, c.name, got, c.want)
		}
	}
}

func TestParseResult(t *testing.T) {
	kv, err := parseResult("ready\nresult sent=12 seconds=1.5 reason=\"a \\\"quoted\\\" reason\" maxpmtu=2048\n")
	if err != nil {
		t.Fatal(err)
	}
	if kv["sent"] != "12" || kv["reason"] != `a "quoted" reason` || kv["maxpmtu"] != "2048" {
		t.Errorf("%q", kv)
	}
	v, err := floats(kv, "sent", "seconds")
	if err != nil || v[0] != 12 || v[1] != 1.5 {
		t.Errorf("%v %v", v, err)
	}
	if _, err := floats(kv, "missing"); err == nil {
		t.Error("no error for a missing value")
	}
}

func TestMedianAndSummary(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median %v", m)
	}
	if m := median([]float64{4, 1}); m != 2.5 {
		t.Errorf("median of two %v", m)
	}
	s := summarize([]result{
		{fig: map[string]float64{figGoodput: 10}, cpu: [2]cpuTime{{User: 1, Sys: 9}, {}}},
		{fig: map[string]float64{figGoodput: 30}, cpu: [2]cpuTime{{User: 3, Sys: 7}, {}}},
		{fig: map[string]float64{figGoodput: 20}, cpu: [2]cpuTime{{User: 2, Sys: 8}, {}}},
	}, nil)
	if s.fig[figGoodput] != 20 || s.cpu[0].User != 2 || s.cpu[0].Sys != 8 || s.passes != 3 {
		t.Errorf("%+v", s)
	}
}

func TestVerdicts(t *testing.T) {
	r := results{
		"xdp read 8388608": {fig: map[string]float64{figGoodput: 96}},
		"xdp read 1048576": {fig: map[string]float64{figGoodput: 100}},
		"xdp write_lat":    {fig: map[string]float64{figP50: 30e-6}},
		"raw rtt ppoll":    {fig: map[string]float64{figP50: 20e-6}},
		"lib write_lat":    {fig: map[string]float64{figP50: 40e-6}},
	}
	want := map[string]string{
		"READ 8 MiB goodput / READ 1 MiB goodput (AF_XDP)":                                     "met",    // 0.96 ≥ 0.95
		"write_lat p50 / raw one-way time (RTT p50 / 2, ppoll) (AF_XDP)":                       "missed", // 30 / 10 = 3 > 1.5
		"WRITE 64 KiB goodput / raw payload rate, PMTU 1024 (AF_XDP)":                          "not measured",
		"write_lat p50 / raw RTT p50 (ppoll), as the issue words it (AF_XDP)":                  "",
		"write_lat p50, ib_write_lat through the verbs library / xroce write_lat (AF_XDP)":     "met", // 40 / 30 ≤ 1.5
		"64 B WRITE msg rate, ib_write_bw through the verbs library / xroce write_bw (AF_XDP)": "not measured",
	}
	seen := 0
	for _, q := range ratios() {
		if w, ok := want[q.name]; ok {
			seen++
			if q.verdict(r) != w {
				t.Errorf("%s: %q, want %q", q.name, q.verdict(r), w)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("%d of the %d ratios named here exist", seen, len(want))
	}
}

func TestReplaceBetween(t *testing.T) {
	s := replaceBetween("# T\n\nhand-written\n", "<!-- b -->", "<!-- e -->", "one\n")
	s = replaceBetween(s, "<!-- b -->", "<!-- e -->", "two\n")
	if want := "# T\n\nhand-written\n\n<!-- b -->\ntwo\n<!-- e -->\n"; s != want {
		t.Errorf("%q, want %q", s, want)
	}
}

func TestRawFrameLen(t *testing.T) {
	// Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 (+ RETH 16) + payload + ICRC 4.
	if n := rawFrameLen(64, true); n != 138 {
		t.Errorf("WRITE ONLY 64 B: %d bytes", n)
	}
	if n := rawFrameLen(1024, false); n != 1082 {
		t.Errorf("WRITE MIDDLE 1024 B: %d bytes", n)
	}
}

// TestDCQCNFigures: the settled rate is the median of the per-second lines from
// the third on, without the total; the counters are the client's.
func TestDCQCNFigures(t *testing.T) {
	out := pairOut{client: ` #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]
 65536      1029           63.53              63.53                0.001016
 65536      1516           94.74              94.74                0.001516
 65536      640            40.00              40.00                0.000640
 65536      480            30.00              30.00                0.000480
 65536      512            32.00              32.00                0.000512
 65536      8978           200.70             52.00                0.001496
 Counters (engine):
  completer_retry_err      3
  rp_cnp_handled           12500
  sent_pkts                574912
`}
	r, err := dcqcnFigures(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.fig[figSettled] != 32*(1<<20) || r.fig[figCNPs] != 12500 || r.fig[figGoBacks] != 3 {
		t.Fatalf("figures %v, want settled 32 MiB/s, 12500 CNPs, 3 go-backs", r.fig)
	}
	if _, err := dcqcnFigures(pairOut{client: " 65536      8978           200.70             52.00                0.001496\n"}); err == nil {
		t.Fatal("one line: no error")
	}
}

// TestPlanPairs: every raw reference runs right before the xroce row its ratio
// compares with it, each library row right after its native row, and every
// measurement appears once.
func TestPlanPairs(t *testing.T) {
	p := buildPlan(1, true, true)
	at := map[string]int{}     // the first run's place
	reps := map[string][]int{} // every run's place, by repetition
	for i, m := range p {
		if m.rep != len(reps[m.key]) {
			t.Errorf("%q at %d is repetition %d, after %d runs", m.key, i, m.rep, len(reps[m.key]))
		}
		reps[m.key] = append(reps[m.key], i)
		if m.rep == 0 {
			at[m.key] = i
		}
	}
	// The WRITE targets' pairs run pairReps times a pass, the reference right before
	// its row each time; nothing else repeats.
	targets := map[string]string{"raw pps 64": "xdp write 64", "raw pps 1024": "xdp write 65536",
		"raw pps 2048": "xdp write 65536 pmtu2048", "raw pps 4096": "xdp write 65536 pmtu4096"}
	for key, places := range reps {
		row, isRef := targets[key]
		want := 1
		if isRef || slices.Contains(slices.Collect(maps.Values(targets)), key) {
			want = pairReps
		}
		if len(places) != want {
			t.Errorf("%q runs %d times a pass, want %d", key, len(places), want)
		}
		for i := 1; isRef && i < len(places) && i < len(reps[row]); i++ {
			if reps[row][i] != places[i]+1 {
				t.Errorf("repetition %d: %q at %d, %q at %d: want the row right after its reference", i, key, places[i], row, reps[row][i])
			}
		}
	}
	for _, pair := range [][2]string{
		{"raw pps 64", "xdp write 64"},
		{"raw pps 1024", "xdp write 65536"},
		{"raw pps 2048", "xdp write 65536 pmtu2048"},
		{"raw pps 4096", "xdp write 65536 pmtu4096"},
		{"raw pps 64 " + placed, "raw pps 64"},
		{"raw pps 1024 " + placed, "raw pps 1024"},
		{"raw pps 2048 " + placed, "raw pps 2048"},
		{"raw pps 4096 " + placed, "raw pps 4096"},
		{"raw rtt spin", "xdp write_lat"},
		{"raw rtt ppoll " + oneCPU, "xdp write_lat " + oneCPU},
		{"xdp write 64", "lib write 64"},
		{"xdp write 65536", "lib write 65536"},
		{"xdp write_lat", "lib write_lat"},
	} {
		a, ok1 := at[pair[0]]
		b, ok2 := at[pair[1]]
		if !ok1 || !ok2 || b != a+1 {
			t.Errorf("%q at %d (%v), %q at %d (%v): want the second right after the first", pair[0], a, ok1, pair[1], b, ok2)
		}
	}
	if a, b := at["raw rtt ppoll"], at["xdp write_lat"]; b != a+2 {
		t.Errorf("raw rtt ppoll at %d, xdp write_lat at %d: want the busy-poll round trip between them only", a, b)
	}
}

// TestOnlyPrefixes: -only's empty elements (a trailing comma) select nothing.
func TestOnlyPrefixes(t *testing.T) {
	got := onlyPrefixes("xdp write 64, raw pps 64,,")
	if len(got) != 2 || got[0] != "xdp write 64" || got[1] != "raw pps 64" {
		t.Fatalf("onlyPrefixes = %q", got)
	}
	if got := onlyPrefixes(","); len(got) != 0 {
		t.Fatalf("onlyPrefixes(\",\") = %q, want none", got)
	}
}
