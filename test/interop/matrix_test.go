package interop

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/test/testnet"
)

// cell is one run of the interop matrix.
type cell struct {
	tool        string // write_bw, read_bw, send_bw, atomic_bw, write_lat, pingpong, uc_pingpong, ud_pingpong, rping
	size        int
	xroceClient bool // xroce client → rxe server; else rxe client → xroce server
	mtu         int  // netdev MTU of every interface
	link        string
	fault       string // "", "loss2", "tbf"
	// verbs: the guest side is xroce itself built with the verbs tag, running on
	// rdma_rxe through libibverbs (--provider verbs), instead of perftest: for
	// the cross-check and for --verify data verification on both sides.
	verbs bool
	// flags go to both sides' commands, perftest's and xroce's alike: "-a" (every
	// size from 2 to 2^23 bytes; size is then unused) or "-q 2".
	flags string
	// lib: the host side is not xroce's own tool but the same Debian perftest or
	// ibv_rc_pingpong as the guest's, unmodified, on the xroce device through the
	// verbs library (`xroce daemon` + `xroce run`; library_test.go).
	lib bool
}

// all is a -a cell.
func (c cell) all() bool { return slices.Contains(strings.Fields(c.flags), "-a") }

// qps is the cell's -q.
func (c cell) qps() int {
	f := strings.Fields(c.flags)
	if i := slices.Index(f, "-q"); i >= 0 && i+1 < len(f) {
		n, _ := strconv.Atoi(f[i+1])
		return n
	}
	return 1
}

func (c cell) String() string {
	dir := "rxe→xroce"
	if c.xroceClient {
		dir = "xroce→rxe"
	}
	s := fmt.Sprintf("%s %dB %s mtu%d %s", c.tool, c.size, dir, c.mtu, c.link)
	if c.all() {
		s = fmt.Sprintf("%s allsizes %s mtu%d %s", c.tool, dir, c.mtu, c.link)
	}
	if c.tool == "crosscheck" {
		s = fmt.Sprintf("%s %s mtu%d %s", c.tool, dir, c.mtu, c.link)
	}
	if c.fault != "" {
		s += " " + c.fault
	}
	if c.verbs {
		s += " verbs"
		if c.tool != "crosscheck" {
			s += "+verify"
		}
	}
	if c.lib {
		s += " libxroce"
	}
	if c.flags != "" {
		s += " " + c.flags
	}
	return s
}

// iters keeps each cell to a few seconds on the TCG guest (~20 MB/s); a -a cell
// moves 20 × 16 MiB.
func (c cell) iters() int {
	if c.all() {
		return 20
	}
	if strings.HasSuffix(c.tool, "_lat") || strings.HasSuffix(c.tool, "pingpong") {
		return 200
	}
	return min(1000, max(5, 40_000_000/max(c.size, 1)))
}

type result struct {
	cell        cell
	pass        bool
	xroce, rxe  string // each side's figure
	err         string
	capture     string
	xroceFrames int
	xout, gout  string // each side's output
	rerun       string // why the cell ran a second time, on a fresh guest, or ""
	daemon      string // a lib cell's: the daemon's packet counters after the run
}

// status is the table's result column.
func (r result) status() string {
	s := "FAIL"
	if r.pass {
		s = "pass"
	}
	if r.rerun != "" {
		s += " (second run: " + r.rerun + " in the first)"
	}
	return s
}

var (
	bwRe = regexp.MustCompile(`(?m)^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$`)
	// perftest prints inf and -nan when its cycle-to-µs calibration fails (seen
	// under TCG on a loaded host): still a table, the exchange done.
	latRe = regexp.MustCompile(`(?m)^\s*(\d+)\s+(\d+)` + strings.Repeat(`\s+([\d.]+|inf|-?nan)`, 7) + `\s*$`)
	ppRe  = regexp.MustCompile(`(?m)= ([\d.]+) usec/iter`)
	xcRe  = regexp.MustCompile(`(?m)^crosscheck \w+: (\d+) completions and \d+ bytes of memory match the model$`)
)

// figure extracts the BW average (MB/s), t_typical (µs) or usec/iter from output.
func figure(tool, out string) (string, bool) {
	switch {
	case tool == "crosscheck":
		if m := xcRe.FindStringSubmatch(out); m != nil {
			return m[1] + " WCs as modelled", true
		}
	case tool == "qperf":
		return qperfFigure(out)
	case tool == "rping":
		if n := len(rpingDataRe.FindAllString(out, -1)); n > 0 {
			return fmt.Sprintf("%d data lines", n), true
		}
	case strings.HasSuffix(tool, "pingpong"): // -c: rdma-core's examples print "invalid data in page N" and go on
		if m := ppRe.FindStringSubmatch(out); m != nil && !strings.Contains(out, "invalid data") {
			return m[1] + " usec/iter", true
		}
	case strings.HasSuffix(tool, "_lat"):
		if m := latRe.FindStringSubmatch(out); m != nil {
			return m[5] + " usec typical", true
		}
	default:
		if m := bwRe.FindStringSubmatch(out); m != nil {
			return m[4] + " MB/s", true
		}
	}
	return "", false
}

// tableRows are the result rows of out.
func tableRows(out string) string {
	var rows []string
	for _, l := range strings.Split(out, "\n") {
		if bwRe.MatchString(l) || latRe.MatchString(l) {
			rows = append(rows, l)
		}
	}
	return strings.Join(rows, "\n")
}

// lastTable is out from the last table row on for a -a cell, whose figure is that
// of the largest size; out for the others.
func lastTable(c cell, out string) string {
	if !c.all() {
		return out
	}
	if m := bwRe.FindAllStringIndex(out, -1); len(m) > 0 {
		return out[m[len(m)-1][0]:]
	}
	return out
}

// rxeCommand is the guest side's command line.
func (c cell) rxeCommand(server bool, xroceIP string) string {
	switch c.tool {
	case "rping":
		return c.rpingRxeCommand(server, xroceIP)
	case "qperf":
		return qperfRxeCommand(server, xroceIP)
	}
	var cmd string
	if c.verbs {
		cmd = "/tmp/xroce-verbs " + strings.Join(c.toolArgs(), " ") + " --provider verbs -d rxe0 -x 1"
	} else {
		cmd = strings.Join(c.perftestArgs("rxe0"), " ")
	}
	if !server {
		cmd += " " + xroceIP
	}
	return cmd
}

// perftestArgs is the perftest (or ibv_rc_pingpong) command line of a server on
// device dev, RoCEv2 GID index 1 on rdma_rxe and xroce alike: the guest's, and the
// host's in a lib cell. A client adds the server's address. The ibv_*_pingpong
// examples check the data they receive (-c), as xroce pingpong -c does.
func (c cell) perftestArgs(dev string) []string {
	var cmd string
	switch {
	case strings.HasSuffix(c.tool, "pingpong"): // pingpong (RC), uc_pingpong, ud_pingpong
		cmd = fmt.Sprintf("%s -d %s -g 1 -n %d -s %d", c.ibvPingpong(), dev, c.iters(), c.size)
		if c.tool != "ud_pingpong" { // UD has no path
			cmd += fmt.Sprintf(" -m %d", min(c.mtu-80, 4096)&^1023)
		}
		cmd += " -c"
	case c.tool == "atomic_bw":
		cmd = fmt.Sprintf("ib_atomic_bw -d %s -x 1 -F -n %d", dev, c.iters())
	case c.all():
		cmd = fmt.Sprintf("ib_%s -d %s -x 1 -F -n %d", c.tool, dev, c.iters())
	default:
		cmd = fmt.Sprintf("ib_%s -d %s -x 1 -F -s %d -n %d", c.tool, dev, c.size, c.iters())
	}
	return append(strings.Fields(cmd), strings.Fields(c.flags)...)
}

// ibvPingpong is the rdma-core example a pingpong cell runs: ibv_rc_pingpong
// (tool pingpong), ibv_uc_pingpong or ibv_ud_pingpong.
func (c cell) ibvPingpong() string {
	if c.tool == "pingpong" {
		return "ibv_rc_pingpong"
	}
	return "ibv_" + c.tool
}

// toolArgs are the arguments of an xroce tool (either side) for the cell.
func (c cell) toolArgs() []string {
	switch c.tool {
	case "crosscheck":
		return []string{c.tool}
	case "pingpong":
		return []string{c.tool, "-c", "-n", fmt.Sprint(c.iters()), "-s", fmt.Sprint(c.size), "-m", fmt.Sprint(min(c.mtu-80, 4096) &^ 1023)}
	case "uc_pingpong":
		return []string{"pingpong", "--connection", "UC", "-c", "-n", fmt.Sprint(c.iters()), "-s", fmt.Sprint(c.size), "-m", fmt.Sprint(min(c.mtu-80, 4096) &^ 1023)}
	case "ud_pingpong":
		return []string{"pingpong", "--connection", "UD", "-c", "-n", fmt.Sprint(c.iters()), "-s", fmt.Sprint(c.size)}
	case "atomic_bw":
		return []string{c.tool, "-n", fmt.Sprint(c.iters())}
	}
	args := []string{c.tool, "-n", fmt.Sprint(c.iters())}
	if !c.all() {
		args = append(args, "-s", fmt.Sprint(c.size))
	}
	if c.verbs {
		args = append(args, "--verify")
	}
	return append(args, strings.Fields(c.flags)...)
}

// xroceArgs is xroce's command line.
func (c cell) xroceArgs(lab *Lab, server bool) []string {
	if c.tool == "rping" {
		return c.rpingXroceArgs(lab, server)
	}
	args := append(c.toolArgs(), "-d", lab.XIf, "--link", c.link)
	if !server {
		args = append(args, lab.GuestIP.String())
	}
	return args
}

func xroceBin(t *testing.T) string {
	bin, err := filepath.Abs("../../bin/xroce")
	if err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-buildvcs=auto", "-o", bin, "../../cmd/xroce") // as make build: --version names the revision
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building xroce: %v\n%s", err, out)
	}
	return bin
}

// verbsBin builds xroce with the verbs provider (cgo, libibverbs-dev) for the
// guest: the host is Debian 12 like the guest, so the guest's libibverbs, libnl and
// libc (already in its initramfs for perftest) are what it links against.
func verbsBin(t *testing.T) string {
	bin, err := filepath.Abs("../../bin/xroce-verbs")
	if err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-buildvcs=auto", "-tags", "verbs", "-o", bin, "../../cmd/xroce")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building xroce with the verbs provider (make verbs; needs libibverbs-dev): %v\n%s", err, out)
	}
	return bin
}

// runCell runs one cell, capturing the bridge, and checks the capture.
func runCell(t *testing.T, lab *Lab, bin string, c cell, dir string) result {
	r := result{cell: c}
	capFile := filepath.Join(dir, strings.NewReplacer(" ", "_", "→", "-to-").Replace(c.String())+".pcap")
	dump := exec.Command("ip", "netns", "exec", lab.NS, "dumpcap", "-q", "-i", "br0", "-w", capFile)
	dump.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := dump.Start(); err != nil {
		r.err = "dumpcap: " + err.Error()
		return r
	}
	defer trackProc(dump.Process)() // an interrupted run kills it too
	time.Sleep(300 * time.Millisecond)
	if err := applyFault(lab, c.fault); err != nil {
		r.err = err.Error()
		_ = dump.Process.Kill()
		_ = dump.Wait()
		return r
	}
	var xout, gout string
	var xerr, gerr error
	var grc int
	var lr libRun // a lib cell's daemon and host application
	if c.lib {
		lr = runLibSides(lab, bin, c)
		if lr.raced > 0 {
			r.rerun = fmt.Sprintf("perftest 4.5-0.17's client sent its data QP's REQ before the server listened (REJ 8) %d time(s)", lr.raced)
		}
		xout, gout, xerr, gerr, grc = lr.xout, lr.gout, lr.xerr, lr.gerr, lr.grc
	} else if c.xroceClient {
		wait := lab.Guest(c.rxeCommand(true, lab.XIP.String()))
		lab.Guest(c.guestListening())(40 * time.Second)
		b, err := exec.Command("ip", append([]string{"netns", "exec", lab.NS, "timeout", "90", bin}, c.xroceArgs(lab, false)...)...).CombinedOutput()
		xout, xerr = string(b), err
		gout, grc, gerr = wait(90 * time.Second)
	} else {
		srv := exec.Command("ip", append([]string{"netns", "exec", lab.NS, "timeout", "90", bin}, c.xroceArgs(lab, true)...)...)
		var sb testnet.Output
		srv.Stdout, srv.Stderr = &sb, &sb
		if err := srv.Start(); err != nil {
			r.err = err.Error()
			_ = dump.Process.Kill()
			_ = dump.Wait()
			return r
		}
		for i := 0; i < 500 && !strings.Contains(sb.String(), "Waiting for client") && !strings.Contains(sb.String(), "xroce") &&
			!strings.Contains(sb.String(), "rdma_listen"); i++ {
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond)
		gout, grc, gerr = lab.Guest(c.rxeCommand(false, lab.XIP.String()))(90 * time.Second)
		xerr = srv.Wait()
		xout = sb.String()
	}
	time.Sleep(200 * time.Millisecond)
	_ = dump.Process.Signal(syscall.SIGINT)
	_ = dump.Wait()
	faultErr := removeFault(lab, c.fault)
	var ok1, ok2 bool
	r.xroce, ok1 = figure(c.tool, lastTable(c, xout))
	r.rxe, ok2 = figure(c.tool, lastTable(c, gout))
	if c.tool == "read_lat" || c.tool == "qperf" { // only the client reads and prints a table
		if c.xroceClient {
			r.rxe, ok2 = "(server)", !strings.Contains(gout, "#bytes")
		} else {
			r.xroce, ok1 = "(server)", !strings.Contains(xout, "#bytes")
		}
	}
	var libErr error
	if c.lib {
		libErr = c.checkLib(lab, lr)
	}
	switch {
	case lr.setup != nil:
		r.err = lr.setup.Error()
	case xerr != nil:
		r.err = fmt.Sprintf("xroce: %v: %s\nrxe (rc %d %v): %s", xerr, tail(xout, 600), grc, gerr, tail(gout, 600))
	case gerr != nil || grc != 0:
		r.err = fmt.Sprintf("rxe: rc %d %v: %s\nxroce: %s", grc, gerr, tail(gout, 600), tail(xout, 600))
	case !ok1 || !ok2:
		r.err = fmt.Sprintf("no result table: xroce:\n%s\nrxe:\n%s", tail(xout, 600), tail(gout, 600))
	case faultErr != nil:
		r.err = faultErr.Error()
	case c.verbs && c.tool != "crosscheck" && !strings.Contains(c.verifier(xout, gout), "Data verified"):
		r.err = fmt.Sprintf("no data verification on the receiving side: xroce:\n%s\nguest:\n%s", tail(xout, 600), tail(gout, 600))
	case c.tool == "crosscheck" && !xcRe.MatchString(gout):
		r.err = fmt.Sprintf("the guest's cross-check did not match the model:\n%s", tail(gout, 600))
	case libErr != nil:
		r.err = libErr.Error()
	case c.tool == "rping" && c.checkRping(xout, gout) != nil:
		r.err = c.checkRping(xout, gout).Error()
	case c.flags != "" && !c.lib && c.checkFlags(xout, gout) != nil:
		r.err = c.checkFlags(xout, gout).Error()
	default:
		r.pass = true
	}
	r.xout, r.gout, r.daemon = xout, gout, lr.counters
	if err := checkCapture(capFile, lab, &r); err != nil {
		r.pass = false
		r.err += " capture: " + err.Error()
	}
	if r.pass {
		os.Remove(capFile)
	} else {
		r.capture = capFile
	}
	return r
}

// checkFlags checks the tables of a -a or -q cell: with -a the client prints a row
// for every size from 2 to 2^23 bytes, in order, and a write/read_bw server one row,
// its client's last; with -q each side lists its QPs and counts every QP's
// iterations. xout and gout are xroce's and the guest's outputs.
func (c cell) checkFlags(xout, gout string) error {
	cli, srv := gout, xout
	if c.xroceClient {
		cli, srv = xout, gout
	}
	lat := strings.HasSuffix(c.tool, "_lat")
	re := bwRe
	if lat {
		re = latRe
	}
	iters := c.iters()
	if !lat {
		iters *= c.qps()
	}
	rows := func(who, out string, sizes []int) error { return checkRows(who, out, re, sizes, iters) }
	sizes := []int{c.size}
	if c.all() {
		sizes = nil
		for i := 1; i < 24; i++ {
			sizes = append(sizes, 1<<i)
		}
	}
	if err := rows("client", cli, sizes); err != nil {
		return err
	}
	if (c.tool == "write_bw" || c.tool == "read_bw") && !slices.Contains(strings.Fields(c.flags), "-b") {
		sizes = sizes[len(sizes)-1:] // a passive server prints the last size only
	}
	if err := rows("server", srv, sizes); err != nil {
		return err
	}
	for who, out := range map[string]string{"client": cli, "server": srv} {
		if !strings.Contains(out, fmt.Sprintf(" Number of qps   : %d\t\t", c.qps())) {
			return fmt.Errorf("%s: not %d QPs in its header:\n%s", who, c.qps(), tail(out, 3000))
		}
	}
	return nil
}

// checkRows checks that out's result table (rows matching re) has one row per
// size, in order, each with that size in its bytes column and iters in its
// iterations column.
func checkRows(who, out string, re *regexp.Regexp, sizes []int, iters int) error {
	m := re.FindAllStringSubmatch(out, -1)
	if len(m) != len(sizes) {
		return fmt.Errorf("%s: %d table rows, want %d:\n%s", who, len(m), len(sizes), tail(out, 3000))
	}
	for i, r := range m {
		if r[1] != fmt.Sprint(sizes[i]) || r[2] != fmt.Sprint(iters) {
			return fmt.Errorf("%s: row %d %q, want %d bytes, %d iterations", who, i, strings.TrimSpace(r[0]), sizes[i], iters)
		}
	}
	return nil
}

// verifier is the output of the side that checks the data with --verify: the
// receiver of WRITE and SEND, the reader of READ.
func (c cell) verifier(xout, gout string) string {
	xroceServer := !c.xroceClient
	if (c.tool == "read_bw") == xroceServer {
		return gout
	}
	return xout
}

// applyFault injects the cell's fault on the bridge (this kernel has no netem, and
// AF_XDP bypasses qdiscs on its own interfaces, so faults live on the bridge):
// "loss2" drops 2 % of UDP/4791 frames at random (nftables, bridge family, forward
// hook); "tbf" limits the guest's bridge port to 50 Mbit/s, below what xroce sends,
// like a 10G-to-1G bottleneck.
func applyFault(lab *Lab, fault string) error {
	nft := func(args ...string) error {
		return sh(append([]string{"ip", "netns", "exec", lab.NS, "nft"}, args...)...)
	}
	switch fault {
	case "loss2":
		if err := nft("add", "table", "bridge", "chaos"); err != nil {
			return err
		}
		if err := nft("add", "chain", "bridge", "chaos", "fw", "{ type filter hook forward priority 0; }"); err != nil {
			return err
		}
		return nft("add", "rule", "bridge", "chaos", "fw", "udp", "dport", "4791", "numgen", "random", "mod", "100", "<", "2", "counter", "drop")
	case "tbf":
		return sh("ip", "netns", "exec", lab.NS, "tc", "qdisc", "add", "dev", "tap0", "root", "tbf", "rate", "50mbit", "burst", "32k", "latency", "10ms")
	}
	return nil
}

// removeFault removes the fault and checks it acted: the loss rule dropped frames.
func removeFault(lab *Lab, fault string) error {
	switch fault {
	case "loss2":
		out, _ := exec.Command("ip", "netns", "exec", lab.NS, "nft", "list", "chain", "bridge", "chaos", "fw").Output()
		_ = sh("ip", "netns", "exec", lab.NS, "nft", "delete", "table", "bridge", "chaos")
		if m := regexp.MustCompile(`counter packets (\d+)`).FindSubmatch(out); m == nil || string(m[1]) == "0" {
			return fmt.Errorf("the loss rule dropped nothing:\n%s", out)
		}
	case "tbf":
		_ = sh("ip", "netns", "exec", lab.NS, "tc", "qdisc", "del", "dev", "tap0", "root")
	}
	return nil
}

// checkCapture decodes every frame xroce sent with xroce's own decoder (ICRC
// included) and has tshark look for malformed frames.
func checkCapture(file string, lab *Lab, r *result) error {
	frames, err := pcap.ReadFile(file)
	if err != nil {
		return err
	}
	for _, f := range frames {
		var p roce.Packet
		err := p.Decode(f.Data)
		if errors.Is(err, roce.ErrNotRoCE) || p.Frame() == nil && err != nil && !errors.Is(err, roce.ErrBadICRC) {
			continue
		}
		if p.SrcAddr() != lab.XIP {
			continue
		}
		r.xroceFrames++
		if err != nil {
			return fmt.Errorf("frame %d from xroce: %v", f.Index, err)
		}
	}
	// Payloads are perftest buffers or seeded patterns: keep Wireshark's payload
	// heuristics (RPC over RDMA, IDP) from misreading them, and leave out frames it
	// dissected past the InfiniBand headers (a SEND payload whose first bytes look
	// like an EtherType is "EtherType encapsulated" to it, which has no switch); the
	// headers are what must be well formed.
	filter := fmt.Sprintf(`ip.src == %s && (_ws.malformed || _ws.expert.severity >= 8388608) && !(frame.protocols matches "infiniband:")`, lab.XIP)
	out, err := exec.Command("tshark", "-r", file, "--disable-protocol", "rpcordma", "--disable-protocol", "idp",
		"-Y", filter, "-T", "fields", "-e", "frame.number").Output()
	if err != nil {
		return fmt.Errorf("tshark: %v", err)
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		return fmt.Errorf("tshark reports malformed frames: %s", s)
	}
	return nil
}

func matrix(full bool) []cell {
	var cells []cell
	add := func(c cell) {
		for _, dir := range []bool{true, false} {
			c.xroceClient = dir
			cells = append(cells, c)
		}
	}
	if !full {
		add(cell{tool: "write_bw", size: 64, mtu: 1500, link: "xdp"})
		add(cell{tool: "write_bw", size: 1 << 20, mtu: 1500, link: "xdp"})
		add(cell{tool: "read_bw", size: 1 << 20, mtu: 1500, link: "xdp"})
		add(cell{tool: "crosscheck", mtu: 1500, link: "xdp", verbs: true})
		add(cell{tool: "rping", size: 64, mtu: 1500, link: "xdp"})
		add(cell{tool: "write_bw", size: 65536, mtu: 1500, link: "xdp", flags: "-R"})
		return append(cells, libMatrix(false)...)
	}
	// The cross-check and data verification against rdma_rxe through libibverbs.
	for _, mtu := range []int{1500, 3000} {
		add(cell{tool: "crosscheck", mtu: mtu, link: "xdp", verbs: true})
	}
	for _, tool := range []string{"write_bw", "read_bw", "send_bw"} {
		for _, size := range []int{1025, 1 << 20} {
			add(cell{tool: tool, size: size, mtu: 1500, link: "xdp", verbs: true})
		}
	}
	for _, mtu := range []int{1500, 3000} {
		for _, tool := range []string{"write_bw", "read_bw", "send_bw"} {
			for _, size := range []int{1, 64, 1024, 1025, 2500, 65536, 1 << 20} {
				add(cell{tool: tool, size: size, mtu: mtu, link: "xdp"})
			}
		}
		add(cell{tool: "write_lat", size: 64, mtu: mtu, link: "xdp"})
		add(cell{tool: "atomic_bw", size: 8, mtu: mtu, link: "xdp"})
		add(cell{tool: "pingpong", size: 4096, mtu: mtu, link: "xdp"})
		for _, size := range []int{64, 4000} { // rping's default, and more than a path MTU
			add(cell{tool: "rping", size: size, mtu: mtu, link: "xdp"})
		}
	}
	// Path MTU 4096: netdev MTU 9000 on both sides, rdma_rxe's active_mtu 4096,
	// multi-buffer AF_XDP on xroce's side (a frame spans two UMEM chunks).
	for _, tool := range []string{"write_bw", "read_bw", "send_bw"} {
		for _, size := range []int{1, 4096, 4097, 65536, 1 << 20} {
			add(cell{tool: tool, size: size, mtu: 9000, link: "xdp"})
		}
	}
	add(cell{tool: "pingpong", size: 4096, mtu: 9000, link: "xdp"})
	// UC and UD: xroce pingpong --connection UC|UD against ibv_uc_pingpong and
	// ibv_ud_pingpong, path MTU 1024 and 2048 (a UD message is one packet: the
	// path MTU less the 40 bytes ibv_ud_pingpong's receive buffer begins with).
	for _, mtu := range []int{1500, 3000} {
		add(cell{tool: "uc_pingpong", size: 4096, mtu: mtu, link: "xdp"})
		add(cell{tool: "ud_pingpong", size: (mtu-80)&^1023 - 40, mtu: mtu, link: "xdp"})
	}
	add(cell{tool: "crosscheck", mtu: 9000, link: "xdp", verbs: true})
	add(cell{tool: "write_bw", size: 65536, mtu: 1500, link: "udp"})
	// perftest's -a (every size in one connection) and -q 2 (two QPs), and the
	// latency tests not covered above.
	for _, tool := range []string{"write_bw", "read_bw", "send_bw"} {
		add(cell{tool: tool, mtu: 1500, link: "xdp", flags: "-a"})
	}
	add(cell{tool: "write_bw", size: 65536, mtu: 1500, link: "xdp", flags: "-q 2"})
	add(cell{tool: "send_bw", size: 65536, mtu: 1500, link: "xdp", flags: "-q 2"})
	// perftest's -b (both sides send) and -e (sleeping on completion events).
	for _, tool := range []string{"write_bw", "read_bw", "send_bw"} {
		add(cell{tool: tool, size: 65536, mtu: 1500, link: "xdp", flags: "-b"})
	}
	// perftest's rdma_cm mode (-R): the exchange and the test QP connected by the
	// RDMA CM, xroce's tool natively against perftest on rdma_rxe, at path MTU
	// 1024 and 2048.
	for _, mtu := range []int{1500, 3000} {
		for _, tool := range []string{"write_bw", "read_bw", "send_bw"} {
			add(cell{tool: tool, size: 65536, mtu: mtu, link: "xdp", flags: "-R"})
		}
	}
	add(cell{tool: "read_bw", size: 65536, mtu: 1500, link: "xdp", flags: "-e"}) // perftest refuses -e on WRITE
	add(cell{tool: "send_bw", size: 65536, mtu: 1500, link: "xdp", flags: "-e"})
	add(cell{tool: "send_lat", size: 64, mtu: 1500, link: "xdp", flags: "-e"})
	// The same through libibverbs on rdma_rxe, with --verify of every size and QP.
	add(cell{tool: "write_bw", mtu: 1500, link: "xdp", verbs: true, flags: "-a"})
	add(cell{tool: "read_bw", size: 65536, mtu: 1500, link: "xdp", verbs: true, flags: "-q 2"})
	for _, tool := range []string{"read_lat", "send_lat"} {
		add(cell{tool: tool, size: 64, mtu: 1500, link: "xdp"})
	}
	for _, tool := range []string{"write_bw", "read_bw", "send_bw"} {
		cells = append(cells, cell{tool: tool, size: 1 << 20, xroceClient: true, mtu: 1500, link: "xdp", fault: "loss2"})
	}
	cells = append(cells, cell{tool: "write_bw", size: 1 << 20, xroceClient: true, mtu: 1500, link: "xdp", fault: "tbf"})
	// Debian's unmodified perftest and ibv_rc_pingpong on both sides: on the host
	// through xroce's verbs library, in the guest on rdma_rxe.
	return append(cells, libMatrix(true)...)
}

// TestMatrix runs xroce against rdma_rxe: XROCE_INTEROP=quick (make interop-quick)
// or full (make interop). It prints the table of cells.
func TestMatrix(t *testing.T) {
	mode := os.Getenv("XROCE_INTEROP")
	if mode == "" {
		t.Skip("set XROCE_INTEROP=quick or full (make interop-quick, make interop)")
	}
	start := time.Now()
	img, err := Prepare(15 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("guest image ready in %v (downloaded: %v)", img.Prepared.Round(time.Millisecond), img.Downloaded)
	bin := xroceBin(t)
	var guestBin string // xroce with the verbs provider, for cells with verbs
	keep := keepDir(t)
	labs := map[int]*Lab{}
	var mu sync.Mutex
	defer func() {
		killHostProcs()
		mu.Lock()
		defer mu.Unlock()
		for _, l := range labs {
			l.Close()
		}
	}()
	// Interrupted (Ctrl-C, or a timeout's SIGTERM), the guests, namespaces and
	// shares go too: a deferred Close does not run when a signal ends the process.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		s := <-sig
		killHostProcs() // a lib cell's daemon and application
		mu.Lock()
		for _, l := range labs {
			l.Close()
		}
		fmt.Fprintf(os.Stderr, "interop: %v: host processes, guests, namespaces and shares removed\n", s)
		os.Exit(1)
	}()
	var results []result
	cells := matrix(mode == "full")
	if only := os.Getenv("XROCE_INTEROP_ONLY"); only != "" { // e.g. "write_lat,pingpong"
		var keepCells []cell
		for _, c := range matrix(true) {
			for _, w := range strings.Split(only, ",") {
				if strings.Contains(c.String(), w) {
					keepCells = append(keepCells, c)
					break
				}
			}
		}
		cells = keepCells
	}
	if n, _ := strconv.Atoi(os.Getenv("XROCE_INTEROP_REPEAT")); n > 1 { // to chase a rare failure
		cells = slices.Repeat(cells, n)
	}
	libBuilt := false
	for _, c := range cells {
		if c.verbs && guestBin == "" {
			guestBin = verbsBin(t)
		}
		if c.lib && !libBuilt {
			buildLib(t, bin)
			libBuilt = true
		}
	}
	xchecks := map[string]map[bool]string{} // role → xroce client? → its wc and mem lines
	// labFor returns the guest for a netdev MTU, booting it first if there is none.
	labFor := func(mtu int) *Lab {
		mu.Lock()
		lab := labs[mtu]
		mu.Unlock()
		if lab != nil {
			return lab
		}
		lab, err := NewLab(img, mtu)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		labs[mtu] = lab
		mu.Unlock()
		t.Logf("guest with MTU %d booted in %v", mtu, lab.Booted.Round(time.Millisecond))
		if guestBin != "" {
			if err := copyFile(guestBin, filepath.Join(lab.Share, "xroce-verbs")); err != nil {
				t.Fatal(err)
			}
			// It loads libibverbs and lists the devices: naming a missing one
			// must say which there are.
			out, _, err := lab.Guest("cp /share/xroce-verbs /tmp/ && /tmp/xroce-verbs write_bw --provider verbs -d nosuch0")(60 * time.Second)
			if err != nil || !strings.Contains(out, `no such RDMA device "nosuch0"; devices here: rxe0`) {
				t.Fatalf("xroce-verbs in the guest: %v\n%s", err, out)
			}
		}
		return lab
	}
	// afterFailure records the guest's state in r, stops what the cell left
	// running there, and replaces a guest that stopped answering. It returns why
	// the guest was replaced, or "".
	afterFailure := func(lab *Lab, c cell, r *result) string {
		r.err += "\n" + diagnose(lab)
		// A failed cell can leave its guest side running (ibv_rc_pingpong with
		// retry_cnt 7 retransmits forever on rdma_rxe) and slowing the TCG guest
		// for the next cells: stop it.
		lab.Guest("killall -9 ib_write_bw ib_read_bw ib_send_bw ib_atomic_bw ib_write_lat ib_read_lat ib_send_lat ibv_rc_pingpong ibv_uc_pingpong ibv_ud_pingpong rping qperf xroce-verbs 2>/dev/null; true")(10 * time.Second)
		// A guest whose network stopped (it answers neither ping nor ARP while
		// its 9p command channel still works; see README) or whose kernel died
		// is replaced, so one failure does not fail every later cell.
		pingErr := exec.Command("ip", "netns", "exec", lab.NS, "ping", "-c", "2", "-W", "2", lab.GuestIP.String()).Run()
		_, rc, cmdErr := lab.Guest("true")(10 * time.Second)
		why := ""
		switch {
		case cmdErr != nil || rc != 0:
			why = "the guest stopped answering"
		case pingErr != nil:
			why = "the guest's network stalled"
		default:
			return ""
		}
		r.err += "\n" + why + "; its console ends with:\n" + tail(lab.Console(), 2000)
		mu.Lock()
		lab.Close()
		delete(labs, c.mtu)
		mu.Unlock()
		return why
	}
	reruns := 0
	for _, c := range cells {
		lab := labFor(c.mtu)
		r := runCell(t, lab, bin, c, keep)
		if !r.pass {
			if why := afterFailure(lab, c, &r); why != "" {
				// The cell runs once more, on a fresh guest: the table says so,
				// and the first run's error and capture are kept in the log.
				if r.capture != "" {
					first := strings.TrimSuffix(r.capture, ".pcap") + "-first.pcap"
					if os.Rename(r.capture, first) == nil {
						r.capture = first
					}
				}
				t.Logf("%v: %s (capture kept: %s); running it again on a fresh guest", c, r.err, r.capture)
				reruns++
				lab = labFor(c.mtu)
				r = runCell(t, lab, bin, c, keep)
				r.rerun = why
				if !r.pass {
					afterFailure(lab, c, &r)
				}
			}
		}
		status := r.status()
		if !r.pass {
			t.Errorf("%v: %s (capture kept: %s)", c, r.err, r.capture)
		}
		if c.tool == "crosscheck" && r.pass {
			recordXcheck(xchecks, c, r)
		}
		results = append(results, r)
		t.Logf("%-4s %-40s xroce %-18s rxe %-18s (%d xroce frames ICRC-checked)", status, c, r.xroce, r.rxe, r.xroceFrames)
		if r.daemon != "" {
			t.Logf("     xroce daemon after the run: %s", r.daemon)
		}
		if c.flags != "" && c.tool != "pingpong" && r.pass { // both tables, row by row
			t.Logf("xroce's rows:\n%s\nthe guest's rows:\n%s", tableRows(r.xout), tableRows(r.gout))
		}
	}
	compareXchecks(t, xchecks)
	var b strings.Builder
	fmt.Fprintf(&b, "\n| cell | result | xroce | rdma_rxe |\n| --- | --- | --- | --- |\n")
	passed := 0
	for _, r := range results {
		if r.pass {
			passed++
		}
		fmt.Fprintf(&b, "| %v | %s | %s | %s |\n", r.cell, r.status(), r.xroce, r.rxe)
	}
	fmt.Fprintf(&b, "\n%d of %d cells passed in %v, %s; %d run again on a fresh guest\n", passed, len(results),
		time.Since(start).Round(time.Second), time.Now().UTC().Format("2006-01-02"), reruns)
	// A failed cell's cause goes last as well, where a CI log's tail shows it.
	for _, r := range results {
		if !r.pass {
			fmt.Fprintf(&b, "\nFAIL %v: %s\n", r.cell, headLines(r.err, 40))
		}
	}
	t.Log(b.String())
	_ = os.WriteFile(filepath.Join(keep, "table-"+mode+".md"), []byte(b.String()), 0o644)
}

// guestDiag prints the guest's side of a failed cell: its netdev's counters and
// bytes in flight to the device, rdma_rxe's hw_counters and QPs, whether softirqs still run (two samples a
// second apart) and who holds the CPU, and the kernel's last messages.
const guestDiag = `cat /proc/net/dev; cd /sys/class/infiniband/rxe0/ports/1/hw_counters && grep . * | tr '\n' ' '; echo;
rdma res show qp link rxe0; grep -E 'MemFree|^Slab' /proc/meminfo; cd /sys/class/net/eth0 && grep . queues/tx-0/byte_queue_limits/inflight queues/tx-0/tx_timeout statistics/tx_dropped;
grep -E 'virtio' /proc/interrupts; grep -E 'CPU|NET_RX|NET_TX|TASKLET|TIMER' /proc/softirqs; sleep 1;
grep -E 'NET_RX|NET_TX|TASKLET|TIMER' /proc/softirqs; top -b -n 1 | head -n 14; dmesg | tail -n 25`

// diagnose collects what tells a failed cell's cause apart: the guest's state
// (through the 9p channel, which can outlive its network) and the bridge's.
func diagnose(lab *Lab) string {
	g, _, err := lab.Guest(guestDiag)(20 * time.Second)
	if err != nil {
		g += "(" + err.Error() + ")"
	}
	h, _ := exec.Command("ip", "netns", "exec", lab.NS, "sh", "-c", "ip -s link; tc -s qdisc").CombinedOutput()
	return "the guest's state:\n" + g + "\nthe namespace's links:\n" + string(h)
}

var xcLine = regexp.MustCompile(`(?m)^(wc|mem) (client|server) .*$`)

// recordXcheck keeps each side's completion and memory lines of a cross-check
// cell, by role and by which side (xroce's engine or libibverbs on rdma_rxe) had it.
func recordXcheck(m map[string]map[bool]string, c cell, r result) {
	for _, out := range []struct {
		s      string
		engine bool
	}{{r.xout, true}, {r.gout, false}} {
		lines := xcLine.FindAllString(out.s, -1)
		if len(lines) == 0 {
			continue
		}
		role := strings.Fields(lines[0])[1] + fmt.Sprintf(" mtu%d", c.mtu)
		if m[role] == nil {
			m[role] = map[bool]string{}
		}
		m[role][out.engine] = strings.Join(lines, "\n")
	}
}

// compareXchecks asserts that each role of the cross-check, played once by the
// engine and once through libibverbs on rdma_rxe, reported identical completions
// (status, opcode, byte_len, imm, in order) and identical memory.
func compareXchecks(t *testing.T, m map[string]map[bool]string) {
	for role, by := range m {
		e, v := by[true], by[false]
		if e == "" || v == "" {
			t.Logf("cross-check %s: only one provider ran this role", role)
			continue
		}
		if e != v {
			el, vl := strings.Split(e, "\n"), strings.Split(v, "\n")
			for i := range min(len(el), len(vl)) {
				if el[i] != vl[i] {
					t.Errorf("cross-check %s: the engine and rdma_rxe differ at line %d:\n engine: %s\n rxe:    %s", role, i, el[i], vl[i])
					break
				}
			}
			if len(el) != len(vl) {
				t.Errorf("cross-check %s: %d lines from the engine, %d from rdma_rxe", role, len(el), len(vl))
			}
			continue
		}
		t.Logf("cross-check %s: engine and rdma_rxe agree on %d lines (completions and memory)", role, strings.Count(e, "\n")+1)
	}
}

// headLines is text's first n lines.
func headLines(text string, n int) string {
	lines := strings.SplitN(text, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "…")
	}
	return strings.Join(lines, "\n")
}
