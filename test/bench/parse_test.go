package main

import (
	"math"
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
	}
	want := map[string]string{
		"READ 8 MiB goodput / READ 1 MiB goodput (AF_XDP)":                    "met",    // 0.96 ≥ 0.95
		"write_lat p50 / raw one-way time (RTT p50 / 2, ppoll) (AF_XDP)":      "missed", // 30 / 10 = 3 > 1.5
		"WRITE 64 KiB goodput / raw payload rate, PMTU 1024 (AF_XDP)":         "not measured",
		"write_lat p50 / raw RTT p50 (ppoll), as the issue words it (AF_XDP)": "",
	}
	for _, q := range ratios() {
		if w, ok := want[q.name]; ok && q.verdict(r) != w {
			t.Errorf("%s: %q, want %q", q.name, q.verdict(r), w)
		}
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
