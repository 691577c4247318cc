package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
)

// The library rows: Debian's unmodified perftest, `xroce run -- ib_write_bw` and
// `ib_write_lat`, between two `xroce daemon`s (one per namespace, on the veth the
// native rows use), with the native rows' sizes, iterations and path MTU.

const perftestPort = 18515 // perftest's default (-p)

// perftestDevice is perftest's device line when it runs on an xroce device.
var perftestDevice = regexp.MustCompile(`Device\s+: xroce\d+`)

// libMissing says why the library rows cannot run (no library beside the xroce
// binary or in XROCE_LIB, no perftest), or "".
func libMissing(xroceBin string) string {
	lib := os.Getenv("XROCE_LIB")
	if lib == "" {
		lib = filepath.Join(filepath.Dir(xroceBin), "lib", "libxroce.so")
	}
	if _, err := os.Stat(lib); err != nil {
		return fmt.Sprintf("no verbs library %s (make libverbs: needs gcc and libibverbs-dev)", lib)
	}
	for _, tool := range []string{"ib_write_bw", "ib_write_lat"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Sprintf("no %s (apt-get install perftest)", tool)
		}
	}
	return ""
}

// perftestArgs are the flags of a library row: GID index 1 (the IPv4 RoCEv2 GID,
// as in cmd/xroce/verbs_test.go), no CPU-frequency warning, the native row's size,
// iterations and path MTU. Everything else is perftest's default, which is the
// native tools' too: TX depth 128, no inline data (perftest disables it on a device
// it does not know).
func perftestArgs(tool string, size, iters int) []string {
	return []string{tool, "-x", "1", "-F", "-s", fmt.Sprint(size), "-n", fmt.Sprint(iters), "-m", fmt.Sprint(sweepPMTU), "-p", fmt.Sprint(perftestPort)}
}

func libBW(size, iters int) measurement {
	key := fmt.Sprintf("lib write %d", size)
	label := fmt.Sprintf("ib_write_bw through the library, xdp WRITE %s, PMTU %d, -n %d", sizeName(size), sweepPMTU, iters)
	return measurement{key: key, label: label, run: func(ctx context.Context, b *bench, pass int) (result, error) {
		out, err := b.perftest(ctx, perftestArgs("ib_write_bw", size, iters))
		if err != nil {
			return result{}, err
		}
		return bwFigures(out, size, iters)
	}}
}

func libLat(iters int) measurement {
	label := fmt.Sprintf("ib_write_lat through the library, xdp %d B, PMTU %d, -n %d", latSize, sweepPMTU, iters)
	return measurement{key: "lib write_lat", label: label, run: func(ctx context.Context, b *bench, pass int) (result, error) {
		out, err := b.perftest(ctx, perftestArgs("ib_write_lat", latSize, iters))
		if err != nil {
			return result{}, err
		}
		r, err := parseLat(out.client)
		if err != nil {
			return result{}, err
		}
		if r.size != latSize || r.iters != iters {
			return result{}, fmt.Errorf("client reports %d iterations of %d bytes, want %d of %d", r.iters, r.size, iters, latSize)
		}
		return result{fig: map[string]float64{figP50: r.p50, figP99: r.p99}, cpu: out.cpu}, nil
	}}
}

// perftest runs one perftest tool through `xroce run`: a daemon in each namespace,
// the server in B, the client in A. Each side's CPU time is its application's and
// its daemon's together (the engine runs in the daemon). The daemons stop with the
// measurement, whatever its outcome. No CPU profiles: a daemon stops on a signal,
// which exits before its profile is written.
func (b *bench) perftest(ctx context.Context, args []string) (pairOut, error) {
	exe, err := exec.LookPath(args[0])
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return pairOut{}, err
	}
	d, err := b.startDaemons(ctx)
	if err != nil {
		return pairOut{}, err
	}
	app := func(i int, extra ...string) side {
		return side{args: append(append([]string{b.xroceBin, "run", "--"}, args...), extra...), env: []string{"XROCE_RUN_DIR=" + d.dirs[i]}}
	}
	out, err := b.runPair(ctx, app(1), app(0, b.net.IPB.String()), perftestListening(exe, perftestPort), pairLimit)
	cpu, derr := d.stop()
	if err != nil {
		return out, fmt.Errorf("%v\n%s", err, d.logs())
	}
	if derr != nil {
		return out, derr
	}
	for i := range out.cpu {
		out.cpu[i].User += cpu[i].User
		out.cpu[i].Sys += cpu[i].Sys
	}
	for _, o := range []string{out.client, out.server} {
		if !perftestDevice.MatchString(o) {
			return out, fmt.Errorf("%s ran on no xroce device:\n%s", args[0], o)
		}
	}
	return out, nil
}

// perftestListening is ready once the server is the perftest binary exe (after `ip
// netns exec` and `xroce run` exec'd it, so in namespace B) and a socket of its
// namespace listens on port. Perftest's banner cannot tell: its stdout is a pipe,
// so it is block-buffered until the run ends.
func perftestListening(exe string, port int) readiness {
	return readiness{fmt.Sprintf("%s listening on TCP port %d", filepath.Base(exe), port), func(p *proc) bool {
		dir := "/proc/" + strconv.Itoa(p.cmd.Process.Pid)
		if e, err := os.Readlink(dir + "/exe"); err != nil || e != exe {
			return false
		}
		for _, t := range []string{"/net/tcp", "/net/tcp6"} {
			if b, err := os.ReadFile(dir + t); err == nil && listening(string(b), port) {
				return true
			}
		}
		return false
	}}
}
