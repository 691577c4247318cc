package main

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

var (
	// perftest's bandwidth line: #bytes #iterations BW peak BW average MsgRate.
	bwLine = regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$`)
	// perftest's latency line: #bytes #iterations t_min t_max t_typical t_avg
	// t_stdev 99% 99.9% (µs). Perftest's own prints t_stdev as glibc's printf does
	// a NaN, "-nan", when rounding makes the variance negative.
	latLine = regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)` + strings.Repeat(`\s+([\d.]+|-?nan|-?inf)`, 7) + `\s*$`)
	kvField = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S+)`)
)

// bwResult is the last bandwidth line of an xroce bandwidth test's output.
type bwResult struct {
	size, iters int
	avgMiBs     float64 // BW average, MiB/s (perftest's "MB/sec" is 2^20 bytes)
}

func parseBW(out string) (bwResult, error) {
	m := bwLine.FindAllStringSubmatch(out, -1)
	if m == nil {
		return bwResult{}, fmt.Errorf("no bandwidth line in:\n%s", out)
	}
	l := m[len(m)-1]
	size, _ := strconv.Atoi(l[1])
	iters, _ := strconv.Atoi(l[2])
	avg, err := strconv.ParseFloat(l[4], 64)
	if err != nil {
		return bwResult{}, err
	}
	return bwResult{size: size, iters: iters, avgMiBs: avg}, nil
}

// latResult is the latency line of an xroce latency test's output.
type latResult struct {
	size, iters int
	p50, p99    float64 // t_typical and the 99th percentile, seconds
}

func parseLat(out string) (latResult, error) {
	l := latLine.FindStringSubmatch(out)
	if l == nil {
		return latResult{}, fmt.Errorf("no latency line in:\n%s", out)
	}
	size, _ := strconv.Atoi(l[1])
	iters, _ := strconv.Atoi(l[2])
	p50, err1 := strconv.ParseFloat(l[5], 64)
	p99, err2 := strconv.ParseFloat(l[8], 64)
	if err1 != nil || err2 != nil || math.IsNaN(p50+p99) || math.IsInf(p50+p99, 0) {
		return latResult{}, fmt.Errorf("latency line %q", l[0])
	}
	return latResult{size: size, iters: iters, p50: p50 / 1e6, p99: p99 / 1e6}, nil
}

// parseResult reads the helpers' `result key=value ...` line; quoted values are Go
// strings.
func parseResult(out string) (map[string]string, error) {
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(line, "result ")
		if !ok {
			continue
		}
		kv := map[string]string{}
		for _, m := range kvField.FindAllStringSubmatch(rest, -1) {
			v := m[2]
			if strings.HasPrefix(v, `"`) {
				u, err := strconv.Unquote(v)
				if err != nil {
					return nil, fmt.Errorf("result line %q: %v", line, err)
				}
				v = u
			}
			kv[m[1]] = v
		}
		return kv, nil
	}
	return nil, fmt.Errorf("no result line in:\n%s", out)
}

// floats converts the named values of a result line.
func floats(kv map[string]string, names ...string) ([]float64, error) {
	out := make([]float64, len(names))
	for i, n := range names {
		v, err := strconv.ParseFloat(kv[n], 64)
		if err != nil {
			return nil, fmt.Errorf("result %s=%q: %v", n, kv[n], err)
		}
		out[i] = v
	}
	return out, nil
}

// listening reports whether a /proc/PID/net/tcp or tcp6 table (a process's
// network namespace's TCP sockets) has a socket listening on port.
func listening(table string, port int) bool {
	for _, line := range strings.Split(table, "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[3] != "0A" { // TCP_LISTEN; also skips the header
			continue
		}
		_, hexPort, ok := strings.Cut(f[1], ":")
		if p, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil && int(p) == port {
			return true
		}
	}
	return false
}
