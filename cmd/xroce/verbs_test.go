package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xroce/xroce/test/testnet"
)

// verbsPair is two namespaces joined by a veth, an xroce daemon in each (run
// directories dirA and dirB), for unmodified verbs applications on both sides.
type verbsPair struct {
	n            *testnet.Net
	dirA, dirB   string
	stopA, stopB func() (string, error) // stop the daemon, returning its log
}

func newVerbsPair(t *testing.T) *verbsPair {
	t.Helper()
	needRoot(t)
	libxroce(t)
	if _, err := os.Stat("/usr/bin/ibv_rc_pingpong"); err != nil {
		t.Skip("no ibv_rc_pingpong: apt-get install ibverbs-utils (.ci/run installs it)")
	}
	p := &verbsPair{n: testnet.New(t, testnet.Options{MTU: 1500}), dirA: t.TempDir(), dirB: t.TempDir()}
	_, p.stopA = startDaemon(t, p.n.NsA, p.n.IfA, p.dirA)
	_, p.stopB = startDaemon(t, p.n.NsB, p.n.IfB, p.dirB)
	return p
}

// app starts `xroce run -- args` in namespace ns with run directory dir; ip netns
// exec and xroce run exec, so the process is the application itself.
func app(t *testing.T, ns, dir string, args ...string) (*exec.Cmd, *testnet.Output, <-chan error) {
	t.Helper()
	var out testnet.Output
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, bin, "run", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "XROCE_RUN_DIR="+dir)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done, exited := make(chan error, 1), make(chan struct{})
	go func() {
		done <- cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	return cmd, &out, done
}

// server starts a server application in ns and waits until it listens on its
// TCP port (-p, else perftest's and rc_pingpong's 18515): on a loaded machine
// an application can take longer than any fixed pause to get there.
func server(t *testing.T, ns, dir string, args ...string) (*exec.Cmd, *testnet.Output, <-chan error) {
	t.Helper()
	port := "18515"
	for i, a := range args[:len(args)-1] {
		if a == "-p" {
			port = args[i+1]
		}
	}
	cmd, out, done := app(t, ns, dir, args...)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ss, _ := exec.Command("ip", "netns", "exec", ns, "ss", "-Hltn", "sport = :"+port).Output()
		if len(strings.TrimSpace(string(ss))) > 0 {
			return cmd, out, done
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen on port %s within 15 s:\n%s", args[0], port, out.String())
		}
	}
}

func wait(t *testing.T, what string, done <-chan error, out *testnet.Output, d time.Duration) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("%s did not end within %v:\n%s", what, d, out.String())
		return nil
	}
}

func status(t *testing.T, dir string) string {
	t.Helper()
	cmd := exec.Command(bin, "daemon", "status")
	cmd.Env = append(os.Environ(), "XROCE_RUN_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("xroce daemon status: %v\n%s", err, out)
	}
	return string(out)
}

// TestVerbsRCPingpong: Debian's unmodified ibv_rc_pingpong with its data check
// (-c) runs between two xroce daemons, polling (4 KiB messages), sleeping on
// completion-channel events (-e, 64-byte messages), and posting its sends with
// the ibv_wr_* API (-N: ibv_create_qp_ex with IBV_QP_EX_WITH_SEND,
// ibv_qp_to_qp_ex, wr_start, wr_send, wr_set_sge, wr_complete).
func TestVerbsRCPingpong(t *testing.T) {
	runPingpongs(t, newVerbsPair(t), "ibv_rc_pingpong", 18600,
		[]string{"-c", "-n", "100", "-s", "4096"},
		[]string{"-e", "-c", "-n", "100", "-s", "64"},
		[]string{"-N", "-c", "-n", "100", "-s", "4096"}) // ibv_create_qp_ex and ibv_wr_send
}

// TestVerbsKill: kill -9 of an application mid-run. Its daemon destroys its
// objects and keeps serving; the peer application sees retry-exceeded.
func TestVerbsKill(t *testing.T) {
	p := newVerbsPair(t)
	pp := []string{"ibv_rc_pingpong", "-g", "1", "-p", "18610", "-n", "100000000", "-s", "65536"}
	_, sout, sdone := server(t, p.n.NsA, p.dirA, pp...)
	client, cout, cdone := app(t, p.n.NsB, p.dirB, append(pp, p.n.IPA.String())...)
	// Running: the client's session owns a PD, an MR, a CQ and a QP.
	re := regexp.MustCompile(`pid (\d+) \(uid 0, since [0-9:]+\): 1 PD, 1 MR, 1 CQ, 1 QP`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := re.FindStringSubmatch(status(t, p.dirB))
		if m != nil && atoi(m[1]) == client.Process.Pid {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the client's objects never showed in status:\n%s\nclient:\n%s", status(t, p.dirB), cout.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // mid-run
	if err := client.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-cdone
	// A send of the server's that the client had not acknowledged exhausts its
	// retries (timeout 14: 67 ms, retry_cnt 7); a server whose last send was
	// acknowledged waits for a receive for ever, as with an HCA (rc_pingpong sets
	// no timeout), and is killed here.
	select {
	case serr := <-sdone:
		var ee *exec.ExitError
		if !errors.As(serr, &ee) || !strings.Contains(sout.String(), "transport retry counter exceeded (12)") {
			t.Errorf("server after the client's kill -9: %v\n%s", serr, sout.String())
		}
	case <-time.After(3 * time.Second):
		t.Logf("the server waits for a receive (its last send was acknowledged before the kill)")
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		st := status(t, p.dirB)
		if strings.Contains(st, "clients: 0\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the killed client's session is still listed:\n%s", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The daemon keeps serving: a fresh pair of applications runs.
	pp = []string{"ibv_rc_pingpong", "-g", "1", "-p", "18611", "-c", "-n", "20", "-s", "512"}
	_, sout, sdone = server(t, p.n.NsA, p.dirA, pp...)
	_, cout, cdone = app(t, p.n.NsB, p.dirB, append(pp, p.n.IPA.String())...)
	if err := wait(t, "client", cdone, cout, 20*time.Second); err != nil {
		t.Errorf("client after the kill: %v\n%s", err, cout.String())
	}
	if err := wait(t, "server", sdone, sout, 10*time.Second); err != nil {
		t.Errorf("server after the kill: %v\n%s", err, sout.String())
	}
	// A daemon that dies is named within seconds, not waited on for ever.
	_, sout, sdone = server(t, p.n.NsA, p.dirA, "ibv_rc_pingpong", "-g", "1", "-p", "18612", "-n", "100000000")
	_, cout, cdone = app(t, p.n.NsB, p.dirB, "ibv_rc_pingpong", "-g", "1", "-p", "18612", "-n", "100000000", p.n.IPA.String())
	time.Sleep(time.Second)
	if log, _ := p.stopB(); !strings.Contains(log, "stopped") {
		t.Errorf("daemon B log:\n%s", log)
	}
	if err := wait(t, "client without its daemon", cdone, cout, 10*time.Second); err == nil ||
		!strings.Contains(cout.String(), "xroce: the daemon at "+p.dirB+"/") {
		t.Errorf("client after its daemon stopped: %v\n%s", err, cout.String())
	}
	_, _ = sout, sdone // the server may wait for a receive for ever: the cleanup kills it
}

// TestVerbsPerftest: Debian's perftest (4.5) between two daemons: ib_write_bw
// and ib_send_bw with --use_old_post_send (ibv_post_send), ib_write_bw,
// ib_send_bw, ib_read_bw and ib_atomic_bw on their default path, ib_write_bw
// with two QPs (-q 2) and over every size (-a). Perftest 4.5 takes its
// ibv_wr_* path (ibv_create_qp_ex with send_ops_flags, ibv_qp_to_qp_ex) only on
// the devices its verify_params_with_device_context lists by vendor_part_id
// (ConnectX-4 and later, BlueField, EFA) and prints "ibv_wr* API     : OFF" for
// any other, rdma_rxe and xroce0 included; the default runs assert that state.
// The wr_* builder itself is run by TestVerbsRCPingpong (-N) and
// TestVerbsPerftestWrAPI.
func TestVerbsPerftest(t *testing.T) {
	for _, tool := range []string{"ib_write_bw", "ib_send_bw", "ib_read_bw", "ib_atomic_bw"} {
		if _, err := os.Stat("/usr/bin/" + tool); err != nil {
			t.Skipf("no /usr/bin/%s: apt-get install perftest (.ci/run installs it)", tool)
		}
	}
	// Every size -a runs: 2 B to 8 MiB.
	var all []string
	for n := 2; n <= 8<<20; n *= 2 {
		all = append(all, fmt.Sprint(n))
	}
	p := newVerbsPair(t)
	for i, run := range []struct {
		args  []string
		sizes []string // the result lines' sizes, in order
		iters string   // the result lines' iterations (both sides)
	}{
		{[]string{"ib_write_bw", "-n", "200", "-s", "65536", "--use_old_post_send"}, []string{"65536"}, "200"},
		{[]string{"ib_send_bw", "-n", "200", "-s", "65536", "--use_old_post_send"}, []string{"65536"}, "200"},
		{[]string{"ib_write_bw", "-n", "200", "-s", "65536"}, []string{"65536"}, "200"},
		{[]string{"ib_send_bw", "-n", "200", "-s", "65536"}, []string{"65536"}, "200"},
		{[]string{"ib_send_bw", "-n", "200", "-s", "65536", "--use-srq"}, []string{"65536"}, "200"},
		{[]string{"ib_send_bw", "-n", "200", "-s", "4096", "-q", "2", "--use-srq"}, []string{"4096"}, "400"}, // one SRQ for two QPs
		{[]string{"ib_read_bw", "-n", "200", "-s", "65536"}, []string{"65536"}, "200"},
		{[]string{"ib_atomic_bw", "-n", "200"}, []string{"8"}, "200"},
		{[]string{"ib_write_bw", "-n", "200", "-s", "4096", "-q", "2"}, []string{"4096"}, "400"}, // two QPs, 200 each
		{[]string{"ib_write_bw", "-a", "-n", "20"}, all, "20"},
	} {
		args := append(run.args, "-x", "1", "-F", "-p", fmt.Sprint(18620+i))
		_, sout, sdone := server(t, p.n.NsA, p.dirA, args...)
		_, cout, cdone := app(t, p.n.NsB, p.dirB, append(args, p.n.IPA.String())...)
		cerr := wait(t, args[0]+" client", cdone, cout, 60*time.Second)
		serr := wait(t, args[0]+" server", sdone, sout, 10*time.Second)
		var want strings.Builder
		for _, size := range run.sizes {
			fmt.Fprintf(&want, " %s %s\n", size, run.iters)
		}
		// A passive WRITE server prints the last size's line only.
		last := fmt.Sprintf(" %s %s\n", run.sizes[len(run.sizes)-1], run.iters)
		for side, r := range map[string]struct {
			err  error
			out  string
			want string
		}{"server": {serr, sout.String(), last}, "client": {cerr, cout.String(), want.String()}} {
			if r.err != nil || resultLines(r.out) != r.want || !strings.Contains(r.out, "Device         : xroce0") ||
				!regexpMatch(`(?m)^ ibv_wr\* API     : OFF$`, r.out) {
				t.Errorf("%v %s: %v\nresult lines (size, iterations):\n%swant:\n%s\n%s", args, side, r.err,
					resultLines(r.out), r.want, r.out)
			}
		}
	}
}

// resultLines returns the size and iteration columns of perftest's bandwidth
// result lines (" 65536      200   peak   average   msgrate"), one per line.
func resultLines(out string) string {
	// perftest's get_cpu_mhz warns on stderr when its clock samples scatter (a
	// loaded host); in the combined output the warning can split a result line.
	out = regexp.MustCompile(`Correlation coefficient r\^2: [0-9.e+-]+ < 0\.9\n`).ReplaceAllString(out, "")
	var b strings.Builder
	for _, m := range regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)\s+\d+\.\d+\s+\d+\.\d+\s+\d+\.\d+\s*$`).FindAllStringSubmatch(out, -1) {
		fmt.Fprintf(&b, " %s %s\n", m[1], m[2])
	}
	return b.String()
}

// TestVerbsPerftestWrAPI: perftest's ibv_wr_* path (ibv_create_qp_ex with
// send_ops_flags, ibv_qp_to_qp_ex, wr_start, wr_rdma_write, wr_send,
// wr_rdma_read, wr_atomic_fetch_add, wr_set_sge, wr_set_inline_data,
// wr_complete) between two daemons. Perftest 4.5 chooses that path only for the
// devices it knows by vendor_part_id (TestVerbsPerftest), so this test runs a
// test build of the library (XROCE_TEST_VENDOR_PART_ID) whose device reports a
// ConnectX-5's part number, 4119; nothing else differs.
func TestVerbsPerftestWrAPI(t *testing.T) {
	for _, tool := range []string{"ib_write_bw", "ib_send_bw", "ib_read_bw", "ib_atomic_bw"} {
		if _, err := os.Stat("/usr/bin/" + tool); err != nil {
			t.Skipf("no /usr/bin/%s: apt-get install perftest (.ci/run installs it)", tool)
		}
	}
	libxroce(t) // skips without gcc or libibverbs-dev
	lib := filepath.Join(t.TempDir(), "libxroce.so")
	out, err := exec.Command("make", "-s", "-C", "../..", "libverbs", "LIBXROCE="+lib,
		"LIBXROCE_CFLAGS=-DXROCE_TEST_VENDOR_PART_ID=4119").CombinedOutput()
	if err != nil {
		t.Fatalf("make libverbs: %v\n%s", err, out)
	}
	t.Setenv("XROCE_LIB", lib) // app's environment is the test's
	p := newVerbsPair(t)
	for i, run := range []struct {
		size string // the result line's
		args []string
	}{
		{"65536", []string{"ib_write_bw", "-n", "200", "-s", "65536"}},
		{"65536", []string{"ib_send_bw", "-n", "200", "-s", "65536"}},
		{"65536", []string{"ib_read_bw", "-n", "200", "-s", "65536"}},
		{"64", []string{"ib_write_bw", "-n", "200", "-s", "64", "-I", "64"}}, // wr_set_inline_data (checked below)
		{"8", []string{"ib_atomic_bw", "-n", "200"}},                         // wr_atomic_fetch_add
	} {
		size := run.size
		args := append(run.args, "-x", "1", "-F", "-p", fmt.Sprint(18640+i))
		_, sout, sdone := server(t, p.n.NsA, p.dirA, args...)
		_, cout, cdone := app(t, p.n.NsB, p.dirB, append(args, p.n.IPA.String())...)
		cerr := wait(t, args[0]+" client", cdone, cout, 30*time.Second)
		serr := wait(t, args[0]+" server", sdone, sout, 10*time.Second)
		for side, r := range map[string]struct {
			err error
			out string
		}{"server": {serr, sout.String()}, "client": {cerr, cout.String()}} {
			if r.err != nil || !regexpMatch(`(?m)^ `+size+`\s+200\s+\d+\.\d+\s+\d+\.\d+\s+\d+\.\d+\s*$`, r.out) ||
				!strings.Contains(r.out, "Device         : xroce0") ||
				!regexpMatch(`(?m)^ ibv_wr\* API     : ON$`, r.out) ||
				(size == "64" && side == "client" && !strings.Contains(r.out, "Max inline data : 64[B]")) {
				t.Errorf("%v %s: %v\n%s", args, side, r.err, r.out)
			}
		}
	}
}

// TestVerbsTwoApps: ib_write_bw and ibv_rc_pingpong -c run at the same time on the
// same pair of daemons (one per namespace); both pass, and both sides' status shows
// every object gone afterwards.
func TestVerbsTwoApps(t *testing.T) {
	if _, err := os.Stat("/usr/bin/ib_write_bw"); err != nil {
		t.Skip("no /usr/bin/ib_write_bw: apt-get install perftest (.ci/run installs it)")
	}
	p := newVerbsPair(t)
	bw := []string{"ib_write_bw", "-x", "1", "-F", "-p", "18640", "-D", "3", "-s", "65536", "--use_old_post_send"}
	pp := []string{"ibv_rc_pingpong", "-g", "1", "-p", "18641", "-c", "-n", "200", "-s", "4096"}
	_, bwSrv, bwSrvDone := server(t, p.n.NsA, p.dirA, bw...)
	_, bwCli, bwCliDone := app(t, p.n.NsB, p.dirB, append(bw, p.n.IPA.String())...)
	// ib_write_bw runs for 3 s once its QPs exist: start the pingpong inside that.
	for i := 0; ; i++ {
		if st := status(t, p.dirA); strings.Contains(st, ", 1 QP") {
			break
		} else if i == 50 {
			t.Fatalf("ib_write_bw's server never had its QP:\n%s", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, ppSrv, ppSrvDone := server(t, p.n.NsA, p.dirA, pp...)
	_, ppCli, ppCliDone := app(t, p.n.NsB, p.dirB, append(pp, p.n.IPA.String())...)
	errs := map[string]error{
		"ib_write_bw client":     wait(t, "ib_write_bw client", bwCliDone, bwCli, 60*time.Second),
		"ibv_rc_pingpong client": wait(t, "ibv_rc_pingpong client", ppCliDone, ppCli, 60*time.Second),
		"ib_write_bw server":     wait(t, "ib_write_bw server", bwSrvDone, bwSrv, 10*time.Second),
		"ibv_rc_pingpong server": wait(t, "ibv_rc_pingpong server", ppSrvDone, ppSrv, 10*time.Second),
	}
	outs := map[string]string{"ib_write_bw client": bwCli.String(), "ib_write_bw server": bwSrv.String(),
		"ibv_rc_pingpong client": ppCli.String(), "ibv_rc_pingpong server": ppSrv.String()}
	for who, err := range errs {
		if err != nil {
			t.Errorf("%s: %v\n%s", who, err, outs[who])
		}
	}
	for _, who := range []string{"ib_write_bw client", "ib_write_bw server"} {
		if !regexpMatch(`(?m)^ 65536\s+\d+\s+\d+\.\d+\s+\d+\.\d+\s+\d+\.\d+\s*$`, outs[who]) {
			t.Errorf("%s: no result line:\n%s", who, outs[who])
		}
	}
	for _, who := range []string{"ibv_rc_pingpong client", "ibv_rc_pingpong server"} {
		if !regexpMatch(`(?m)^1638400 bytes in \d+\.\d+ seconds = `, outs[who]) ||
			!regexpMatch(`(?m)^200 iters in \d+\.\d+ seconds = \d+\.\d+ usec/iter$`, outs[who]) {
			t.Errorf("%s output:\n%s", who, outs[who])
		}
	}
	for _, dir := range []string{p.dirA, p.dirB} {
		if st := status(t, dir); !strings.Contains(st, "clients: 0\n") {
			t.Errorf("status after the runs:\n%s", st)
		}
	}
}

// TestVerbsPerftestLat: perftest's latency tools through the library, xroce ↔ xroce:
// each client prints its latency row for -n 200 -s 64, ib_send_lat -a one per
// size, and both sides exit 0.
func TestVerbsPerftestLat(t *testing.T) {
	for _, tool := range []string{"/usr/bin/ib_write_lat", "/usr/bin/ib_read_lat", "/usr/bin/ib_send_lat"} {
		if _, err := os.Stat(tool); err != nil {
			t.Skipf("no %s: apt-get install perftest (.ci/run installs it)", tool)
		}
	}
	p := newVerbsPair(t)
	var all []string // -a: every size, 2 B to 8 MiB
	for n := 2; n <= 8<<20; n *= 2 {
		all = append(all, fmt.Sprint(n))
	}
	for i, run := range []struct {
		args  []string
		sizes []string
		iters string
	}{
		{[]string{"ib_write_lat", "-n", "200", "-s", "64"}, []string{"64"}, "200"},
		{[]string{"ib_read_lat", "-n", "200", "-s", "64"}, []string{"64"}, "200"},
		{[]string{"ib_send_lat", "-n", "200", "-s", "64"}, []string{"64"}, "200"},
		{[]string{"ib_send_lat", "-a", "-n", "5"}, all, "5"},
	} {
		tool := run.args[0]
		args := append(run.args, "-x", "1", "-F", "-p", fmt.Sprint(18650+i))
		_, sout, sdone := server(t, p.n.NsA, p.dirA, args...)
		_, cout, cdone := app(t, p.n.NsB, p.dirB, append(args, p.n.IPA.String())...)
		cerr := wait(t, tool+" client", cdone, cout, 60*time.Second)
		serr := wait(t, tool+" server", sdone, sout, 10*time.Second)
		if cerr != nil || serr != nil {
			t.Errorf("%v: client %v, server %v\n%s\n%s", args, cerr, serr, cout, sout)
			continue
		}
		var want, got strings.Builder
		for _, size := range run.sizes {
			fmt.Fprintf(&want, " %s %s\n", size, run.iters)
		}
		for _, m := range regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)\s+\d+\.\d+\s+\d+\.\d+\s+\d+\.\d+`).FindAllStringSubmatch(cout.String(), -1) {
			fmt.Fprintf(&got, " %s %s\n", m[1], m[2])
		}
		if got.String() != want.String() || !strings.Contains(cout.String(), "Device         : xroce0") {
			t.Errorf("%v client: result lines (size, iterations)\n%swant\n%s\n%s", args, got.String(), want.String(), cout)
		}
	}
}

// TestVerbsCQEx: ibv_create_cq_ex and its start/next/end_poll loop
// (testdata/cqex.c): completions made locally — a SEND with a bad lkey
// (IBV_WC_LOC_QP_OP_ERR as rdma_rxe's, opcode IBV_WC_SEND = 0) and the receive flushed when the
// QP goes to ERR (opcode 0, as rxe leaves an error receive completion's) — read through the extended CQ; timestamps
// are refused with EOPNOTSUPP, as rdma_rxe refuses them.
func TestVerbsCQEx(t *testing.T) {
	p := newVerbsPair(t)
	prog := cBuild(t, "testdata/cqex.c")
	_, out, done := app(t, p.n.NsA, p.dirA, prog, "::ffff:"+p.n.IPB.String())
	want := "wr_id 2 status local QP operation error opcode 0 qp_num ok\n" +
		"wr_id 1 status Work Request Flushed Error opcode 0 qp_num ok\nok\n"
	if err := wait(t, "cqex", done, out, 20*time.Second); err != nil || out.String() != want {
		t.Errorf("cqex: %v\n%s\nwant:\n%s", err, out.String(), want)
	}
}

// TestVerbsNotify: ibv_req_notify_cq raises one event at the next completion after
// arming, or with solicited_only at the next solicited one, as rdma_rxe does
// (testdata/notify.c, two QPs of one context on one daemon). A trial found the
// daemon treating solicited_only as "any", and signalling at once when armed with
// a completion already queued.
func TestVerbsNotify(t *testing.T) {
	runOwnGID(t, "notify", "solicited only, unsolicited SEND: event 0\n"+
		"solicited only, solicited SEND: event 1\n"+
		"armed with a completion queued: event 0\n"+
		"the next completion: event 1\n"+
		"armed for any, then for solicited, unsolicited SEND: event 1\nok\n")
}

// TestVerbsCQOverrun: a CQ overrun as rdma_rxe reports it (testdata/cqoverrun.c):
// each lost completion raises IBV_EVENT_CQ_ERR, ibv_poll_cq never fails and goes
// on once there is room, a QP whose send completion was lost stays in RTS and one
// whose receive completion was lost moves to ERR with no IBV_EVENT_QP_FATAL. A
// fresh user's trial found the CQ dead (ibv_poll_cq -EOVERFLOW for good, which
// perftest and the ibv_*_pingpong programs treat as fatal) and the sending QP in
// ERR.
func TestVerbsCQOverrun(t *testing.T) {
	runOwnGID(t, "cqoverrun", "send side: polled 1 (wr 0 success), then 0\n"+
		"send QP: RTS\n"+
		"send side events: CQ error (its CQ) CQ error (its CQ)\n"+
		"then: polled 1 (wr 3 success)\n"+
		"receive side: polled 1 (wr 100 success), then 0\n"+
		"receive QP: ERR\n"+
		"receive side events: CQ error (its CQ) CQ error (its CQ)\nok\n")
}

// TestVerbsModifyQP: ibv_modify_qp's attribute masks as the kernel's uverbs layer
// checks them for rdma_rxe (testdata/modifyqp.c; qp_state_table and
// ib_modify_qp_is_ok in drivers/infiniband/core/verbs.c): refused where a required
// attribute is missing or one the transition does not take is given, taken where
// the kernel takes what the engine has no use for (an alternate path, a path
// migration state, SQD's asynchronous notice) or a new path in SQD. A fresh
// user's trial found xroce taking RESET → INIT without a port and RTS → RTS with a
// timeout, and refusing the others.
func TestVerbsModifyQP(t *testing.T) {
	runOwnGID(t, "modifyqp", "RESET to ERR: 22\n"+
		"RESET, access flags without a state: 22\n"+
		"RESET to INIT without a port: 22\n"+
		"RESET to INIT with a current state: 22\n"+
		"RESET to INIT: 0\n"+
		"INIT to RTR on port 2: 22\n"+
		"INIT to RTR with an alternate path: 0\n"+
		"RTR to RTS with a path migration state: 0\n"+
		"RTS to RTS with a timeout: 22\n"+
		"RTS to RTS claiming to be in RTR: 22\n"+
		"RTS to RTS with an RNR timer: 0\n"+
		"RTS to SQD with async notify: 0\n"+
		"SQD to SQD with a path and a port: 0\n"+
		"SQD to RTS: 0\nok\n")
}

// TestVerbsRxeAttrs: values and post-time checks as rdma_rxe gives them
// (testdata/rxeattrs.c): CQ and SRQ depths rounded up to 2^k − 1 (an SRQ of 0
// WRs refused), a QP of 0 send WRs reported as such, the SRQ in
// ibv_query_qp's init_attr, attr->qp_state ignored outside IBV_QP_STATE,
// max_rd_atomic and max_dest_rd_atomic rounded up to a power of two, an atomic
// to a misaligned address refused with EINVAL, and IBV_EVENT_SQ_DRAINED after
// RTS → SQD. A trial found each of them different from rxe.
func TestVerbsRxeAttrs(t *testing.T) {
	runOwnGID(t, "rxeattrs", "cqe 2 -> 3, cqe 16 -> 31\n"+
		"create_srq max_wr 0: NULL errno 22\n"+
		"srq max_wr 4 -> 7\n"+
		"modify_srq max_wr 8 -> 15; posted 15, then 12\n"+
		"qp max_send_wr 0 -> 0, max_send_sge 0 -> 0; post_send 12\n"+
		"query_qp: init_attr.srq is the QP's SRQ\n"+
		"modify_qp ACCESS_FLAGS with qp_state 0xffffffff outside the mask: 0\n"+
		"max_rd_atomic 3 -> 4, max_dest_rd_atomic 3 -> 4\n"+
		"atomic to a misaligned address: 22\n"+
		"atomic to an aligned address: 0\n"+
		"its completion: wr_id 7 status 0, fetched 40, memory now 42\n"+
		"after SQD: send queue drained, its QP\nok\n")
}

// runOwnGID builds testdata/NAME.c, runs it through xroce run in namespace A with
// the device's own GID (its QPs connect to each other on one daemon) and wants
// exactly want as its output.
func runOwnGID(t *testing.T, name, want string) {
	t.Helper()
	p := newVerbsPair(t)
	prog := cBuild(t, "testdata/"+name+".c")
	_, out, done := app(t, p.n.NsA, p.dirA, prog, "::ffff:"+p.n.IPA.String())
	if err := wait(t, name, done, out, 30*time.Second); err != nil || stripWarnings(out.String()) != want {
		t.Errorf("%s: %v\n%s\nwant:\n%s", name, err, out.String(), want)
	}
}

// TestVerbsUnsupported: an application that asks for a verb xroce lacks gets what
// verbs says (NULL, errno EOPNOTSUPP), and the library says once per verb what is
// missing, where the application alone would print only its own failure
// (testdata/unsupported.c: a memory window and an on-demand-paging region, each
// asked for twice); ibv_rereg_mr returns libibverbs' negative IBV_REREG_MR_ERR_*
// (it returned +EOPNOTSUPP, which an application testing < 0 took for success).
func TestVerbsUnsupported(t *testing.T) {
	p := newVerbsPair(t)
	prog := cBuild(t, "testdata/unsupported.c")
	_, out, done := app(t, p.n.NsA, p.dirA, prog)
	err := wait(t, "unsupported", done, out, 20*time.Second)
	eop := fmt.Sprint(int(syscall.EOPNOTSUPP))
	want := strings.Repeat("alloc_mw NULL errno "+eop+"\nreg_mr odp NULL errno "+eop+"\n", 2) +
		fmt.Sprintf("rereg_mr bad flags -1 errno %d\n", int(syscall.EINVAL)) + strings.Repeat("rereg_mr access -4 errno "+eop+"\n", 2) +
		strings.Repeat("resize_cq "+eop+"\n", 2) + strings.Repeat("open_xrcd NULL errno "+eop+"\n", 2)
	got := out.String()
	for _, line := range []string{
		"xroce: xroce does not support memory windows (ibv_alloc_mw): it fails with EOPNOTSUPP",
		"xroce: xroce does not support on-demand paging regions (ibv_reg_mr with IBV_ACCESS_ON_DEMAND)",
		"xroce: xroce does not support re-registration (ibv_rereg_mr; rdma_rxe has none either: deregister and register again)",
		"xroce: xroce does not support resizing a CQ (ibv_resize_cq): create it with the depth it needs",
		"xroce: xroce does not support XRC domains (ibv_open_xrcd; rdma_rxe has no XRC either)",
	} {
		if strings.Count(got, line) != 1 {
			t.Errorf("want %q once in\n%s", line, got)
		}
	}
	if err != nil || stripWarnings(got) != want {
		t.Errorf("unsupported: %v\n%s\nwant\n%s", err, got, want)
	}
}

// TestVerbsGetaddrinfo: rdma_getaddrinfo as librdmacm's (testdata/getaddrinfo.c):
// nothing to resolve is EINVAL, hints alone give their addresses, and a lookup
// keeps the hints' source address (ucmatose -b went there and was dropped).
func TestVerbsGetaddrinfo(t *testing.T) {
	p := newVerbsPair(t)
	prog := cBuild(t, "testdata/getaddrinfo.c", "-lrdmacm")
	_, out, done := app(t, p.n.NsA, p.dirA, prog)
	err := wait(t, "getaddrinfo", done, out, 20*time.Second)
	want := fmt.Sprintf("no node, service or hints: -1 errno %d\n", int(syscall.EINVAL)) +
		"hints alone: src 10.1.2.3:0 dst 10.4.5.6:7\n" +
		"node and service: src 10.1.2.3:0 dst 10.7.8.9:7174\nok\n"
	if got := out.String(); err != nil || stripWarnings(got) != want {
		t.Errorf("getaddrinfo: %v\n%s\nwant\n%s", err, got, want)
	}
}

// TestVerbsCMUnsupported: librdmacm's multicast, SRQ helpers, ECE and rsockets
// fail with ENOSYS and a message (testdata/cmunsup.c), and Debian's rstream ends
// saying so: left to the real librdmacm with xroce's objects, mckey and rstream
// crashed (found by a fresh user's trial).
func TestVerbsCMUnsupported(t *testing.T) {
	p := newVerbsPair(t)
	prog := cBuild(t, "testdata/cmunsup.c", "-lrdmacm")
	_, out, done := app(t, p.n.NsA, p.dirA, prog)
	err := wait(t, "cmunsup", done, out, 20*time.Second)
	nosys := fmt.Sprint(int(syscall.ENOSYS))
	want := "rdma_join_multicast -1 errno " + nosys + "\nrdma_create_srq -1 errno " + nosys + "\nrdma_set_local_ece -1 errno " + nosys + "\nrsocket -1 errno " + nosys + "\n"
	if got := out.String(); err != nil || stripWarnings(got) != want || !strings.Contains(got, "xroce: xroce does not support rsockets (rsocket, rconnect, ...: librdmacm's sockets over RDMA) yet: it fails with ENOSYS") {
		t.Errorf("cmunsup: %v\n%s\nwant\n%s", err, got, want)
	}
	if _, err := os.Stat("/usr/bin/rstream"); err != nil {
		t.Skip("no rstream: apt-get install rdmacm-utils (.ci/run installs it)")
	}
	_, out, done = app(t, p.n.NsA, p.dirA, "rstream", "-s", p.n.IPA.String(), "-p", "20058")
	err = wait(t, "rstream", done, out, 20*time.Second)
	if got := out.String(); exitCode(err) == 139 || !strings.Contains(got, "rsocket failed: Function not implemented") {
		t.Errorf("rstream: %v\n%s", err, got)
	}
}

// TestVerbsBindLoopback: rdma_bind_addr to a loopback address fails with ENODEV
// without a message, as rdma_cm's (libfabric's verbs provider probes 127.0.0.1, and
// the message cluttered every fi_info and MPI rank in a trial); an address of no
// device keeps EADDRNOTAVAIL and its hint.
func TestVerbsBindLoopback(t *testing.T) {
	p := newVerbsPair(t)
	prog := cBuild(t, "testdata/bindlo.c", "-lrdmacm")
	_, out, done := app(t, p.n.NsA, p.dirA, prog)
	err := wait(t, "bindlo", done, out, 20*time.Second)
	nodev, noaddr := fmt.Sprint(int(syscall.ENODEV)), fmt.Sprint(int(syscall.EADDRNOTAVAIL))
	want := "127.0.0.1 -1 errno " + nodev + "\n127.5.6.7 -1 errno " + nodev + "\n::1 -1 errno " + nodev +
		"\n::ffff:127.0.0.1 -1 errno " + nodev + "\nxroce: rdma_bind_addr: no xroce device has this address" +
		" (is `xroce daemon` running on its interface? a daemon takes an address added to it within 0.5 s)\n192.0.2.1 -1 errno " + noaddr + "\n"
	if got := out.String(); err != nil || got != want {
		t.Errorf("bindlo: %v\n%s\nwant\n%s", err, got, want)
	}
}

// expectOK runs args through xroce run in namespace A and wants it to exit 0
// within d having printed exactly "ok" (the testdata programs that check their own
// results print that and nothing else).
func (p *verbsPair) expectOK(t *testing.T, what string, d time.Duration, args ...string) {
	t.Helper()
	_, out, done := app(t, p.n.NsA, p.dirA, args...)
	if err := wait(t, what, done, out, d); err != nil || out.String() != "ok\n" {
		t.Errorf("%s: %v\n%s", what, err, out.String())
	}
}

// stripWarnings removes the library's "xroce: " lines from out.
func stripWarnings(out string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(out, "\n") {
		if !strings.HasPrefix(l, "xroce: ") {
			b.WriteString(l)
		}
	}
	return b.String()
}

// cBuild compiles a test program against libibverbs and returns its path.
func cBuild(t *testing.T, src string, libs ...string) string {
	t.Helper()
	prog := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(src), ".c"))
	args := append([]string{"-O1", "-Wall", "-Werror", "-o", prog, src, "-libverbs"}, libs...)
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", src, err, out)
	}
	return prog
}

// TestVerbsRegOverlap: regions whose pages partly overlap register (the daemon
// maps each from the memfd pieces its pages lie on) and the application's bytes
// survive; testdata/regoverlap.c, built against libibverbs and run through xroce
// run. (The pieces' data path: the daemon's TestSessionDataPath.)
func TestVerbsRegOverlap(t *testing.T) {
	p := newVerbsPair(t)
	prog := cBuild(t, "testdata/regoverlap.c")
	p.expectOK(t, "regoverlap", 20*time.Second, prog)
}

// TestVerbsRegRace: a write another thread makes to a page while ibv_reg_mr moves
// it onto the daemon's shared memory is not lost (testdata/regrace.c): the pages
// are write-protected with a userfaultfd for the move (wprotect.c), as rxe's pinned
// pages never move. Found by a fresh user's trial: copied, then mapped over, the
// pages lost 1-753 writes in 500-1000 registrations.
func TestVerbsRegRace(t *testing.T) {
	p := newVerbsPair(t)
	prog := cBuild(t, "testdata/regrace.c", "-lpthread")
	_, out, done := app(t, p.n.NsA, p.dirA, prog)
	err := wait(t, "regrace", done, out, 60*time.Second)
	if got := out.String(); err != nil || stripWarnings(got) != "registrations 1000 lost writes 0\n" {
		t.Errorf("regrace: %v\n%s", err, got)
	}
}

// TestVerbsRegMany: 2000 regions on pages of their own under a soft descriptor
// limit of 1024 register, and the application can still open files, its own
// descriptors below 1024 (testdata/regmany.c). Found by a fresh user's trial: one
// memfd per page range ended registration at the 1017th with EMFILE, and every
// open after it.
func TestVerbsRegMany(t *testing.T) {
	p := newVerbsPair(t)
	prog := cBuild(t, "testdata/regmany.c")
	_, out, done := app(t, p.n.NsA, p.dirA, prog)
	err := wait(t, "regmany", done, out, 60*time.Second)
	got := out.String()
	if err == nil && got == "hard limit too low\n" {
		t.Skip("the hard RLIMIT_NOFILE leaves no room for 2000 regions above 1024")
	}
	if err != nil || stripWarnings(got) != "registered 2000, fopen ok, next descriptor below 1024\n" {
		t.Errorf("regmany: %v\n%s", err, got)
	}
}

// TestVerbsRegStack: a region on the calling thread's stack registers (its pages
// move onto the memfd from another stack, so none of the thread's own writes is
// lost; with the copy made on the stack itself, the program died of a smashed
// stack) and the stack still grows; a forked child's writes to it and to a heap
// region stay the child's (rxe copies pinned pages for a child; shared memfd pages
// carried them into the parent); and an RDMA WRITE through a QP connected to
// itself lands in the stack region after the fork; after deregistration a child's
// writes stay its own too (testdata/regstack.c, on the main thread and on another).
func TestVerbsRegStack(t *testing.T) {
	p := newVerbsPair(t)
	prog := cBuild(t, "testdata/regstack.c", "-lpthread")
	for _, mode := range []string{"main", "thread"} { // the main thread's stack, and a thread's
		p.expectOK(t, "regstack "+mode, 20*time.Second, prog, mode)
	}
}

// TestVerbsRegProt: a registration keeps its pages' protections (a read-only page
// stays read-only, a code page executable) and refuses, as ib_umem_get does, a
// read-only page the device may write and an unmapped page (EFAULT), and, as the
// kernel's checks for rdma_rxe do, NULL (EFAULT), an unknown access bit and an iova
// at another page offset (EINVAL), taking zero-based and hugetlb flags
// (testdata/regprot.c; found by fresh users' trials: registered pages became
// read-write, a registered code page killed the process, the flags differed).
func TestVerbsRegProt(t *testing.T) {
	p := newVerbsPair(t)
	prog := cBuild(t, "testdata/regprot.c")
	p.expectOK(t, "regprot", 20*time.Second, prog)
}

// TestVerbsRegMemlock: registrations count against RLIMIT_MEMLOCK as on rdma_rxe
// (ib_umem_get): under a 64 KiB limit without CAP_IPC_LOCK a registration beyond
// it fails with ENOMEM and a deregistration gives its pages back; with
// CAP_IPC_LOCK the limit does not apply (testdata/reglimit.c; found by the trial:
// the library ignored the limit).
func TestVerbsRegMemlock(t *testing.T) {
	p := newVerbsPair(t)
	prog := cBuild(t, "testdata/reglimit.c")
	for _, c := range []struct {
		mode string
		args []string
	}{
		{"limited", []string{"prlimit", "--memlock=65536", "setpriv", "--inh-caps=-ipc_lock", "--bounding-set=-ipc_lock", prog, "limited"}},
		{"capable", []string{"prlimit", "--memlock=65536", prog, "capable"}},
	} {
		p.expectOK(t, "reglimit "+c.mode, 20*time.Second, c.args...)
	}
}

// TestVerbsRegThreads: registering and deregistering a region 200 times while
// another thread writes other data on the same page loses none of its writes: the
// pages move onto a memfd once and a later registration takes that memfd back
// (testdata/regthreads.c; moving them back at each deregistration lost about one
// write a call).
func TestVerbsRegThreads(t *testing.T) {
	p := newVerbsPair(t)
	prog := cBuild(t, "testdata/regthreads.c", "-lpthread")
	p.expectOK(t, "regthreads", 30*time.Second, prog)
}

// TestDaemonsShareRunDir: two daemons in one run directory, each in its own network
// namespace (the README's setup without XROCE_RUN_DIR per namespace). Each
// namespace's applications list its own daemon's device first (A's sorts first by
// name), so Debian's ibv_rc_pingpong without -d uses it, and passes its data check
// (-c); given the other namespace's device it would address its own GID.
func TestDaemonsShareRunDir(t *testing.T) {
	needRoot(t)
	libxroce(t)
	if _, err := os.Stat("/usr/bin/ibv_rc_pingpong"); err != nil {
		t.Skip("no ibv_rc_pingpong: apt-get install ibverbs-utils (.ci/run installs it)")
	}
	n := testnet.New(t, testnet.Options{MTU: 1500})
	dir := t.TempDir()
	sfx := n.IfA[len(n.IfA)-4:]
	names := [2]string{"xra" + sfx, "xrb" + sfx}
	startDaemon(t, n.NsA, n.IfA, dir, "--name", names[0])
	startDaemon(t, n.NsB, n.IfB, dir, "--name", names[1])
	for i, ns := range []string{n.NsA, n.NsB} {
		_, out, done := app(t, ns, dir, "ibv_devices")
		if err := wait(t, "ibv_devices", done, out, 10*time.Second); err != nil {
			t.Fatalf("ibv_devices in %s: %v\n%s", ns, err, out.String())
		}
		listed := regexp.MustCompile(`(?m)^\s+(xr[ab]\w+)\s`).FindAllStringSubmatch(out.String(), -1)
		if len(listed) != 2 || listed[0][1] != names[i] || listed[1][1] != names[1-i] {
			t.Errorf("ibv_devices in %s lists %v, want %s first, then %s:\n%s", ns, listed, names[i], names[1-i], out.String())
		}
	}
	_, sout, sdone := server(t, n.NsB, dir, "ibv_rc_pingpong", "-g", "1", "-c", "-n", "50", "-p", "18640")
	_, cout, cdone := app(t, n.NsA, dir, "ibv_rc_pingpong", "-g", "1", "-c", "-n", "50", "-p", "18640", n.IPB.String())
	if err := wait(t, "client", cdone, cout, 30*time.Second); err != nil {
		t.Fatalf("client: %v\n%s\nserver:\n%s", err, cout.String(), sout.String())
	}
	if err := wait(t, "server", sdone, sout, 10*time.Second); err != nil {
		t.Fatalf("server: %v\n%s", err, sout.String())
	}
	for _, o := range []*testnet.Output{cout, sout} {
		if !strings.Contains(o.String(), "50 iters in") {
			t.Errorf("no 50 iterations:\n%s", o.String())
		}
	}
}

// TestVerbsDeviceFatal: an application blocked in ibv_get_async_event when its
// device's daemon stops gets IBV_EVENT_DEVICE_FATAL, then EIO, as from a kernel
// device that was removed (ib_uverbs disassociating the context), and every verb
// after it fails with EIO as there, the library saying so once, while destroying
// the objects made before succeeds (the library frees its side); testdata/fatal.c.
func TestVerbsDeviceFatal(t *testing.T) {
	p := newVerbsPair(t)
	prog := cBuild(t, "testdata/fatal.c")
	_, out, done := app(t, p.n.NsB, p.dirB, prog)
	for i := 0; i < 200 && !strings.Contains(out.String(), "ready\n"); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // into ibv_get_async_event
	log, _ := p.stopB()
	err := wait(t, "fatal", done, out, 10*time.Second)
	want := "ready\nevent local catastrophic error\nibv_get_async_event -1 Input/output error\n" +
		"ibv_req_notify_cq failed 1000 of 1000, errno Input/output error\nibv_alloc_pd failed 1000 of 1000, errno Input/output error\n" +
		"ibv_dereg_mr 0\nibv_dealloc_pd 0\nibv_destroy_cq 0\nibv_close_device 0\n"
	if got := stripWarnings(out.String()); err != nil || got != want {
		t.Errorf("fatal: %v\n%s\nwant\n%s\ndaemon B:\n%s", err, out.String(), want, log)
	}
	// The daemon's departure is said once (a trial's UCX run printed it 6 000 times
	// in 3 s), whichever call noticed it first.
	if n := strings.Count(out.String(), "xroce: "); n != 1 {
		t.Errorf("fatal: %d lines from the library, want 1:\n%s", n, out.String())
	}
}
