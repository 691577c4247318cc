package main

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRatioPairsPasses: a ratio is the median of its pairs' ratios; a pass that
// measured only one figure does not count, and the ratio of the medians is kept
// beside it.
func TestRatioPairsPasses(t *testing.T) {
	pass := func(p int, v float64) result {
		return result{fig: map[string]float64{figGoodput: v, figPayload: v}, at: sample{pass: p}}
	}
	r := results{
		// The host halves its speed in pass 2 and slows again in pass 3; xroce keeps
		// 0.9, 0.95 and 0.8 of the raw rate of its own pass. Pass 4 has no raw figure.
		"xdp write 65536": summarize([]result{pass(1, 900), pass(2, 475), pass(3, 240), pass(4, 1000)}, nil),
		"raw pps 1024":    summarize([]result{pass(1, 1000), pass(2, 500), pass(3, 300)}, nil),
	}
	q := ratio{num: figRef{"xdp write 65536", figGoodput}, den: figRef{"raw pps 1024", figPayload}, factor: 1, target: 0.9, atLeast: true}
	if got, want := q.paired(r), []float64{0.9, 0.95, 0.8}; !slices.Equal(got, want) {
		t.Errorf("paired %v, want %v", got, want)
	}
	if got := ratiosText(q.paired(r)); got != "0.90, 0.95, 0.80" {
		t.Errorf("ratiosText %q", got)
	}
	if v, ok := q.value(r); !ok || v != 0.9 {
		t.Errorf("value %v %v, want 0.9", v, ok)
	}
	// Medians: xroce (475+900)/2 = 687.5 over four passes, raw 500.
	if v, ok := q.ofMedians(r); !ok || v != 687.5/500 {
		t.Errorf("ofMedians %v %v, want %v", v, ok, 687.5/500)
	}
	if got := q.verdict(r); got != "met" {
		t.Errorf("verdict %q", got)
	}
	// A factor applies to each pass's ratio.
	q.factor = 2
	if got, want := q.paired(r), []float64{1.8, 1.9, 1.6}; !slices.Equal(got, want) {
		t.Errorf("paired with factor 2: %v, want %v", got, want)
	}
	// No common pass: the ratio of the medians.
	r["raw pps 1024"] = summarize([]result{pass(7, 500)}, nil)
	q.factor = 1
	if v, ok := q.value(r); !ok || v != 687.5/500 || len(q.paired(r)) != 0 {
		t.Errorf("without a common pass: %v %v, paired %v", v, ok, q.paired(r))
	}
	if got := ratiosText(q.paired(r)); got != na {
		t.Errorf("ratiosText of none %q", got)
	}
}

// TestCheckFlags: a run that would measure nothing is refused with the flag named.
func TestCheckFlags(t *testing.T) {
	if err := checkFlags(3, 1, defaultBudget); err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	if err := checkFlags(1, 0.1, time.Second); err != nil {
		t.Fatalf("a quick try refused: %v", err)
	}
	for _, c := range []struct {
		passes int
		scale  float64
		budget time.Duration
		want   string
	}{
		{0, 1, defaultBudget, "-passes 0: at least 1"},
		{-2, 1, defaultBudget, "-passes -2: at least 1"},
		{3, 0, defaultBudget, "-scale 0: a positive number"},
		{3, -1, defaultBudget, "-scale -1: a positive number"},
		{3, math.NaN(), defaultBudget, "-scale NaN: a positive number"},
		{3, math.Inf(1), defaultBudget, "-scale +Inf: a positive number"},
		{3, 1, 0, "-budget 0s: a positive duration (the default is 9m20s)"},
	} {
		err := checkFlags(c.passes, c.scale, c.budget)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("checkFlags(%d, %v, %v) = %v, want %q...", c.passes, c.scale, c.budget, err, c.want)
		}
	}
}

// TestBriefErr: a failed process's error keeps its first line and the last line of
// the process's output, where the cause is.
func TestBriefErr(t *testing.T) {
	for _, c := range []struct{ err, want string }{
		{"server x write_bw -d a: exited before \"Waiting for client\" (exit status 1):\nxroce write_bw: --tclass 999: the traffic class is 0..255\n",
			"server x write_bw -d a: exited before \"Waiting for client\" (exit status 1): xroce write_bw: --tclass 999: the traffic class is 0..255"},
		{"no \"ready\" within 5s:\nline one\n  line two  \n\n", "no \"ready\" within 5s: line two"},
		{"exited (exit status 1):\n", "exited (exit status 1):"},
		{"one line", "one line"},
	} {
		if got := briefErr(errors.New(c.err)); got != c.want {
			t.Errorf("briefErr(%q) = %q, want %q", c.err, got, c.want)
		}
	}
}

// TestPassesText: the report says how many passes ran, and how a budget cut them.
func TestPassesText(t *testing.T) {
	for _, c := range []struct {
		done int
		cut  bool
		want string
	}{
		{3, false, "3 passes"},
		{1, false, "1 pass"},
		{0, true, "part of one pass, cut short by the 5s budget"},
		{1, true, "1 pass and part of another, cut short by the 5s budget"},
		{2, true, "2 passes and part of another, cut short by the 5s budget"},
	} {
		if got := passesText(c.done, c.cut, 5*time.Second); got != c.want {
			t.Errorf("passesText(%d, %v) = %q, want %q", c.done, c.cut, got, c.want)
		}
	}
}

// TestLabelOf: a raw reference that -only left out still gets its label in the
// report, not its key.
func TestLabelOf(t *testing.T) {
	plan := []measurement{{key: "xdp write 64", label: "xroce xdp WRITE 64 B"}}
	if got := labelOf(plan, "xdp write 64"); got != "xroce xdp WRITE 64 B" {
		t.Errorf("labelOf in plan = %q", got)
	}
	if got := labelOf(plan, "raw pps 64"); !strings.HasPrefix(got, "raw one way, 138-byte frames") {
		t.Errorf("labelOf left out = %q", got)
	}
	if got := labelOf(plan, "nothing"); got != "nothing" {
		t.Errorf("labelOf unknown = %q", got)
	}
}

// TestSectionNotMeasured: the loss and DCQCN tables keep their notes for runs that
// measured them, and say "not measured" otherwise (-only).
func TestSectionNotMeasured(t *testing.T) {
	none := results{"raw pps 64": {passes: 1}}
	for name, tb := range map[string]table{"loss": lossTable(none, "m"), "dcqcn": dcqcnTable(none, "m")} {
		if len(tb.notes) != 1 || tb.notes[0] != notMeasured {
			t.Errorf("%s without its runs: notes %q", name, tb.notes)
		}
	}
	dcqcnOnly := results{dcqcnKey("software"): {passes: 1}}
	if tb := lossTable(dcqcnOnly, "m"); len(tb.notes) != 1 {
		t.Errorf("loss table with only DCQCN runs: notes %q", tb.notes)
	}
	if tb := dcqcnTable(dcqcnOnly, "m"); len(tb.notes) == 1 && tb.notes[0] == notMeasured {
		t.Errorf("DCQCN table with its run: %q", tb.notes)
	}
	if tb := lossTable(results{lossKey("write", 2): {passes: 1}}, "m"); len(tb.notes) < 2 {
		t.Errorf("loss table with a loss run: notes %q", tb.notes)
	}
}
