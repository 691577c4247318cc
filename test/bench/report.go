package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// table is one table of the report, rendered as Markdown (readable as text too).
type table struct {
	title  string
	header []string
	rows   [][]string
	notes  []string
}

func (t table) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s**\n\n", t.title)
	fmt.Fprintf(&b, "| %s |\n|%s\n", strings.Join(t.header, " | "), strings.Repeat(" --- |", len(t.header)))
	for _, r := range t.rows {
		fmt.Fprintf(&b, "| %s |\n", strings.Join(r, " | "))
	}
	for _, n := range t.notes {
		fmt.Fprintf(&b, "\n%s\n", n)
	}
	return b.String()
}

const na = "n/a"

func mibs(bytesPerSec float64) string { return fmt.Sprintf("%.1f", bytesPerSec/(1<<20)) }
func kpps(perSec float64) string      { return fmt.Sprintf("%.0f k", perSec/1e3) }
func usecs(sec float64) string        { return fmt.Sprintf("%.1f µs", sec*1e6) }
func secs(d time.Duration) string     { return fmt.Sprintf("%.2f", d.Seconds()) }

// fmtFig formats one figure of a measurement, or n/a.
func (r results) fmtFig(key, fig string, f func(float64) string) string {
	v, ok := r.get(key, fig)
	if !ok {
		return na
	}
	return f(v)
}

// tables builds the report's tables from the medians.
func tables(r results, plan []measurement, passes int) []table {
	med := fmt.Sprintf("median of %d", passes)
	raw := table{title: "Raw AF_XDP ceiling: no engine, no protocol work (" + med + ")",
		header: []string{"measurement", "result"}}
	for _, k := range []string{"raw pps 64", "raw pps 1024", "raw pps 2048", "raw pps 4096",
		"raw pps 64 " + placed, "raw pps 1024 " + placed, "raw pps 2048 " + placed, "raw pps 4096 " + placed} {
		res := na // not measured (make bench -only)
		if _, ok := r.get(k, figPPS); ok {
			res = fmt.Sprintf("%sframes/s, %s MiB/s of payload (sender: %sframes/s)", r.fmtFig(k, figPPS, kpps), r.fmtFig(k, figPayload, mibs), r.fmtFig(k, figSentPPS, kpps))
		}
		raw.rows = append(raw.rows, []string{labelOf(plan, k), res})
	}
	for _, k := range []string{"raw pps 1024", "raw pps 4096"} {
		if s := r[k]; s.note != "" {
			raw.notes = append(raw.notes, s.note)
			break
		}
	}
	raw.notes = append(raw.notes, fmt.Sprintf("The four references of the WRITE targets (138-byte and PMTU 1024, 2048 and 4096 frames to the receiver that touches nothing) and their xroce rows run %d times a pass, each time as a pair (docs/bench.md, \"Method\"): their figures are the median of all those runs.", pairReps))
	raw.notes = append(raw.notes, "The receiver counts the frames and touches none of their bytes; where it \"places the payloads\" it also copies each one into a 64 KiB buffer, as a WRITE's responder places it in its MR, and the sender's kernel path costs more (docs/bench.md, \"A receiver that places its data\").")
	for _, k := range []string{"raw rtt ppoll", "raw rtt spin", "raw rtt ppoll " + oneCPU} {
		raw.rows = append(raw.rows, []string{labelOf(plan, k), fmt.Sprintf("p50 %s, p99 %s", r.fmtFig(k, figP50, usecs), r.fmtFig(k, figP99, usecs))})
	}

	good := table{title: fmt.Sprintf("Goodput against message size, MiB/s (PMTU %d; %s)", sweepPMTU, med),
		header: []string{"size", "WRITE xdp", "READ xdp", "SEND xdp", "WRITE udp", "READ udp", "SEND udp", "TCP"}}
	for _, size := range sizes {
		row := []string{sizeName(size)}
		for _, link := range []string{"xdp", "udp"} {
			for _, op := range []string{"write", "read", "send"} {
				row = append(row, r.fmtFig(bwKey(link, op, size, sweepPMTU), figGoodput, mibs))
			}
		}
		good.rows = append(good.rows, append(row, r.fmtFig(fmt.Sprintf("tcp %d", size), figGoodput, mibs)))
	}
	good.notes = append(good.notes, fmt.Sprintf("Raw AF_XDP payload rate: %s MiB/s at PMTU 1024, %s MiB/s at PMTU 2048, %s MiB/s at PMTU 4096. xroce WRITE 64 KiB over AF_XDP: %s MiB/s at PMTU 2048, %s MiB/s at PMTU 4096. xdp = AF_XDP link, udp = kernel UDP link (`--link udp`); TCP = one Go TCP stream, one Write per message.",
		r.fmtFig("raw pps 1024", figPayload, mibs), r.fmtFig("raw pps 2048", figPayload, mibs), r.fmtFig("raw pps 4096", figPayload, mibs),
		r.fmtFig(bwKey("xdp", "write", 64<<10, 2048), figGoodput, mibs), r.fmtFig(bwKey("xdp", "write", 64<<10, 4096), figGoodput, mibs)))

	lat := table{title: fmt.Sprintf("64 B message rate and latency (%s)", med),
		header: []string{"link", "WRITE msg/s", "READ msg/s", "SEND msg/s", "write_lat p50", "write_lat p99", "read_lat p50", "read_lat p99"}}
	for _, link := range []string{"xdp", "udp"} {
		row := []string{link}
		for _, op := range []string{"write", "read", "send"} {
			row = append(row, r.fmtFig(bwKey(link, op, 64, sweepPMTU), figMsgRate, kpps))
		}
		for _, t := range []string{"write_lat", "read_lat"} {
			row = append(row, r.fmtFig(link+" "+t, figP50, usecs), r.fmtFig(link+" "+t, figP99, usecs))
		}
		lat.rows = append(lat.rows, row)
	}
	lat.rows = append(lat.rows, []string{"xdp, one CPU per side", "", "", "",
		r.fmtFig("xdp write_lat "+oneCPU, figP50, usecs), r.fmtFig("xdp write_lat "+oneCPU, figP99, usecs), "", ""})
	lat.rows = append(lat.rows, []string{"TCP", r.fmtFig("tcp 64", figMsgRate, kpps) + " (64 B writes)", "", "", "", "", "", ""})
	lat.notes = append(lat.notes, "write_lat is half a WRITE round trip (perftest's convention); read_lat is a whole READ round trip.")

	lib := libTable(r, med)

	rat := table{title: "Ratios xroce / reference, and the targets", header: []string{"ratio", "value", "each pair", "of the medians", "target", "verdict"}}
	for _, q := range ratios() {
		rat.rows = append(rat.rows, []string{q.name, ratioText(q.value(r)), ratiosText(q.paired(r)), ratioText(q.ofMedians(r)), q.targetText(), q.verdict(r)})
		if q.judgedBy != "" {
			rat.notes = append(rat.notes, "The write_lat target: "+q.judgedBy+".")
		}
	}

	rat.notes = append(rat.notes, fmt.Sprintf("A ratio's value is the median of its pairs: the two figures measured seconds apart in one pass, as the plan orders them (the four raw references of the WRITE targets and their xroce rows run %d times a pass, the rest once). \"Of the medians\" divides the two figures' medians, which may come from different passes.", pairReps))

	cpu := table{title: "CPU per run: user and system seconds of each side's process (" + med + ")",
		header: []string{"measurement", "runs ok / tried", "A user", "A sys", "B user", "B sys"}}
	for _, m := range plan {
		s := r[m.key]
		row := []string{m.label, fmt.Sprintf("%d/%d", s.passes, s.passes+s.failed)}
		if s.passes == 0 {
			row = append(row, na, na, na, na)
		} else {
			row = append(row, secs(s.cpu[0].User), secs(s.cpu[0].Sys), secs(s.cpu[1].User), secs(s.cpu[1].Sys))
		}
		cpu.rows = append(cpu.rows, row)
	}
	cpu.notes = append(cpu.notes, "A is the client / sender / pinger (namespace A), B the server / receiver / ponger (namespace B). Each is one process from exec to exit (xroce's includes opening the link and the out-of-band exchange); the kernel's softirq work on veth is charged to whichever process it interrupts. For perftest through the library, a side is the application and its namespace's daemon (which runs the engine) together, each from exec to exit.")
	return []table{raw, good, lat, lib, handoffTable(r, plan, med), lossTable(r, med), dcqcnTable(r, med), rat, cpu}
}

// libTable puts perftest through the verbs library beside xroce's own tools.
func libTable(r results, med string) table {
	t := table{title: fmt.Sprintf("Debian's perftest through the verbs library beside xroce's own tools (AF_XDP, PMTU %d; %s)", sweepPMTU, med),
		header: []string{"figure", "xroce tool", "perftest through the library", "library / xroce"}}
	for _, row := range []struct {
		name     string
		lib, own figRef
		f        func(float64) string
	}{
		{"WRITE 64 KiB goodput, MiB/s (ib_write_bw / write_bw)", figRef{"lib write 65536", figGoodput}, figRef{"xdp write 65536", figGoodput}, mibs},
		{"64 B WRITE message rate, msg/s (ib_write_bw / write_bw)", figRef{"lib write 64", figMsgRate}, figRef{"xdp write 64", figMsgRate}, kpps},
		{"write_lat 64 B p50 (ib_write_lat / write_lat)", figRef{"lib write_lat", figP50}, figRef{"xdp write_lat", figP50}, usecs},
		{"write_lat 64 B p99 (ib_write_lat / write_lat)", figRef{"lib write_lat", figP99}, figRef{"xdp write_lat", figP99}, usecs},
	} {
		q := ratio{num: row.lib, den: row.own, factor: 1}
		v, ok := q.value(r)
		s := na
		if ok {
			s = fmt.Sprintf("%.2f", v)
		}
		t.rows = append(t.rows, []string{row.name, r.fmtFig(row.own.key, row.own.fig, row.f), r.fmtFig(row.lib.key, row.lib.fig, row.f), s})
	}
	t.notes = append(t.notes, fmt.Sprintf("`xroce run -- ib_write_bw` and `ib_write_lat` (Debian's perftest, unmodified, with the verbs library preloaded) against an `xroce daemon` in each namespace on the same veth, each row run right after its native one: `-x 1 -F -s SIZE -n N -m %d`, the native row's size, iterations and path MTU; perftest's defaults otherwise (TX depth 128, no inline data on a device it does not know). The daemons start before and stop after each measurement (a daemon owns the interface's XDP program).", sweepPMTU))
	return t
}

// handoffTable is what handing a CPU from one busy thread to another costs here.
func handoffTable(r results, plan []measurement, med string) table {
	t := table{title: "Hand-offs on one CPU: sched_yield(2) on CPU 0 for 1 s (" + med + ")",
		header: []string{"measurement", "per yield"}}
	for _, k := range []string{"handoff 1x1", "handoff 1x2", "handoff 2x1"} {
		t.rows = append(t.rows, []string{labelOf(plan, k), r.fmtFig(k, figHandoff, usecs)})
	}
	t.notes = append(t.notes, "With two threads runnable on the CPU each yield hands it to the other: the time per yield is a hand-off (between two threads of one process, or two processes), against the bare system call alone. xroce's own tools run the application and the engine as goroutines of one thread; through the verbs library the application and its daemon are two processes, and where busy threads outnumber CPUs (perftest's two applications and two daemons on this 2-CPU VM) an operation may wait for such a hand-off at each crossing: the application's post to its daemon and the daemon's completion or write back, on each side (docs/verbs-library.md).")
	return t
}

// labelOf returns the label of the measurement key, from plan or, for one -only
// left out, from the whole plan; the key itself if neither has it.
func labelOf(plan []measurement, key string) string {
	for _, p := range [][]measurement{plan, buildPlan(1, true, true)} {
		if i := slices.IndexFunc(p, func(m measurement) bool { return m.key == key }); i >= 0 {
			return p[i].label
		}
	}
	return key
}

// failures lists the measurements that failed in some pass, with the last error in
// brief (briefErr).
func failures(r results, plan []measurement) []string {
	var out []string
	for _, m := range plan {
		if s := r[m.key]; s.err != nil {
			out = append(out, fmt.Sprintf("%s: %d of %d runs failed (a failed run is tried once more); the last error: %s", m.label, s.failed, s.passes+s.failed, briefErr(s.err)))
		}
	}
	return out
}

// ratioText prints a ratio to two places, or na.
func ratioText(v float64, ok bool) string {
	if !ok {
		return na
	}
	return fmt.Sprintf("%.2f", v)
}

// ratiosText prints each pair's ratio, comma-separated, or na for none.
func ratiosText(vs []float64) string {
	if len(vs) == 0 {
		return na
	}
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = ratioText(v, true)
	}
	return strings.Join(parts, ", ")
}

// briefErr is an error on one line: its first line (what failed: "server … exited
// before …") and, when the error goes on with a process's output, that output's last
// non-empty line, which is where xroce and the helpers say why.
func briefErr(err error) string {
	first, rest, _ := strings.Cut(err.Error(), "\n")
	lines := strings.Split(strings.TrimSpace(rest), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if last == "" {
		return first
	}
	return first + " " + last
}
