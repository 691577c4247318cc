package main

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The DCQCN rows of the loss section (issue 18): xroce write_bw --cc dcqcn through
// the same bridge, whose nftables forward chain sets CE on the ECN-capable RoCE
// frames towards B above dcqcnMarkMiBs (`limit rate over`, a switch marking as its
// queue builds; this kernel has no RED or CoDel to mark from a queue), nothing
// dropped. nft's byte limit holds a whole second of its rate in its bucket
// (net/netfilter/nft_limit.c: tokens_max = unit·(rate + burst)/rate), so marks start
// only after a second's worth beyond the rate: the row's rate is the median of the
// per-second lines from the third second on.

const (
	dcqcnMarkMiBs = 30 // the mark rate, MiB/s: a tenth or less of what the engine sends here
	dcqcnSeconds  = 6  // write_bw -D
	dcqcnSize     = 65536
)

// dcqcnSets are the parameter sets measured: --dcqcn's value by row name.
var dcqcnSets = []struct{ name, flag string }{
	{"software", ""}, // transport.SoftwareDCQCN, --cc dcqcn's default
	{"mlx5", "mlx5"}, // mlx5's defaults
}

func dcqcnKey(set string) string { return "loss dcqcn " + set }

// Figures of the DCQCN rows.
const (
	figSettled = "settled" // bytes/s: the median per-second rate from the third second on
	figCNPs    = "cnps"    // CNPs the sender handled (rp_cnp_handled)
	figGoBacks = "gobacks" // the sender's go-backs (completer_retry_err): frames lost
)

func dcqcnPlan() []measurement {
	var p []measurement
	for _, s := range dcqcnSets {
		label := fmt.Sprintf("xroce xdp WRITE %d B -D %d --cc dcqcn %s through a bridge marking CE above %d MiB/s", dcqcnSize, dcqcnSeconds, s.name, dcqcnMarkMiBs)
		p = append(p, measurement{key: dcqcnKey(s.name), label: label, run: func(ctx context.Context, b *bench, pass int) (result, error) {
			if err := b.setMarks(); err != nil {
				return result{}, err
			}
			args := []string{"write_bw", "--link", "xdp", "-s", fmt.Sprint(dcqcnSize), "-D", fmt.Sprint(dcqcnSeconds), "-m", fmt.Sprint(sweepPMTU), "--cc", "dcqcn", "--counters"}
			if s.flag != "" {
				args = append(args, "--dcqcn", s.flag)
			}
			out, err := b.xroceOn(ctx, b.lossNet, dcqcnKey(s.name), pass, args, false)
			if err != nil {
				return result{}, err
			}
			return dcqcnFigures(out)
		}})
	}
	return p
}

// setMarks makes the bridge mark CE above dcqcnMarkMiBs towards B, dropping nothing.
func (b *bench) setMarks() error {
	if err := b.setFault(0, ""); err != nil {
		return err
	}
	c := []string{"nft", "add", "rule", "bridge", "chaos", "fw", "ip", "daddr", b.lossNet.IPB.String(), "udp", "dport", "4791",
		"ip", "ecn", "ect0", "limit", "rate", "over", fmt.Sprint(dcqcnMarkMiBs), "mbytes/second", "burst", "65536", "bytes", "ip", "ecn", "set", "ce"}
	if out, err := exec.Command("ip", append([]string{"netns", "exec", b.lossNet.NsBr}, c...)...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v\n%s", strings.Join(c, " "), err, out)
	}
	return nil
}

// counterValue is one line of --counters: "  name   value".
var counterValue = regexp.MustCompile(`(?m)^  (\w+)\s+(\d+)$`)

// dcqcnFigures reads the client's per-second lines and counters.
func dcqcnFigures(out pairOut) (result, error) {
	lines := bwLine.FindAllStringSubmatch(out.client, -1)
	if len(lines) < 4 {
		return result{}, fmt.Errorf("want a line a second for %d s and the total, got %d lines:\n%s", dcqcnSeconds, len(lines), out.client)
	}
	var per []float64
	for _, l := range lines[2 : len(lines)-1] { // the seconds from the third on; the last line is the total
		v, err := strconv.ParseFloat(l[4], 64)
		if err != nil {
			return result{}, err
		}
		per = append(per, v*(1<<20))
	}
	slices.Sort(per)
	fig := map[string]float64{figSettled: per[(len(per)-1)/2], figCNPs: 0, figGoBacks: 0}
	for _, m := range counterValue.FindAllStringSubmatch(out.client, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		switch m[1] {
		case "rp_cnp_handled":
			fig[figCNPs] += v
		case "completer_retry_err":
			fig[figGoBacks] += v
		}
	}
	return result{fig: fig, cpu: out.cpu}, nil
}

// dcqcnTable is the DCQCN rows' table: the rate the sender settled at beside the
// mark rate, the CNPs it handled and the frames it sent again.
func dcqcnTable(r results, med string) table {
	t := table{title: fmt.Sprintf("DCQCN through a bridge that marks CE above %d MiB/s (WRITE %d B, -D %d, AF_XDP, PMTU %d; %s)", dcqcnMarkMiBs, dcqcnSize, dcqcnSeconds, sweepPMTU, med),
		header: []string{"--dcqcn", "rate from the third second, MiB/s", "share of the mark rate", "CNPs handled", "go-backs"}}
	for _, s := range dcqcnSets {
		sum, ok := r[dcqcnKey(s.name)]
		if !ok || sum.passes == 0 {
			t.rows = append(t.rows, []string{s.name, na, na, na, na})
			continue
		}
		v := sum.fig[figSettled]
		t.rows = append(t.rows, []string{s.name, mibs(v), fmt.Sprintf("%.2f", v/(dcqcnMarkMiBs*(1<<20))),
			fmt.Sprintf("%.0f", sum.fig[figCNPs]), fmt.Sprintf("%.0f", sum.fig[figGoBacks])})
	}
	if !r.anyPrefix(dcqcnKey("")) {
		t.notes = append(t.notes, notMeasured)
		return t
	}
	t.notes = append(t.notes, "The bridge's nftables forward chain: `ip daddr B udp dport 4791 ip ecn ect0 limit rate over 30 mbytes/second burst 65536 bytes ip ecn set ce`; nothing is dropped, so go-backs stay 0. nft's byte limit starts marking only after a second's worth of traffic beyond its rate (its bucket holds rate + burst), so the rate is the median of the per-second lines from the third second. Issue 18's target: the sender settles near the mark rate with no drops. `software` is transport.SoftwareDCQCN, the tools' default with --cc dcqcn (docs/congestion.md); `mlx5` is `--dcqcn mlx5`, mlx5's defaults, made for a NIC whose CNPs come microseconds apart.")
	return t
}
