package main

import (
	"cmp"
	"fmt"
	"slices"
)

// figRef names one figure of one measurement.
type figRef struct{ key, fig string }

// ratio is a figure of xroce divided by a reference figure. A target of 0 means the
// ratio is for information.
type ratio struct {
	name     string
	num, den figRef
	factor   float64 // multiplies num/den (2 compares a half round trip with RTT/2)
	target   float64
	atLeast  bool   // met when the ratio ≥ target (else when ≤ target)
	profile  string // the measurement whose CPU profiles explain a miss
	judgedBy string // how the comparison is made, when not obvious
}

func ratios() []ratio {
	goodput := []ratio{
		{name: "WRITE 64 KiB goodput / raw payload rate, PMTU 1024 (AF_XDP)",
			num: figRef{"xdp write 65536", figGoodput}, den: figRef{"raw pps 1024", figPayload}, factor: 1,
			target: 0.9, atLeast: true, profile: "xdp write 65536"},
		{name: "WRITE 64 KiB goodput / raw payload rate, PMTU 2048 (AF_XDP)",
			num: figRef{"xdp write 65536 pmtu2048", figGoodput}, den: figRef{"raw pps 2048", figPayload}, factor: 1,
			target: 0.9, atLeast: true, profile: "xdp write 65536 pmtu2048"},
		{name: "WRITE 64 KiB goodput / raw payload rate, PMTU 4096 (AF_XDP, multi-buffer)",
			num: figRef{"xdp write 65536 pmtu4096", figGoodput}, den: figRef{"raw pps 4096", figPayload}, factor: 1,
			target: 0.9, atLeast: true, profile: "xdp write 65536 pmtu4096"},
	}
	return slices.Concat(goodput, placedRatios(), []ratio{
		{name: "WRITE 64 KiB goodput, PMTU 4096 / PMTU 1024 (AF_XDP)",
			num: figRef{"xdp write 65536 pmtu4096", figGoodput}, den: figRef{"xdp write 65536", figGoodput}, factor: 1,
			target: 1.3, atLeast: true},
		{name: fmt.Sprintf("64 B WRITE msg rate / raw pps of the same %d-byte frames (AF_XDP)", rawFrameLen(latSize, true)),
			num: figRef{"xdp write 64", figMsgRate}, den: figRef{"raw pps 64", figPPS}, factor: 1,
			target: 0.8, atLeast: true, profile: "xdp write 64"},
		{name: fmt.Sprintf("64 B WRITE msg rate / raw pps of the same %d-byte frames to a receiver that places the payloads (AF_XDP)", rawFrameLen(latSize, true)),
			num: figRef{"xdp write 64", figMsgRate}, den: figRef{"raw pps 64 " + placed, figPPS}, factor: 1},
		{name: "64 B WRITE msg rate / raw pps of PMTU 1024 frames (AF_XDP)",
			num: figRef{"xdp write 64", figMsgRate}, den: figRef{"raw pps 1024", figPPS}, factor: 1},
		{name: "write_lat p50 / raw one-way time (RTT p50 / 2, ppoll) (AF_XDP)",
			num: figRef{"xdp write_lat", figP50}, den: figRef{"raw rtt ppoll", figP50}, factor: 2,
			target: 1.5, profile: "xdp write_lat",
			judgedBy: "write_lat reports half a round trip (perftest's convention), so it is compared with half the raw RTT"},
		{name: "write_lat p50 / raw one-way time (RTT p50 / 2, ppoll), each side confined to one CPU (AF_XDP)",
			num: figRef{"xdp write_lat " + oneCPU, figP50}, den: figRef{"raw rtt ppoll " + oneCPU, figP50}, factor: 2,
			target: 2, profile: "xdp write_lat " + oneCPU},
		{name: "write_lat p50 / raw RTT p50 (ppoll), as the issue words it (AF_XDP)",
			num: figRef{"xdp write_lat", figP50}, den: figRef{"raw rtt ppoll", figP50}, factor: 1},
		{name: "write_lat p50 / raw one-way time (RTT p50 / 2, busy poll) (AF_XDP)",
			num: figRef{"xdp write_lat", figP50}, den: figRef{"raw rtt spin", figP50}, factor: 2},
		{name: "read_lat p50 / raw RTT p50 (ppoll) (AF_XDP; read_lat is a round trip)",
			num: figRef{"xdp read_lat", figP50}, den: figRef{"raw rtt ppoll", figP50}, factor: 1},
		{name: "WRITE 64 KiB goodput, ib_write_bw through the verbs library / xroce write_bw (AF_XDP)",
			num: figRef{"lib write 65536", figGoodput}, den: figRef{"xdp write 65536", figGoodput}, factor: 1,
			target: 0.8, atLeast: true},
		{name: "64 B WRITE msg rate, ib_write_bw through the verbs library / xroce write_bw (AF_XDP)",
			num: figRef{"lib write 64", figMsgRate}, den: figRef{"xdp write 64", figMsgRate}, factor: 1,
			target: 0.8, atLeast: true},
		{name: "write_lat p50, ib_write_lat through the verbs library / xroce write_lat (AF_XDP)",
			num: figRef{"lib write_lat", figP50}, den: figRef{"xdp write_lat", figP50}, factor: 1,
			target: 1.5},
		{name: "READ 8 MiB goodput / READ 1 MiB goodput (AF_XDP)",
			num: figRef{"xdp read 8388608", figGoodput}, den: figRef{"xdp read 1048576", figGoodput}, factor: 1,
			target: 0.95, atLeast: true, profile: "xdp read 8388608"},
		{name: "READ 8 MiB goodput / READ 1 MiB goodput (UDP link)",
			num: figRef{"udp read 8388608", figGoodput}, den: figRef{"udp read 1048576", figGoodput}, factor: 1},
		{name: "WRITE 64 KiB goodput over the UDP link / raw AF_XDP payload rate, PMTU 1024",
			num: figRef{"udp write 65536", figGoodput}, den: figRef{"raw pps 1024", figPayload}, factor: 1},
		{name: "WRITE 64 KiB goodput (AF_XDP) / TCP stream with 64 KiB writes",
			num: figRef{"xdp write 65536", figGoodput}, den: figRef{"tcp 65536", figGoodput}, factor: 1},
		{name: "WRITE 64 KiB goodput (UDP link) / TCP stream with 64 KiB writes",
			num: figRef{"udp write 65536", figGoodput}, den: figRef{"tcp 65536", figGoodput}, factor: 1},
	})
}

// placedRatios compare WRITE 64 KiB goodput with the raw payload rate to a receiver
// that copies every payload into a buffer, as xroce's responder does (docs/bench.md,
// "A receiver that places its data"), for information.
func placedRatios() []ratio {
	var q []ratio
	for _, pmtu := range []int{1024, 2048, 4096} {
		q = append(q, ratio{name: fmt.Sprintf("WRITE 64 KiB goodput / raw payload rate to a receiver that places the payloads, PMTU %d (AF_XDP)", pmtu),
			num: figRef{bwKey("xdp", "write", 64<<10, pmtu), figGoodput}, den: figRef{fmt.Sprintf("raw pps %d %s", pmtu, placed), figPayload}, factor: 1})
	}
	return q
}

// value is the median of the ratio's values in the runs that measured both of its
// figures in the same pass and repetition (paired): the plan runs the two figures
// of a ratio seconds apart, so such a pair's ratio holds while the shared host's
// speed moves between passes, which the ratio of two medians taken from different
// passes does not. With no such pair it is the ratio of the medians (ofMedians). ok
// is false when a figure is missing.
func (q ratio) value(r results) (float64, bool) {
	if vs := q.paired(r); len(vs) > 0 {
		return median(vs), true
	}
	return q.ofMedians(r)
}

// paired returns the ratio of each pass and repetition that measured both figures,
// in pass order, then repetition order.
func (q ratio) paired(r results) []float64 {
	num, den := r[q.num.key].bySample, r[q.den.key].bySample
	at := make([]sample, 0, len(num))
	for s := range num {
		at = append(at, s)
	}
	slices.SortFunc(at, func(a, b sample) int { return cmp.Or(cmp.Compare(a.pass, b.pass), cmp.Compare(a.rep, b.rep)) })
	var vs []float64
	for _, s := range at {
		n, d := num[s][q.num.fig], den[s][q.den.fig]
		if n > 0 && d > 0 {
			vs = append(vs, q.factor*n/d)
		}
	}
	return vs
}

// ofMedians is the ratio of the two figures' medians over the passes; ok is false
// when a figure is missing.
func (q ratio) ofMedians(r results) (float64, bool) {
	n, ok1 := r.get(q.num.key, q.num.fig)
	d, ok2 := r.get(q.den.key, q.den.fig)
	if !ok1 || !ok2 {
		return 0, false
	}
	return q.factor * n / d, true
}

// verdict is "met", "missed", "not measured", or "" for an information ratio.
func (q ratio) verdict(r results) string {
	if q.target == 0 {
		return ""
	}
	v, ok := q.value(r)
	switch {
	case !ok:
		return "not measured"
	case q.atLeast && v >= q.target, !q.atLeast && v <= q.target:
		return "met"
	}
	return "missed"
}

func (q ratio) targetText() string {
	if q.target == 0 {
		return "(information)"
	}
	if q.atLeast {
		return fmt.Sprintf("≥ %.2f", q.target)
	}
	return fmt.Sprintf("≤ %.2f", q.target)
}
