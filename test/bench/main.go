// Command bench is `make bench`. On a veth pair between two network namespaces it
// creates (and removes on exit, on failure and on Ctrl-C), it measures in one run:
//
//   - the raw AF_XDP ceiling: frames/s one way with no protocol work, for the frame of
//     a 64 B RDMA WRITE and the frames of path MTU 1024, 2048 and 4096 (multi-buffer
//     AF_XDP: two chunks a frame), and the ping-pong round trip of one frame through
//     xdp.Link;
//   - xroce engine to engine over AF_XDP: WRITE, READ and SEND goodput from 64 B to
//     8 MiB, WRITE 64 KiB at path MTU 2048 and 4096, the 64 B message rates,
//     write_lat and read_lat p50 and p99;
//   - the same over the kernel UDP link (--link udp);
//   - Debian's unmodified ib_write_bw (64 B, 64 KiB) and ib_write_lat through the
//     verbs library (`xroce run`, an `xroce daemon` in each namespace for the
//     measurement), each right after the AF_XDP row it is compared with;
//   - a TCP stream over the same veth.
//
// Every side is its own process under `ip netns exec` (bin/xroce, perftest, or this
// program re-executed as one of its raw-* and tcp-* helpers), so the user and system
// CPU time of each side come from its rusage (plus its daemon's for perftest). Each
// figure is the median of three passes. It prints the tables, the ratios xroce /
// reference (the raw ceiling, the native tools) with the targets met or missed,
// writes the goodput plot (docs/bench.png) and the results part of docs/bench.md;
// with -profile it keeps every xroce process's CPU profile and writes `go tool pprof
// -top` of the measurements behind missed targets into docs/bench.md. Needs root.
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/xroce/xroce/test/testnet"
)

// bench is one run of the whole plan.
type bench struct {
	net        *testnet.Net
	lossNet    *testnet.Net // the bridged network of the loss section (loss.go)
	xroceBin   string       // absolute path of the xroce binary
	self       string       // this program, for its helpers
	goBin      string
	profileDir string // empty: no profiles
	profiles   map[string][]profileFile
	plan       []measurement
}

var helpers = map[string]func([]string) error{
	"raw-tx": rawTx, "raw-rx": rawRx, "raw-ping": rawPing, "raw-pong": rawPong, "tcp-tx": tcpTx, "tcp-rx": tcpRx,
	"yield": yieldHelper,
}

func main() {
	if len(os.Args) > 1 {
		if h, ok := helpers[os.Args[1]]; ok {
			if err := h(os.Args[2:]); err != nil {
				fmt.Fprintf(os.Stderr, "bench %s: %v\n", os.Args[1], err)
				os.Exit(1)
			}
			return
		}
	}
	os.Exit(run())
}

func run() int {
	xroceBin := flag.String("xroce", "bin/xroce", "the xroce binary to measure")
	out := flag.String("out", "docs", "directory for bench.png and bench.md (empty: write neither)")
	profile := flag.String("profile", "", "keep a CPU profile of every xroce process in this directory, and write the top entries behind missed targets to bench.md")
	passes := flag.Int("passes", 3, "passes over every measurement; each figure is the median over them")
	budget := flag.Duration("budget", defaultBudget, "start no pass that would end after this, and kill everything when it is up")
	scale := flag.Float64("scale", 1, "multiply every iteration count and duration by this (0.1 for a quick try)")
	goBin := flag.String("go", "go", "the go command, for go tool pprof")
	only := flag.String("only", "", "run only the measurements whose key starts with this, or with one of these, comma-separated (\"loss\": the loss section, \"xdp write\": every WRITE over AF_XDP)")
	flag.Parse()
	if err := checkFlags(*passes, *scale, *budget); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 2
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "bench needs root: it creates network namespaces and attaches XDP programs (sudo make bench)")
		return 1
	}
	b := &bench{goBin: *goBin, profiles: map[string][]profileFile{}}
	var err error
	if b.xroceBin, err = filepath.Abs(*xroceBin); err == nil {
		err = checkXroce(b.xroceBin)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: the xroce binary: %v (make bin/xroce)\n", err)
		return 1
	}
	if *profile != "" {
		if _, err := exec.LookPath(*goBin); err != nil {
			fmt.Fprintf(os.Stderr, "bench: -profile reads the profiles with `%s tool pprof`: %v (give -go the go command's path)\n", *goBin, err)
			return 1
		}
	}
	libNote := libMissing(b.xroceBin)
	if libNote != "" {
		fmt.Fprintf(os.Stderr, "== the rows of perftest through the verbs library are left out: %s\n", libNote)
	}
	lossNote := lossMissing()
	if lossNote != "" {
		fmt.Fprintf(os.Stderr, "== the loss section is left out: %s\n", lossNote)
	}
	b.plan = buildPlan(*scale, libNote == "", lossNote == "")
	if *only != "" {
		all := b.plan
		prefixes := onlyPrefixes(*only)
		b.plan = slices.DeleteFunc(slices.Clone(all), func(m measurement) bool {
			return !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(m.key, p) })
		})
		if len(b.plan) == 0 {
			fmt.Fprintf(os.Stderr, "bench: -only %q: no measurement's key starts with it; keys start with %s (lower case, e.g. \"xdp write 65536 pmtu2048\")\n", *only, strings.Join(keyStarts(all), ", "))
			return 1
		}
	}
	if b.self, err = os.Executable(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	if *profile != "" {
		if b.profileDir, err = filepath.Abs(*profile); err == nil {
			err = os.MkdirAll(b.profileDir, 0o755)
		}
		if err == nil {
			err = clearProfiles(b.profileDir)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: -profile: %v\n", err)
			return 1
		}
	}

	began := time.Now()
	deadline := began.Add(*budget)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var interrupted atomic.Bool
	sigs := make(chan os.Signal, 1)
	// SIGHUP (the terminal went) and SIGPIPE (stderr's reader went, as with
	// "make bench | head") end the run as ^C does, so that the namespaces are removed:
	// Go's default for them is to exit at once.
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	defer signal.Stop(sigs)
	go func() {
		if _, ok := <-sigs; ok {
			interrupted.Store(true)
			cancel()
		}
	}()

	n, remove, err := testnet.Create(testnet.Options{MTU: netdevMTU})
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	defer remove()
	b.net = n
	fmt.Fprintf(os.Stderr, "== namespaces %s and %s, veth %s <-> %s, MTU %d; %d measurements a pass, %d passes\n",
		n.NsA, n.NsB, n.IfA, n.IfB, netdevMTU, len(b.plan), *passes)
	if slices.ContainsFunc(b.plan, func(m measurement) bool { return strings.HasPrefix(m.key, "loss ") }) {
		ln, removeLoss, err := newLossNet()
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: the loss section's network: %v\n", err)
			return 1
		}
		defer removeLoss()
		b.lossNet = ln
		fmt.Fprintf(os.Stderr, "== loss section: namespaces %s and %s through a bridge in %s\n", ln.NsA, ln.NsB, ln.NsBr)
	}

	all := map[string][]result{}
	errs := map[string][]error{}
	done := 0
	for pass := 1; pass <= *passes && ctx.Err() == nil; pass++ {
		if pass > 1 {
			per := time.Since(began) / time.Duration(pass-1)
			if time.Now().Add(per + per/5).After(deadline) {
				fmt.Fprintf(os.Stderr, "== stopping after %d passes: one more (about %v) would end past the %v budget\n", pass-1, per.Round(time.Second), *budget)
				break
			}
		}
		for i, m := range b.plan {
			if ctx.Err() != nil {
				break
			}
			// A failed run is reported and tried once more.
			for try := 1; try <= 2 && ctx.Err() == nil; try++ {
				t0 := time.Now()
				r, err := m.run(ctx, b, pass)
				took := time.Since(t0).Seconds()
				if ctx.Err() != nil {
					break
				}
				if err != nil {
					errs[m.key] = append(errs[m.key], err)
					fmt.Fprintf(os.Stderr, "[pass %d/%d %2d/%d] %s%s: FAILED%s (%.1f s): %s\n", pass, *passes, i+1, len(b.plan), m.label, again(m), retried(try), took, briefErr(err))
					time.Sleep(500 * time.Millisecond)
					continue
				}
				r.at = sample{pass, m.rep}
				all[m.key] = append(all[m.key], r)
				fmt.Fprintf(os.Stderr, "[pass %d/%d %2d/%d] %s%s: %s (%.1f s)\n", pass, *passes, i+1, len(b.plan), m.label, again(m), brief(r), took)
				break
			}
		}
		if ctx.Err() == nil {
			done = pass
		}
	}
	if interrupted.Load() {
		fmt.Fprintln(os.Stderr, "== interrupted: removing the namespaces")
		return 130
	}
	if ctx.Err() != nil && len(all) == 0 {
		fmt.Fprintf(os.Stderr, "bench: nothing was measured: the %v budget ran out before the first measurement ended (one pass takes about 2 minutes here; -only and -scale shorten it)\n", *budget)
		return 1
	}
	if ctx.Err() != nil {
		fmt.Fprintf(os.Stderr, "== the %v budget ran out during pass %d: reporting what was measured\n", *budget, done+1)
	}
	passNote, shown := passesText(done, ctx.Err() != nil, *budget), done
	if ctx.Err() != nil {
		shown = done + 1
	}

	rows := firstRuns(b.plan)
	res := results{}
	for _, m := range rows {
		res[m.key] = summarize(all[m.key], errs[m.key])
	}
	wall := time.Since(began).Round(time.Second)
	date := time.Now().Format("2006-01-02 15:04 MST")
	var report strings.Builder
	fmt.Fprintf(&report, "Run of %s on %s: %s (each figure is the median over them), %v of measuring.\n\n",
		date, machine(), passNote, wall)
	for _, t := range tables(res, rows, shown) {
		report.WriteString(t.markdown())
		report.WriteString("\n")
	}
	if libNote != "" {
		fmt.Fprintf(&report, "The rows of perftest through the verbs library were not measured: %s.\n\n", libNote)
	}
	if lossNote != "" {
		fmt.Fprintf(&report, "The loss section was not measured: %s.\n\n", lossNote)
	}
	fails := failures(res, rows)
	if len(fails) > 0 {
		report.WriteString("**Failures**\n\n")
		for _, f := range fails {
			fmt.Fprintf(&report, "- %s\n", f)
		}
		report.WriteString("\n")
	}
	fmt.Print(report.String())

	profiles := ""
	if b.profileDir != "" {
		profiles = fmt.Sprintf("CPU profiles of the run of %s (`make bench PROFILE=1`), kept in %s.\n\n", date, *profile) + b.profileTops(res)
		fmt.Print(profiles)
	}
	status := 0
	if *out != "" {
		png := filepath.Join(*out, "bench.png")
		title := fmt.Sprintf("xroce goodput, veth between two namespaces, PMTU %d (%s)", sweepPMTU, time.Now().Format("2006-01-02"))
		if err := plotGoodput(res, shown, title, png); err != nil {
			fmt.Fprintf(os.Stderr, "bench: plot: %v\n", err)
			status = 1
		} else {
			fmt.Fprintf(os.Stderr, "== wrote %s\n", png)
		}
		md := filepath.Join(*out, "bench.md")
		if err := updateDoc(md, report.String(), profiles); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			status = 1
		} else {
			fmt.Fprintf(os.Stderr, "== wrote %s\n", md)
		}
	}
	for _, m := range rows {
		if res[m.key].passes == 0 {
			status = 1 // a measurement with no result at all
		}
	}
	return status
}

// brief prints a result's figures for the progress lines.
func brief(r result) string {
	keys := make([]string, 0, len(r.fig))
	for k := range r.fig {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		v := r.fig[k]
		switch k {
		case figGoodput, figPayload:
			parts = append(parts, fmt.Sprintf("%s %s MiB/s", k, mibs(v)))
		case figP50, figP99, figHandoff:
			parts = append(parts, fmt.Sprintf("%s %s", k, usecs(v)))
		default:
			parts = append(parts, fmt.Sprintf("%s %s/s", k, kpps(v)))
		}
	}
	return strings.Join(parts, ", ")
}

// onlyPrefixes splits -only's comma-separated key prefixes, trimmed; an empty one
// (a trailing comma) is left out, or it would select every measurement.
func onlyPrefixes(s string) []string {
	var ps []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			ps = append(ps, p)
		}
	}
	return ps
}

// firstRuns returns the plan without the repetitions of its target pairs: one row
// per measurement, for the tables.
func firstRuns(plan []measurement) []measurement {
	return slices.DeleteFunc(slices.Clone(plan), func(m measurement) bool { return m.rep > 0 })
}

// retried marks the second try of a failed run in the progress lines.
func retried(try int) string {
	if try == 1 {
		return ""
	}
	return ", tried again"
}

// again marks a repeated run in the progress lines.
func again(m measurement) string {
	if m.rep == 0 {
		return ""
	}
	return fmt.Sprintf(" (again, %d of %d)", m.rep+1, pairReps)
}

// defaultBudget is -budget's default: the whole run stays under 10 minutes.
const defaultBudget = 9*time.Minute + 20*time.Second

// checkFlags refuses a run that could measure nothing or nothing meaningful: fewer
// than one pass, a scale that is not a positive number (it multiplies every
// iteration count and duration), or a budget that is not positive.
func checkFlags(passes int, scale float64, budget time.Duration) error {
	switch {
	case passes < 1:
		return fmt.Errorf("-passes %d: at least 1 (each figure is the median over the passes)", passes)
	case !(scale > 0) || math.IsInf(scale, 1):
		return fmt.Errorf("-scale %v: a positive number (it multiplies every iteration count and duration; 0.1 for a quick try)", scale)
	case budget <= 0:
		return fmt.Errorf("-budget %v: a positive duration (the default is %v)", budget, defaultBudget)
	}
	return nil
}

// checkXroce runs path --version, so that a wrong -xroce (missing, not executable,
// not xroce) fails at once rather than in every measurement.
func checkXroce(path string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s --version: %s", path, strings.TrimSpace(fmt.Sprintf("%v %s", err, out)))
	}
	if !strings.HasPrefix(string(out), "xroce ") {
		return fmt.Errorf("%s --version printed %q, not xroce's version line", path, firstLine(string(out)))
	}
	return nil
}

// firstLine returns s up to its first newline.
func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// keyStarts returns the distinct first two words of the plan's keys, in plan order:
// what -only can start with.
func keyStarts(plan []measurement) []string {
	var out []string
	for _, m := range plan {
		w := strings.Fields(m.key)
		k := strings.Join(w[:min(2, len(w))], " ")
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// passesText says how many passes a run made: "3 passes", or with cut set, the
// passes before the budget ran out and the part of the next.
func passesText(done int, cut bool, budget time.Duration) string {
	switch {
	case !cut && done == 1:
		return "1 pass"
	case !cut:
		return fmt.Sprintf("%d passes", done)
	case done == 0:
		return fmt.Sprintf("part of one pass, cut short by the %v budget", budget)
	case done == 1:
		return fmt.Sprintf("1 pass and part of another, cut short by the %v budget", budget)
	}
	return fmt.Sprintf("%d passes and part of another, cut short by the %v budget", done, budget)
}
