package interop

// The lib cells: Debian's unmodified perftest and ibv_rc_pingpong on the host, on
// the xroce device through the verbs library (`xroce daemon -d IFACE` on the lab's
// veth, the application started with `xroce run --`, which preloads
// bin/lib/libxroce.so), against the same programs on rdma_rxe in the guest, in both
// roles. Each cell has its own daemon and run directory; the daemon and the
// application are killed on every way out, an interrupted run included.

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/xroce/xroce/test/testnet"
)

// libTools are the host programs the lib cells run, unmodified, from Debian's
// perftest and ibverbs-utils.
var libTools = []string{"ib_write_bw", "ib_read_bw", "ib_send_bw", "ib_atomic_bw", "ib_write_lat", "ib_read_lat",
	"ib_send_lat", "ibv_rc_pingpong", "ibv_uc_pingpong", "ibv_ud_pingpong"}

// libMatrix is the lib cells, at netdev MTU 1500 over AF_XDP, each in both
// directions but one: the quick set (ibv_rc_pingpong -c and ib_write_bw), or
// every tool with its defaults and a few with -a, -q 2, --use_old_post_send,
// --use-srq, and ibv_rc_pingpong with -e -N (completion channel, ibv_wr_* send
// path).
func libMatrix(full bool) []cell {
	var cells []cell
	add := func(c cell) {
		c.mtu, c.link, c.lib = 1500, "xdp", true
		for _, dir := range []bool{true, false} {
			c.xroceClient = dir
			cells = append(cells, c)
		}
	}
	add(cell{tool: "pingpong", size: 4096})
	add(cell{tool: "write_bw", size: 65536})
	add(cell{tool: "write_bw", size: 65536, flags: "-R"}) // both connections by the RDMA CM
	if !full {
		return cells
	}
	add(cell{tool: "rping", size: 64})
	add(cell{tool: "rping", size: 64, flags: "-q"}) // the host's QP application-managed (rdma_init_qp_attr); the guest's rping as in the cell before
	add(cell{tool: "qperf"})
	add(cell{tool: "read_bw", size: 65536, flags: "-R"})
	add(cell{tool: "send_bw", size: 65536, flags: "-R"})
	add(cell{tool: "write_lat", size: 64, flags: "-R"})
	add(cell{tool: "pingpong", size: 4096, flags: "-e -N"})
	add(cell{tool: "uc_pingpong", size: 4096})
	add(cell{tool: "ud_pingpong", size: 984}) // path MTU 1024 less ibv_ud_pingpong's 40-byte GRH area
	add(cell{tool: "read_bw", size: 65536})
	add(cell{tool: "send_bw", size: 65536})
	add(cell{tool: "atomic_bw", size: 8})
	for _, tool := range []string{"write_lat", "read_lat", "send_lat"} {
		add(cell{tool: tool, size: 64})
	}
	add(cell{tool: "write_bw", flags: "-a"})
	// read_bw -a in both roles: with xroce the reader, rdma_rxe answers READs of up
	// to 8 MiB; a response the TCG guest loses costs a re-request to the end of one
	// READ segment (docs/congestion.md), where it once cost the rest of the READ and
	// rxe ran out of retries in 5 of 6 runs.
	add(cell{tool: "read_bw", flags: "-a"})
	add(cell{tool: "write_bw", size: 65536, flags: "-q 2"})
	add(cell{tool: "send_bw", size: 65536, flags: "-q 2"})
	add(cell{tool: "send_bw", size: 65536, flags: "--use-srq"}) // both sides' receives from a shared receive queue
	add(cell{tool: "send_bw", size: 65536, flags: "--use_old_post_send"})
	add(cell{tool: "write_lat", size: 64, flags: "--use_old_post_send"})
	return cells
}

// buildLib builds the verbs library where `xroce run` looks for it, beside bin
// (make libverbs), after checking that the host has the programs the lib cells
// run.
func buildLib(t *testing.T, bin string) {
	t.Helper()
	for _, tool := range libTools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the libxroce cells run Debian's %s on the host: apt-get install -y perftest ibverbs-utils (.ci/run installs them)", tool)
		}
	}
	out, err := exec.Command("make", "-s", "-C", "../..", "libverbs", "LIBXROCE="+libPath(bin)).CombinedOutput()
	if err != nil {
		t.Fatalf("make libverbs (needs gcc and libibverbs-dev): %v\n%s", err, out)
	}
}

func libPath(bin string) string { return filepath.Join(filepath.Dir(bin), "lib", "libxroce.so") }

// hostProcs are the host processes the cells are running (a lib cell's daemon
// and application, every cell's dumpcap) and the daemons' run directories, so
// that an interrupted run removes them too.
var hostProcs = struct {
	sync.Mutex
	m    map[*os.Process]bool
	dirs map[string]bool
}{m: map[*os.Process]bool{}, dirs: map[string]bool{}}

// trackProc adds p to hostProcs until it has been waited for (untrack).
func trackProc(p *os.Process) (untrack func()) {
	hostProcs.Lock()
	defer hostProcs.Unlock()
	hostProcs.m[p] = true
	return func() {
		hostProcs.Lock()
		defer hostProcs.Unlock()
		delete(hostProcs.m, p)
	}
}

// killHostProcs kills every host process a cell is running and removes the
// daemons' run directories.
func killHostProcs() {
	hostProcs.Lock()
	defer hostProcs.Unlock()
	for p := range hostProcs.m {
		_ = p.Kill()
	}
	for d := range hostProcs.dirs {
		os.RemoveAll(d)
	}
}

// hostProc is a process a lib cell started on the host. `ip netns exec`, `xroce
// run` and perftest exec one another, so the process is the program itself and
// killing it by its PID leaves nothing behind.
type hostProc struct {
	cmd  *exec.Cmd
	out  testnet.Output
	done chan struct{}
	err  error
}

// startHost starts args with env added to the test's environment. The process
// gets SIGKILL if the test process dies without cleaning up (a panic, a -timeout).
func startHost(env []string, args ...string) (*hostProc, error) {
	p := &hostProc{done: make(chan struct{})}
	p.cmd = exec.Command(args[0], args[1:]...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	untrack := trackProc(p.cmd.Process)
	go func() {
		p.err = p.cmd.Wait()
		untrack()
		close(p.done)
	}()
	return p, nil
}

func (p *hostProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits up to limit for the process to exit, and kills it after that.
func (p *hostProc) wait(limit time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(limit):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s did not exit within %v: killed", strings.Join(p.cmd.Args, " "), limit)
	}
}

// libDaemon is `xroce daemon` on the lab's veth with a run directory of its own.
type libDaemon struct {
	*hostProc
	dir      string
	stopOnce sync.Once
	log      string // once stopped
	stopErr  error
}

func startLibDaemon(lab *Lab, bin, link string) (*libDaemon, error) {
	dir, err := os.MkdirTemp("", "xroce-interop-run-")
	if err != nil {
		return nil, err
	}
	hostProcs.Lock()
	hostProcs.dirs[dir] = true
	hostProcs.Unlock()
	p, err := startHost([]string{"XROCE_RUN_DIR=" + dir}, "ip", "netns", "exec", lab.NS, bin, "daemon", "-d", lab.XIf, "--link", link)
	if err != nil {
		os.RemoveAll(dir)
		hostProcs.Lock()
		delete(hostProcs.dirs, dir)
		hostProcs.Unlock()
		return nil, fmt.Errorf("starting xroce daemon: %w", err)
	}
	d := &libDaemon{hostProc: p, dir: dir}
	deadline := time.Now().Add(15 * time.Second)
	for {
		if socks, _ := filepath.Glob(filepath.Join(dir, "*.sock")); len(socks) == 1 {
			return d, nil
		}
		if d.exited() || time.Now().After(deadline) {
			log, err := d.stop()
			return nil, fmt.Errorf("xroce daemon -d %s --link %s: no socket in its run directory after 15 s (%v):\n%s", lab.XIf, link, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop ends the daemon with SIGTERM (SIGKILL after 10 s) and removes its run
// directory; it returns the daemon's log and what went wrong: an exit before
// stop, an exit status other than SIGTERM's 143, no exit within 10 s. Later
// calls return the same.
func (d *libDaemon) stop() (string, error) {
	d.stopOnce.Do(func() {
		if d.exited() {
			d.stopErr = fmt.Errorf("the daemon exited before it was stopped: %v", d.err)
		} else {
			// It exits with 143 (128 + SIGTERM, as a shell reports it).
			_ = d.cmd.Process.Signal(syscall.SIGTERM)
			var ee *exec.ExitError
			if err := d.wait(10 * time.Second); err != nil && (!errors.As(err, &ee) || ee.ExitCode() != 143) {
				d.stopErr = fmt.Errorf("the daemon, stopped with SIGTERM: %w", err)
			}
		}
		os.RemoveAll(d.dir)
		hostProcs.Lock()
		delete(hostProcs.dirs, d.dir)
		hostProcs.Unlock()
		d.log = d.out.String()
	})
	return d.log, d.stopErr
}

// status is `xroce daemon status` for the daemon's run directory.
func (d *libDaemon) status(bin string) (string, error) {
	cmd := exec.Command(bin, "daemon", "status")
	cmd.Env = append(os.Environ(), "XROCE_RUN_DIR="+d.dir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// libRun is what one lib cell's run produced.
type libRun struct {
	xout, gout string // the host application's output, the guest's
	xerr, gerr error
	grc        int
	setup      error  // the daemon or the application did not start
	status     string // `xroce daemon status` once the application had exited
	statusErr  error
	noPorts    int64 // growth of the namespace's UdpNoPorts over the run
	noPortsErr error
	daemonLog  string
	daemonErr  error
	counters   string // the status's non-zero counters, on one line
	raced      int    // client runs (the host's or the guest's) lost to perftest 4.5-0.17's race (perftestRaced)
}

// perftestRaceRuns bounds the runs of a client cell that perftest's race ends:
// later perftest's own client tries 10 times (max_retries in
// rdma_cm_client_connection), and an ib_write_lat client lost the race in 4 of 8
// runs of one series here.
const perftestRaceRuns = 10

var perftestRaceRe = regexp.MustCompile(`Event: RDMA_CM_EVENT_REJECTED; error: 8\.`)

// perftestRaced says whether a perftest -R client failed on the race of Debian's
// perftest 4.5-0.17 (rdma_cm_client_connection in src/perftest_communication.c):
// after the exchange on its first (out-of-band) connection, the client's REQ for
// the data QP may reach the server before the server listens again, and the
// server's CM rejects it with reason 8, invalid service ID (IBTA Vol 1 12.6.7.2),
// as it must. The client's retry then uses the CM IDs and the node array that
// rdma_cm_destroy_cma just freed, so it fails or crashes; later perftest
// allocates them again before retrying. Against a server in the slow TCG guest an
// xroce client wins this race now and then, as would any fast client.
func (c cell) perftestRaced(out string) bool {
	return c.rdmaCM() && c.perftestBinary() != "" && perftestRaceRe.MatchString(out)
}

// perftestBinary is the perftest program a cell runs, or "".
func (c cell) perftestBinary() string {
	switch c.tool {
	case "pingpong", "rping", "qperf", "crosscheck":
		return ""
	}
	return "ib_" + c.tool
}

// guestListening waits (up to 30 s) until a server in the guest listens on
// perftest's and ibv_rc_pingpong's port.
const guestListening = "i=0; while ! netstat -ltn | grep -q :18515 && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done"

// runLibSides runs a lib cell's two sides: the guest's program on rdma_rxe and
// the same program on the host through `xroce run`, on a daemon started for the
// cell and stopped afterwards (also when anything fails).
func runLibSides(lab *Lab, bin string, c cell) (r libRun) {
	d, err := startLibDaemon(lab, bin, c.link)
	if err != nil {
		r.setup = err
		return r
	}
	defer func() { r.daemonLog, r.daemonErr = d.stop() }()
	before, noPortsErr := udpNoPorts(lab.NS)
	env := []string{"XROCE_RUN_DIR=" + d.dir, "XROCE_LIB=" + libPath(bin)}
	host := append([]string{"ip", "netns", "exec", lab.NS, bin, "run", "--"}, c.libHostArgs()...)
	limit := 2 * time.Minute
	if c.all() {
		limit = 5 * time.Minute
	}
	if c.xroceClient {
		for attempt := 1; ; attempt++ {
			wait := lab.Guest(c.rxeCommand(true, lab.XIP.String()))
			lab.Guest(c.guestListening())(40 * time.Second)
			app, err := startHost(env, c.withPeer(host, lab.GuestIP.String())...)
			if err != nil {
				r.setup = err
				return r
			}
			r.xerr = app.wait(limit)
			r.xout = app.out.String()
			if r.xerr != nil && attempt < perftestRaceRuns && c.perftestRaced(r.xout) {
				// The guest's server still waits for the data connection: it must be
				// gone before the next run, or the next client connects to it.
				// (busybox has killall, not pkill.)
				kout, krc, kerr := lab.Guest("killall -9 " + c.perftestBinary())(10 * time.Second)
				r.gout, r.grc, r.gerr = wait(10 * time.Second)
				if kerr != nil || krc != 0 || r.gerr != nil {
					r.xout += fmt.Sprintf("\n(after perftest's race, killing the guest's server: rc %d %v %s; the server: %v)", krc, kerr, kout, r.gerr)
					break
				}
				r.raced++
				continue
			}
			r.gout, r.grc, r.gerr = wait(limit)
			break
		}
	} else {
		for attempt := 1; ; attempt++ {
			app, err := startHost(env, host...)
			if err != nil {
				r.setup = err
				return r
			}
			for deadline := time.Now().Add(30 * time.Second); !app.exited() && time.Now().Before(deadline) && !c.hostListening(lab.NS, d, bin); {
				time.Sleep(100 * time.Millisecond)
			}
			r.gout, r.grc, r.gerr = lab.Guest(c.rxeCommand(false, lab.XIP.String()))(limit)
			raced := r.grc != 0 && attempt < perftestRaceRuns && c.perftestRaced(r.gout)
			if c.tool == "qperf" || raced {
				// qperf's server never ends by itself; after perftest's race the
				// host's server still waits for the data connection.
				_ = app.cmd.Process.Signal(syscall.SIGTERM)
			}
			r.xerr = app.wait(30 * time.Second) // its client is done
			if c.tool == "qperf" && app.cmd.ProcessState != nil && !app.cmd.ProcessState.Exited() {
				r.xerr = nil // ended by the SIGTERM above
			}
			r.xout = app.out.String()
			if !raced {
				break
			}
			r.raced++
		}
	}
	// The application's session ends with its process; the daemon then destroys
	// its objects.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		r.status, r.statusErr = d.status(bin)
		if r.statusErr != nil || strings.Contains(r.status, "  clients: 0\n") || time.Now().After(deadline) {
			break
		}
	}
	r.counters = statusCounters(r.status)
	after, err := udpNoPorts(lab.NS)
	r.noPorts, r.noPortsErr = after-before, errors.Join(noPortsErr, err)
	return r
}

// libHostArgs is the host program of a lib cell: perftest or ibv_rc_pingpong, or
// rdmacm-utils' rping (its stdout line-buffered, so that its DISCONNECT EVENT line
// on stderr cannot land inside a data line); a client adds the guest's address.
func (c cell) libHostArgs() []string {
	if c.tool == "qperf" {
		if c.xroceClient {
			return append([]string{"qperf"}, qperfClientOpts...)
		}
		return []string{"qperf"}
	}
	if c.tool != "rping" {
		return c.perftestArgs("xroce0")
	}
	args := append([]string{"stdbuf", "-oL", "rping", "-v", "-S", fmt.Sprint(c.size), "-C", fmt.Sprint(rpingCount)}, strings.Fields(c.flags)...)
	if c.xroceClient {
		return append(args, "-c", "-V", "-a")
	}
	return append(args, "-s")
}

// withPeer adds the server's address to a client's command line: last, or for
// qperf before its test names.
func (c cell) withPeer(args []string, peer string) []string {
	if c.tool == "qperf" {
		return append(append(args[:len(args):len(args)], peer), qperfTests...)
	}
	return append(args, peer)
}

// hostListening says whether the host's server is ready: a process in the
// namespace listens on TCP port 18515, or with -R (no TCP) the application has
// opened the device (a client in the daemon's status) and a moment passed for its
// rdma_listen.
func (c cell) hostListening(ns string, d *libDaemon, bin string) bool {
	if !c.rdmaCM() && c.tool != "rping" {
		port := "18515"
		if c.tool == "qperf" {
			port = fmt.Sprint(qperfPort)
		}
		out, _ := exec.Command("ip", "netns", "exec", ns, "ss", "-Hltn", "sport = :"+port).Output()
		return strings.TrimSpace(string(out)) != ""
	}
	st, err := d.status(bin)
	if err != nil || strings.Contains(st, "  clients: 0\n") {
		return false
	}
	time.Sleep(500 * time.Millisecond)
	return true
}

// rdmaCM says whether the cell connects with the RDMA CM (perftest's -R).
func (c cell) rdmaCM() bool { return slices.Contains(strings.Fields(c.flags), "-R") }

// guestListening is the guest's shell loop that waits (up to 30 s) until its
// server listens: on TCP port 18515, or, for rping and with -R, on an RDMA CM ID
// in state LISTEN (`rdma resource show cm_id`).
func (c cell) guestListening() string {
	if c.tool == "qperf" {
		return fmt.Sprintf("i=0; while ! netstat -ltn | grep -q :%d && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done", qperfPort)
	}
	if c.rdmaCM() || c.tool == "rping" {
		return "i=0; while ! rdma resource show cm_id | grep -q LISTEN && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done; sleep 0.2"
	}
	return guestListening
}

// udpNoPorts is the namespace's UDP NoPorts counter (/proc/net/snmp): datagrams
// the kernel's UDP stack received for a port nobody listens on. RoCE frames that
// the XDP program hands to the daemon never reach it.
func udpNoPorts(ns string) (int64, error) {
	out, err := exec.Command("ip", "netns", "exec", ns, "cat", "/proc/net/snmp").Output()
	if err != nil {
		return 0, fmt.Errorf("/proc/net/snmp in %s: %v", ns, err)
	}
	var names []string
	for sc := bufio.NewScanner(strings.NewReader(string(out))); sc.Scan(); {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		if i := slices.Index(names, "NoPorts"); i > 0 && i < len(f) {
			return strconv.ParseInt(f[i], 10, 64)
		}
	}
	return 0, fmt.Errorf("no Udp NoPorts in /proc/net/snmp of %s", ns)
}

// statusCounters is the counters section of `xroce daemon status` on one line.
func statusCounters(status string) string {
	_, counters, ok := strings.Cut(status, "  counters:\n")
	if !ok {
		return ""
	}
	return strings.Join(strings.Fields(counters), " ")
}

var (
	couldntRe = regexp.MustCompile(`(?m)^.*Couldn't.*$`)
	libMsgRe  = regexp.MustCompile(`(?m)^xroce: .*$`)
	counterRe = regexp.MustCompile(`(?m)^    (sent_pkts|rcvd_pkts) +[1-9]\d*$`)
)

// checkLib checks a lib cell beyond the exit statuses: no side printed a
// "Couldn't" line and the library printed no message; the result lines are
// exact (checkLibTables); the daemon's status, once the application had exited,
// lists no client, the device on the lab's veth and packets sent and received;
// every RoCE frame for xroce reached the daemon (the namespace's UdpNoPorts did
// not grow); the daemon stopped cleanly on SIGTERM.
func (c cell) checkLib(lab *Lab, r libRun) error {
	var errs []error
	for _, side := range []struct{ who, out string }{{"host", r.xout}, {"guest", r.gout}} {
		if m := couldntRe.FindString(side.out); m != "" {
			errs = append(errs, fmt.Errorf("%s: %q", side.who, m))
		}
	}
	if m := libMsgRe.FindString(r.xout); m != "" {
		errs = append(errs, fmt.Errorf("the library on the host: %q", m))
	}
	check := c.checkLibTables(lab, r.xout, r.gout)
	switch c.tool {
	case "rping":
		check = c.checkRping(r.xout, r.gout)
	case "qperf":
		check = c.checkQperf(r.xout, r.gout)
	}
	if check != nil {
		errs = append(errs, check)
	}
	switch {
	case r.statusErr != nil:
		errs = append(errs, fmt.Errorf("xroce daemon status: %v\n%s", r.statusErr, r.status))
	case !strings.Contains(r.status, "xroce0\tnetdev "+lab.XIf+"\t") || !strings.Contains(r.status, "\tport 1 PORT_ACTIVE\t") ||
		!strings.Contains(r.status, "\n  clients: 0\n") || len(counterRe.FindAllString(r.status, -1)) != 2:
		errs = append(errs, fmt.Errorf("xroce daemon status after the run: want xroce0 on %s, PORT_ACTIVE, no clients, packets sent and received:\n%s", lab.XIf, r.status))
	}
	switch {
	case r.noPortsErr != nil:
		errs = append(errs, r.noPortsErr)
	case r.noPorts != 0:
		errs = append(errs, fmt.Errorf("%d UDP datagrams reached the kernel's stack in the namespace instead of the daemon (UdpNoPorts grew by %d)", r.noPorts, r.noPorts))
	}
	if r.daemonErr != nil || !strings.Contains(r.daemonLog, "xroce0 stopped") {
		errs = append(errs, fmt.Errorf("xroce daemon: %v\n%s", r.daemonErr, tail(r.daemonLog, 2000)))
	}
	return errors.Join(errs...)
}

// checkLibTables checks both sides' result lines. ibv_rc_pingpong: "N bytes in",
// N = 2 × iterations × size, "N iters in ... usec/iter" and the peer's GID as the
// remote address. perftest: the device and the number of QPs in the header; the
// client's table one row per size (-a: 2 to 2^23 bytes), each with the cell's
// size and iterations (bandwidth tests: iterations × QPs); the server's the last
// row for write_bw, read_bw and atomic_bw (the client's results), every row for
// send_bw, write_lat and send_lat, none for read_lat.
func (c cell) checkLibTables(lab *Lab, xout, gout string) error {
	type side struct {
		who, out, dev, peer string
		client              bool
	}
	sides := []side{{"host", xout, "xroce0", lab.GuestIP.String(), c.xroceClient}, {"guest", gout, "rxe0", lab.XIP.String(), !c.xroceClient}}
	var errs []error
	if strings.HasSuffix(c.tool, "pingpong") {
		for _, s := range sides {
			for _, re := range []string{
				fmt.Sprintf(`(?m)^%d bytes in \d+\.\d+ seconds = \d+\.\d+ Mbit/sec$`, 2*c.iters()*c.size),
				fmt.Sprintf(`(?m)^%d iters in \d+\.\d+ seconds = \d+\.\d+ usec/iter$`, c.iters()),
				`(?m)^  remote address: LID 0x0000, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}, GID ::ffff:` + regexp.QuoteMeta(s.peer) + `$`,
			} {
				if !regexp.MustCompile(re).MatchString(s.out) {
					errs = append(errs, fmt.Errorf("%s: no line matching %s:\n%s", s.who, re, tail(s.out, 2000)))
				}
			}
		}
		return errors.Join(errs...)
	}
	lat := strings.HasSuffix(c.tool, "_lat")
	re, iters := bwRe, c.iters()
	if lat {
		re = latRe
	} else {
		iters *= c.qps()
	}
	sizes := []int{c.size}
	if c.all() {
		sizes = nil
		for i := 1; i < 24; i++ {
			sizes = append(sizes, 1<<i)
		}
	}
	for _, s := range sides {
		want := sizes
		if !s.client {
			switch c.tool {
			case "write_bw", "read_bw", "atomic_bw":
				want = sizes[len(sizes)-1:]
			case "read_lat":
				want = nil
			}
		}
		role := "server"
		if s.client {
			role = "client"
		}
		if err := checkRows(s.who+" ("+role+")", s.out, re, want, iters); err != nil {
			errs = append(errs, err)
		}
		for _, h := range []string{"Device         : " + s.dev + "\n", fmt.Sprintf(" Number of qps   : %d\t\t", c.qps())} {
			if !strings.Contains(s.out, h) {
				errs = append(errs, fmt.Errorf("%s: no %q in its header:\n%s", s.who, h, tail(s.out, 3000)))
			}
		}
	}
	return errors.Join(errs...)
}
