package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/test/testnet"
)

// Figures a measurement produces, and their units.
const (
	figPPS     = "pps"     // frames per second received, one way
	figSentPPS = "sentpps" // frames per second the raw sender handed to its link
	figPayload = "payload" // payload bytes per second (frames/s × payload per frame)
	figGoodput = "goodput" // message bytes per second delivered
	figMsgRate = "msgrate" // messages per second
	figP50     = "p50"     // median latency, seconds
	figP99     = "p99"     // 99th percentile latency, seconds
	figHandoff = "handoff" // seconds per sched_yield (a hand-off of the CPU when another thread waits for it)
)

// sizes are the message sizes of the goodput sweep, in bytes.
var sizes = []int{64, 1 << 10, 4 << 10, 64 << 10, 1 << 20, 8 << 20}

// itersXDP is each bandwidth test's -n over AF_XDP: 0.3–1 s each on the 2-core
// development VM when it is otherwise idle. The UDP link is 2–8 times slower, so it
// runs a quarter.
var itersXDP = map[int]int{64: 150000, 1 << 10: 150000, 4 << 10: 75000, 64 << 10: 6144, 1 << 20: 384, 8 << 20: 48}

// refIters is -n of an AF_XDP WRITE row whose ratio to a raw reference is a target
// (64 B against raw 138-byte frames, 64 KiB against each path MTU's raw payload
// rate), and of its library row: about as long as the raw reference (rawFor, 1.5 s)
// at the rates of a fast hour on the development VM (1.2 M msg/s at 64 B; 1.3, 1.7
// and 2.2 GB/s at PMTU 1024, 2048 and 4096), so at least as long. A shorter run
// counts the sender's ramp (the scheduler placing the two processes, the kernel's
// first frames) over fewer messages than the raw reference does: on 2026-12-02,
// three alternating pairs of write_bw -s 64 gave 0.55-0.63 M msg/s with -n 150000
// and 0.68-0.71 with -n 1000000; on 2026-12-04, four pairs each, -n 750000 against
// 1500000 gave 0.56-0.75 against 0.72-0.89 M msg/s, and WRITE 64 KiB at PMTU 4096
// -n 12288 (0.4 s) against 49152 gave 1491-1827 against 1816-1876 MiB/s (docs/bench.md,
// "Run length" and "Rows as long as their references"). ok is false for a row with
// no raw reference.
func refIters(size, pmtu int) (int, bool) {
	switch {
	case size == 64 && pmtu == sweepPMTU:
		return 1500000, true
	case size == 64<<10 && pmtu == 1024:
		return 24576, true
	case size == 64<<10 && pmtu == 2048:
		return 32768, true
	case size == 64<<10 && pmtu == 4096:
		return 49152, true
	}
	return 0, false
}

const (
	latSize      = 64    // bytes of write_lat and read_lat, and of the raw ping-pong payload
	writeLatN    = 2000  // write_lat iterations
	readLatN     = 5000  // read_lat iterations
	rttN         = 10000 // raw ping-pong round trips
	rawFor       = 1500 * time.Millisecond
	tcpFor       = time.Second
	sweepPMTU    = 1024 // the path MTU of the sweep (a 1500-byte Ethernet link's)
	netdevMTU    = 9000 // the veth's MTU: carries PMTU 2048 and 4096 frames too (multi-buffer AF_XDP)
	tcpPort      = 5201
	pairLimit    = 120 * time.Second // one measurement, both processes
	serverReady  = "Waiting for client"
	helperReady  = "ready"
	rawStopAfter = 300 * time.Millisecond
)

// result is what one pass of one measurement produced.
type result struct {
	fig  map[string]float64 // by the fig* names, in their units
	cpu  [2]cpuTime         // [0] side A (client, sender, pinger), [1] side B (server, receiver)
	note string
	at   sample // the pass and repetition that produced it
}

// sample names one run of a measurement: its pass (from 1) and, for a measurement
// the plan repeats within a pass (pairReps), the repetition (from 0).
type sample struct{ pass, rep int }

// measurement is one line of the plan.
type measurement struct {
	key   string // stable name, e.g. "xdp write 65536"
	label string // for the tables
	run   func(ctx context.Context, b *bench, pass int) (result, error)
	rep   int // its repetition within a pass: 0, or 1.. for a repeated target pair
}

// buildPlan lists every measurement of one pass, in the order they run. Each raw
// AF_XDP reference runs right before the xroce row its ratio compares with it (raw
// 138-byte frames before WRITE 64 B, PMTU 1024 frames before WRITE 64 KiB, 2048 and
// 4096 before their rows, the raw round trips before write_lat), and with lib each
// library row right after its native row: on this shared machine the load drifts
// within a pass (the raw PMTU-1024 rate moved 558-832 MiB/s between the passes of one
// run), so the two figures of a ratio are taken seconds apart, not minutes. With
// loss, the loss section comes last.
func buildPlan(scale float64, lib, loss bool) []measurement {
	var p []measurement
	raw := rawPlan(scale)
	for _, link := range []string{"xdp", "udp"} {
		for _, op := range []string{"write", "read", "send"} {
			for _, size := range sizes {
				n := itersXDP[size]
				if link == "udp" {
					n /= 4
				}
				if ref, ok := refIters(size, sweepPMTU); ok && link == "xdp" && op == "write" {
					n = ref
				}
				row := xroceBW(link, op, size, sweepPMTU, scaleN(n, scale))
				if link != "xdp" || op != "write" || size != 64 && size != 64<<10 {
					p = append(p, row)
					continue
				}
				k := map[int]string{64: "raw pps 64", 64 << 10: "raw pps 1024"}[size]
				p = append(p, raw[k+" "+placed], raw[k], row)
				if lib {
					p = append(p, libBW(size, scaleN(n, scale)))
				}
				p = append(p, repeatPair(raw[k], row)...)
			}
		}
		if link == "xdp" {
			for _, pmtu := range []int{2048, 4096} {
				k := fmt.Sprintf("raw pps %d", pmtu)
				n, _ := refIters(64<<10, pmtu)
				row := xroceBW(link, "write", 64<<10, pmtu, scaleN(n, scale))
				p = append(p, raw[k+" "+placed], raw[k], row)
				p = append(p, repeatPair(raw[k], row)...)
			}
			p = append(p, raw["raw rtt ppoll"], raw["raw rtt spin"])
		}
		p = append(p, xroceLat(link, "write_lat", scaleN(writeLatN, scale), false))
		if lib && link == "xdp" {
			p = append(p, libLat(scaleN(writeLatN, scale)))
		}
		if link == "xdp" {
			p = append(p, handoffPlan(scale)...)
		}
		if link == "xdp" {
			p = append(p, raw["raw rtt ppoll "+oneCPU], xroceLat(link, "write_lat", scaleN(writeLatN, scale), true))
		}
		p = append(p, xroceLat(link, "read_lat", scaleN(readLatN, scale), false))
	}
	for _, size := range sizes {
		p = append(p, measurement{key: fmt.Sprintf("tcp %d", size), label: fmt.Sprintf("TCP stream, %s writes", sizeName(size)),
			run: func(ctx context.Context, b *bench, pass int) (result, error) {
				return b.tcp(ctx, size, scaleDur(tcpFor, scale))
			}})
	}
	if loss {
		p = append(p, lossPlan(scale)...)
	}
	return p
}

// pairReps is how many times a pass measures each WRITE target's pair (the raw
// reference, then its xroce row): on this shared host the ratio of one pair moved
// 0.70-0.94 between the passes of a run (2026-12-04 15:02, PMTU 2048), so one pair
// a pass left a target's verdict to one slow second. Pairs within a pass agree
// more closely than passes do (15:46: 0.76-0.89 against 1.13-1.16), so this
// guards against a slow second, not a slow pass. The repetitions cost about 20 s a
// pass.
const pairReps = 3

// repeatPair returns the repetitions 1..pairReps-1 of a target's raw reference and
// xroce row, each pair in that order.
func repeatPair(ref, row measurement) []measurement {
	var p []measurement
	for rep := 1; rep < pairReps; rep++ {
		ref.rep, row.rep = rep, rep
		p = append(p, ref, row)
	}
	return p
}

// rawPlan returns the raw AF_XDP measurements by key: one-way frame rates of the
// 138-byte WRITE ONLY and of PMTU 1024, 2048 and 4096 WRITE MIDDLE frames, each to a
// receiver that only counts them (the ceiling the targets compare with) and to one
// that also copies every payload into a buffer, as a WRITE's responder places it
// ("placed", for information), and the ping-pong round trips (sleeping in ppoll,
// busy polling, and sleeping with each side confined to one CPU).
func rawPlan(scale float64) map[string]measurement {
	m := map[string]measurement{}
	for _, r := range []struct {
		key     string
		payload int
		only    bool
		label   string
	}{
		{"raw pps 64", latSize, true, fmt.Sprintf("raw one way, %d-byte frames (a 64 B RDMA WRITE ONLY)", rawFrameLen(latSize, true))},
		{"raw pps 1024", 1024, false, fmt.Sprintf("raw one way, PMTU 1024 (%d-byte RDMA WRITE MIDDLE frames)", rawFrameLen(1024, false))},
		{"raw pps 2048", 2048, false, fmt.Sprintf("raw one way, PMTU 2048 (%d-byte RDMA WRITE MIDDLE frames)", rawFrameLen(2048, false))},
		{"raw pps 4096", 4096, false, fmt.Sprintf("raw one way, PMTU 4096 (%d-byte RDMA WRITE MIDDLE frames, two chunks each)", rawFrameLen(4096, false))},
	} {
		for _, place := range []bool{false, true} {
			key, label := r.key, r.label
			if place {
				key, label = key+" "+placed, label+", receiver places the payloads"
			}
			m[key] = measurement{key: key, label: label, run: func(ctx context.Context, b *bench, pass int) (result, error) {
				return b.rawPPS(ctx, r.payload, r.only, place, scaleDur(rawFor, scale))
			}}
		}
	}
	for _, spin := range []bool{false, true} {
		key, label := "raw rtt ppoll", fmt.Sprintf("raw ping-pong RTT, %d-byte frames, sleeping in ppoll", rawFrameLen(latSize, true))
		if spin {
			key, label = "raw rtt spin", fmt.Sprintf("raw ping-pong RTT, %d-byte frames, busy poll", rawFrameLen(latSize, true))
		}
		m[key] = measurement{key: key, label: label, run: func(ctx context.Context, b *bench, pass int) (result, error) {
			return b.rawRTT(ctx, spin, false, scaleN(rttN, scale))
		}}
	}
	m["raw rtt ppoll "+oneCPU] = measurement{key: "raw rtt ppoll " + oneCPU, label: fmt.Sprintf("raw ping-pong RTT, %d-byte frames, sleeping in ppoll, %s", rawFrameLen(latSize, true), oneCPULabel),
		run: func(ctx context.Context, b *bench, pass int) (result, error) {
			return b.rawRTT(ctx, false, true, scaleN(rttN, scale))
		}}
	return m
}

// bwKey names an xroce bandwidth measurement: "xdp write 65536", with " pmtu2048"
// when the path MTU is not the sweep's.
func bwKey(link, op string, size, pmtu int) string {
	k := fmt.Sprintf("%s %s %d", link, op, size)
	if pmtu != sweepPMTU {
		k += fmt.Sprintf(" pmtu%d", pmtu)
	}
	return k
}

func xroceBW(link, op string, size, pmtu, iters int) measurement {
	key := bwKey(link, op, size, pmtu)
	label := fmt.Sprintf("xroce %s %s %s, PMTU %d, -n %d", link, strings.ToUpper(op), sizeName(size), pmtu, iters)
	return measurement{key: key, label: label, run: func(ctx context.Context, b *bench, pass int) (result, error) {
		args := []string{op + "_bw", "--link", link, "-s", fmt.Sprint(size), "-n", fmt.Sprint(iters), "-m", fmt.Sprint(pmtu)}
		out, err := b.xroce(ctx, key, pass, args)
		if err != nil {
			return result{}, err
		}
		return bwFigures(out, size, iters)
	}}
}

// bwFigures are the goodput and message rate of the client's bandwidth line, which
// must report the iterations and size asked for.
func bwFigures(out pairOut, size, iters int) (result, error) {
	r, err := parseBW(out.client)
	if err != nil {
		return result{}, err
	}
	if r.size != size || r.iters != iters {
		return result{}, fmt.Errorf("client reports %d iterations of %d bytes, want %d of %d", r.iters, r.size, iters, size)
	}
	g := r.avgMiBs * (1 << 20)
	return result{fig: map[string]float64{figGoodput: g, figMsgRate: g / float64(size)}, cpu: out.cpu}, nil
}

// xroceLat is a latency test; pinned confines each side to one CPU (pinSides).
func xroceLat(link, test string, iters int, pinned bool) measurement {
	key := link + " " + test
	label := fmt.Sprintf("xroce %s %s %d B, PMTU %d, -n %d", link, test, latSize, sweepPMTU, iters)
	if pinned {
		key, label = key+" "+oneCPU, label+", "+oneCPULabel
	}
	return measurement{key: key, label: label, run: func(ctx context.Context, b *bench, pass int) (result, error) {
		args := []string{test, "--link", link, "-s", fmt.Sprint(latSize), "-n", fmt.Sprint(iters), "-m", fmt.Sprint(sweepPMTU)}
		out, err := b.xroceOn(ctx, b.net, key, pass, args, pinned)
		if err != nil {
			return result{}, err
		}
		r, err := parseLat(out.client)
		if err != nil {
			return result{}, err
		}
		return result{fig: map[string]float64{figP50: r.p50, figP99: r.p99}, cpu: out.cpu}, nil
	}}
}

// xroce runs one xroce test: the server in namespace B, the client in A, each with
// its CPU profile when profiling.
func (b *bench) xroce(ctx context.Context, key string, pass int, args []string) (pairOut, error) {
	return b.xroceOn(ctx, b.net, key, pass, args, false)
}

// xroceOn is xroce on the namespaces of net, each side on a CPU of its own when
// pinned.
func (b *bench) xroceOn(ctx context.Context, net *testnet.Net, key string, pass int, args []string, pinned bool) (pairOut, error) {
	srv := side{args: append([]string{b.xroceBin}, append(args, "-d", net.IfB)...)}
	cli := side{args: append([]string{b.xroceBin}, append(args, "-d", net.IfA, net.IPB.String())...)}
	if pinned {
		pinSides(&srv, &cli)
	}
	if b.profileDir != "" {
		base := strings.ReplaceAll(key, " ", "-")
		for i, s := range []*side{&cli, &srv} {
			f := filepath.Join(b.profileDir, fmt.Sprintf("%s-%s-pass%d.pprof", base, sideNames[i], pass))
			s.env = append(s.env, "XROCE_CPUPROFILE="+f)
			if pf := (profileFile{side: i, path: f}); !slices.Contains(b.profiles[key], pf) { // a retried run writes the same file
				b.profiles[key] = append(b.profiles[key], pf)
			}
		}
	}
	return b.runPairOn(ctx, net, srv, cli, printed(serverReady), pairLimit)
}

// oneCPU marks the measurements whose sides are confined to one CPU each; placed
// the raw one-way rates whose receiver copies out every payload.
const (
	placed      = "placed"
	oneCPU      = "1cpu"
	oneCPULabel = "each side confined to one CPU (taskset -c 1 server, -c 0 client)"
)

// pinSides confines the server to CPU 1 and the client to CPU 0 (taskset), as two
// one-vCPU VMs or containers: every thread of a side, the Go runtime's included
// (GOMAXPROCS follows the affinity), shares its one CPU.
func pinSides(server, client *side) {
	server.args = append([]string{"taskset", "-c", "1"}, server.args...)
	client.args = append([]string{"taskset", "-c", "0"}, client.args...)
}

// sideNames names the two processes of an xroce test.
var sideNames = [2]string{"client", "server"}

// rawPPS measures the raw one-way frame rate: raw-rx in B counts what raw-tx in A
// sends for d.
func (b *bench) rawPPS(ctx context.Context, payload int, only, place bool, d time.Duration) (result, error) {
	flen := rawFrameLen(payload, only)
	rx := side{args: []string{b.self, "raw-rx", "-d", b.net.IfB, "-len", fmt.Sprint(flen), "-idle", rawStopAfter.String(), fmt.Sprintf("-place=%v", place)}}
	tx := side{args: []string{b.self, "raw-tx", "-d", b.net.IfA, "-dst", b.net.IPB.String(), "-payload", fmt.Sprint(payload),
		fmt.Sprintf("-only=%v", only), "-for", d.String()}}
	out, err := b.runPair(ctx, rx, tx, printed(helperReady), pairLimit)
	if err != nil {
		return result{}, err
	}
	rkv, err := parseResult(out.server)
	if err != nil {
		return result{}, err
	}
	tkv, err := parseResult(out.client)
	if err != nil {
		return result{}, err
	}
	pps, err := floats(rkv, "pps")
	if err != nil {
		return result{}, err
	}
	sent, err := floats(tkv, "sent", "seconds", "frame")
	if err != nil {
		return result{}, err
	}
	if int(sent[2]) != flen {
		return result{}, fmt.Errorf("raw-tx sent %v-byte frames, raw-rx counted %d-byte ones", sent[2], flen)
	}
	res := result{fig: map[string]float64{figPPS: pps[0], figPayload: pps[0] * float64(payload), figSentPPS: sent[0] / sent[1]}, cpu: out.cpu}
	if tkv["reason"] != "" { // the link runs single-buffer (a kernel before 6.6)
		res.note = fmt.Sprintf("the AF_XDP link carries PMTU ≤ %s: %s", tkv["maxpmtu"], tkv["reason"])
	}
	return res, nil
}

// rawRTT measures the raw ping-pong round trip: raw-ping in A, raw-pong in B.
func (b *bench) rawRTT(ctx context.Context, spin, pinned bool, n int) (result, error) {
	s := fmt.Sprintf("-spin=%v", spin)
	pong := side{args: []string{b.self, "raw-pong", "-d", b.net.IfB, "-dst", b.net.IPA.String(), "-payload", fmt.Sprint(latSize), s}}
	ping := side{args: []string{b.self, "raw-ping", "-d", b.net.IfA, "-dst", b.net.IPB.String(), "-payload", fmt.Sprint(latSize), s, "-n", fmt.Sprint(n)}}
	if pinned {
		pinSides(&pong, &ping)
	}
	out, err := b.runPair(ctx, pong, ping, printed(helperReady), pairLimit)
	if err != nil {
		return result{}, err
	}
	kv, err := parseResult(out.client)
	if err != nil {
		return result{}, err
	}
	v, err := floats(kv, "p50", "p99")
	if err != nil {
		return result{}, err
	}
	return result{fig: map[string]float64{figP50: v[0], figP99: v[1]}, cpu: out.cpu}, nil
}

// tcp measures a TCP stream of size-byte writes for d: tcp-rx in B, tcp-tx in A.
func (b *bench) tcp(ctx context.Context, size int, d time.Duration) (result, error) {
	rx := side{args: []string{b.self, "tcp-rx", "-port", fmt.Sprint(tcpPort)}}
	tx := side{args: []string{b.self, "tcp-tx", "-dst", b.net.IPB.String(), "-port", fmt.Sprint(tcpPort), "-size", fmt.Sprint(size), "-for", d.String()}}
	out, err := b.runPair(ctx, rx, tx, printed(helperReady), pairLimit)
	if err != nil {
		return result{}, err
	}
	kv, err := parseResult(out.server)
	if err != nil {
		return result{}, err
	}
	g, err := floats(kv, "goodput")
	if err != nil {
		return result{}, err
	}
	return result{fig: map[string]float64{figGoodput: g[0], figMsgRate: g[0] / float64(size)}, cpu: out.cpu}, nil
}

// rawFrameLen is the length in bytes of the raw helpers' frame (IPv4, no VLAN).
func rawFrameLen(payload int, only bool) int {
	p := roce.Packet{BTH: roce.BTH{Opcode: roce.RC_RDMA_WRITE_MIDDLE}, Payload: make([]byte, payload)}
	if only {
		p.BTH.Opcode = roce.RC_RDMA_WRITE_ONLY
	}
	return p.Len()
}

// sizeName prints a message size as 64 B, 4 KiB, 8 MiB.
func sizeName(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d B", n)
}

func scaleN(n int, scale float64) int { return max(1, int(float64(n)*scale)) }

func scaleDur(d time.Duration, scale float64) time.Duration {
	return max(100*time.Millisecond, time.Duration(float64(d)*scale))
}
