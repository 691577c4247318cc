package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/test/testnet"
)

// libxroce builds the verbs library beside the test's xroce binary (where `xroce
// run` looks for it) with make libverbs, or skips with the reason when gcc,
// libibverbs-dev or ibverbs-utils are missing.
func libxroce(t *testing.T) {
	t.Helper()
	for _, need := range []struct{ path, pkg string }{
		{"/usr/include/infiniband/verbs.h", "libibverbs-dev"},
		{"/usr/bin/ibv_devinfo", "ibverbs-utils"},
		{"/usr/bin/ibv_devices", "ibverbs-utils"},
	} {
		if _, err := os.Stat(need.path); err != nil {
			t.Skipf("no %s: apt-get install %s (.ci/run installs it)", need.path, need.pkg)
		}
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc: apt-get install gcc (.ci/run installs it)")
	}
	lib := filepath.Join(filepath.Dir(bin), "lib", "libxroce.so")
	if _, err := os.Stat(lib); err == nil {
		return
	}
	out, err := exec.Command("make", "-s", "-C", "../..", "libverbs", "LIBXROCE="+lib).CombinedOutput()
	if err != nil {
		t.Fatalf("make libverbs: %v\n%s", err, out)
	}
}

// startDaemon runs `xroce daemon` in ns on ifname with the run directory dir and
// waits for its socket (one that was not in dir before); the returned function
// stops it with SIGTERM and returns its output and exit error. t.Cleanup kills it
// if the test did not.
func startDaemon(t *testing.T, ns, ifname, dir string, args ...string) (sock string, stop func() (string, error)) {
	t.Helper()
	before, _ := filepath.Glob(filepath.Join(dir, "*.sock"))
	cmd, out, done := spawnDaemon(t, ns, ifname, dir, args...)
	stopped := false
	stop = func() (string, error) {
		if !stopped {
			stopped = true
			_ = cmd.Process.Signal(syscall.SIGTERM) // ip netns exec execs xroce: same process
			select {
			case err := <-done:
				return out.String(), err
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				return out.String(), errors.New("daemon did not stop within 10 s of SIGTERM")
			}
		}
		return out.String(), nil
	}
	t.Cleanup(func() { stop() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		ents, _ := filepath.Glob(filepath.Join(dir, "*.sock"))
		if fresh := slices.DeleteFunc(ents, func(e string) bool { return slices.Contains(before, e) }); len(fresh) == 1 {
			return fresh[0], stop
		}
		select {
		case err := <-done:
			stopped = true
			t.Fatalf("daemon exited: %v\n%s", err, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no daemon socket in %s after 10 s\n%s", dir, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// spawnDaemon starts `xroce daemon -d ifname args...` in ns with the run directory
// dir; done delivers its exit.
func spawnDaemon(t *testing.T, ns, ifname, dir string, args ...string) (cmd *exec.Cmd, out *testnet.Output, done <-chan error) {
	t.Helper()
	out = new(testnet.Output)
	cmd = exec.Command("ip", append([]string{"netns", "exec", ns, bin, "daemon", "-d", ifname}, args...)...)
	cmd.Env = append(os.Environ(), "XROCE_RUN_DIR="+dir)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ch := make(chan error, 1)
	go func() { ch <- cmd.Wait() }()
	return cmd, out, ch
}

// spawnServing is spawnDaemon, waiting until the daemon serves xroce0; t.Cleanup
// kills it and waits until it is gone (reaped), so that the network's check for
// leftover processes, which runs after, does not find it exiting.
func spawnServing(t *testing.T, ns, ifname, dir string) (*exec.Cmd, *testnet.Output, <-chan error) {
	t.Helper()
	cmd, out, done := spawnDaemon(t, ns, ifname, dir)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		for i := 0; i < 250 && syscall.Kill(cmd.Process.Pid, 0) == nil; i++ {
			time.Sleep(20 * time.Millisecond)
		}
	})
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), "serving xroce0"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("daemon not serving after 10 s:\n%s", out.String())
		}
	}
	return cmd, out, done
}

// runVerbs runs an unmodified verbs application through `xroce run --`.
func runVerbs(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"run", "--"}, args...)...)
	cmd.Env = append(os.Environ(), "XROCE_RUN_DIR="+dir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("xroce run -- %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// TestDaemonDevinfo: Debian's own ibv_devices and ibv_devinfo, preloaded with the
// verbs library, list and describe the device an xroce daemon serves on a veth.
func TestDaemonDevinfo(t *testing.T) {
	needRoot(t)
	libxroce(t)
	n := testnet.New(t, testnet.Options{MTU: 1500})
	testnet.Sh(t, "ip", "-n", n.NsA, "link", "set", n.IfA, "address", "52:54:00:81:00:0b")
	dir := t.TempDir()
	name := "xrt" + n.IfA[len(n.IfA)-4:]
	sock, stop := startDaemon(t, n.NsA, n.IfA, dir, "--name", name)
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 || filepath.Base(sock) != name+".sock" {
		t.Fatalf("socket %s: %v %v", sock, fi.Mode(), err)
	}

	out := runVerbs(t, dir, "ibv_devices")
	if !regexpMatch(`(?m)^\s+`+name+`\s+505400fffe81000b$`, out) {
		t.Errorf("ibv_devices:\n%s", out)
	}
	out = runVerbs(t, dir, "ibv_devinfo", "-v")
	for _, want := range []string{
		"hca_id:\t" + name + "\n",
		"\ttransport:\t\t\tInfiniBand (0)\n",
		"\tfw_ver:\t\t\t\t0.0.0\n",
		"\tnode_guid:\t\t\t5054:00ff:fe81:000b\n",
		"\tsys_image_guid:\t\t\t5054:00ff:fe81:000b\n",
		"\tvendor_id:\t\t\t0xffffff\n",
		"\tvendor_part_id:\t\t\t0\n",
		"\tphys_port_cnt:\t\t\t1\n",
		"\tmax_qp_rd_atom:\t\t\t128\n",
		"\tatomic_cap:\t\t\tATOMIC_HCA (1)\n",
		"\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n",
		"\t\t\tmax_mtu:\t\t4096 (5)\n",
		"\t\t\tactive_mtu:\t\t1024 (3)\n",
		"\t\t\tlink_layer:\t\tEthernet\n",
		"\t\t\tmax_msg_sz:\t\t0x800000\n",
		"\t\t\tgid_tbl_len:\t\t1024\n",
		"\t\t\tphys_state:\t\tLINK_UP (5)\n",
		"\t\t\tGID[  0]:\t\tfe80::5054:ff:fe81:b, RoCE v2\n",
		"\t\t\tGID[  1]:\t\t::ffff:" + n.IPA.String() + ", RoCE v2\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("ibv_devinfo -v lacks %q:\n%s", want, out)
		}
	}
	// The rest of the table is the veth's IPv6 addresses; the whole table is the
	// one `xroce gids` prints.
	if want := "\t\t\tGID[  2]:\t\t" + n.IP6A.String() + ", RoCE v2\n"; !strings.Contains(out, want) {
		t.Errorf("ibv_devinfo -v lacks %q:\n%s", want, out)
	}
	gids := testnet.Sh(t, "ip", "netns", "exec", n.NsA, bin, "gids", "-d", n.IfA)
	if m := regexp.MustCompile(`n_gids_found=(\d+)`).FindStringSubmatch(gids); m == nil || strings.Count(out, "\t\t\tGID[") != atoi(m[1]) {
		t.Errorf("ibv_devinfo -v lists %d GIDs, xroce gids:\n%s", strings.Count(out, "\t\t\tGID["), gids)
	}
	out = runVerbs(t, dir, "ibv_devinfo", "-d", name)
	if !strings.HasPrefix(out, "hca_id:\t"+name+"\n") || !strings.Contains(out, "PORT_ACTIVE (4)") || strings.Contains(out, "GID[") {
		t.Errorf("ibv_devinfo -d %s:\n%s", name, out)
	}
	// status sees the device and its counters' names.
	st := exec.Command(bin, "daemon", "status", "-a")
	st.Env = append(os.Environ(), "XROCE_RUN_DIR="+dir)
	so, err := st.CombinedOutput()
	if err != nil || !strings.Contains(string(so), name+"\tnetdev "+n.IfA) || !strings.Contains(string(so), "retry_exceeded_err") {
		t.Errorf("daemon status: %v\n%s", err, so)
	}

	log, err := stop()
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && ee.ExitCode() == 143) {
		t.Errorf("daemon after SIGTERM: %v\n%s", err, log)
	}
	if _, err := os.Stat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket %s still there after SIGTERM: %v\n%s", sock, err, log)
	}
	if !strings.Contains(log, name+" stopped") {
		t.Errorf("daemon log:\n%s", log)
	}
	// No daemon: the library says what to do, and the list is empty.
	cmd := exec.Command(bin, "run", "--", "ibv_devices")
	cmd.Env = append(os.Environ(), "XROCE_RUN_DIR="+dir)
	o, _ := cmd.CombinedOutput()
	if !strings.Contains(string(o), "no xroce device: no daemon answers in "+dir+"; start one with `xroce daemon -d IFACE`") {
		t.Errorf("ibv_devices without a daemon:\n%s", o)
	}
}

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// TestStatusStaleSocket: a daemon killed with SIGKILL leaves its socket behind;
// `xroce daemon status` names it and exits non-zero instead of reporting success.
func TestStatusStaleSocket(t *testing.T) {
	dir := t.TempDir()
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: filepath.Join(dir, "xroce7.sock"), Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	cmd := exec.Command(bin, "daemon", "status")
	cmd.Env = append(os.Environ(), "XROCE_RUN_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("status succeeded with a dead daemon's socket:\n%s", out)
	}
	for _, want := range []string{"xroce7\t", "1 of 1 devices in " + dir + " did not answer"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}

// TestDaemonsStartTogether: two daemons started at the same moment in one run
// directory, both with the default name, both end up serving, as xroce0 and
// xroce1 (they raced for xroce0: the loser takes the next free name).
func TestDaemonsStartTogether(t *testing.T) {
	n := testnet.New(t, testnet.Options{MTU: 1500})
	dir := t.TempDir()
	var outs []*testnet.Output
	for _, side := range [][2]string{{n.NsA, n.IfA}, {n.NsB, n.IfB}} {
		var out testnet.Output
		cmd := exec.Command("ip", "netns", "exec", side[0], bin, "daemon", "-d", side[1])
		cmd.Env = append(os.Environ(), "XROCE_RUN_DIR="+dir)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
		outs = append(outs, &out)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		sc := exec.Command(bin, "daemon", "status")
		sc.Env = append(os.Environ(), "XROCE_RUN_DIR="+dir)
		b, _ := sc.CombinedOutput() // no device yet: exit status 1
		st := string(b)
		if strings.Contains(st, "xroce0\tnetdev ") && strings.Contains(st, "xroce1\tnetdev ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("status after 10 s:\n%s\ndaemons:\n%s\n%s", st, outs[0], outs[1])
		}
	}
}

// TestDaemonInterfaceGone: a daemon on an interface without an address says that
// applications will find no RoCEv2 GID and how to fix it; when the interface is
// deleted it stops within seconds, removes its socket and names the cause and the
// fix, as rdma_rxe's device goes with its netdev.
func TestDaemonInterfaceGone(t *testing.T) {
	n := testnet.New(t, testnet.Options{MTU: 1500})
	testnet.Sh(t, "ip", "-n", n.NsA, "addr", "flush", "dev", n.IfA)
	dir := t.TempDir()
	_, out, done := spawnServing(t, n.NsA, n.IfA, dir)
	want := fmt.Sprintf("warning: %s has no IP address, so no usable RoCEv2 GID", n.IfA)
	if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "then restart the daemon") {
		t.Errorf("no warning %q with its fix:\n%s", want, out.String())
	}
	testnet.Sh(t, "ip", "-n", n.NsA, "link", "del", n.IfA)
	start := time.Now()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("daemon still running 5 s after its interface was deleted:\n%s", out.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("exit %v, want status 1", err)
	}
	want = fmt.Sprintf("xroce0 stopped: the interface %s is gone (deleted, renamed, or moved to another namespace): start the daemon again on it (xroce daemon -d %s) once it is back", n.IfA, n.IfA)
	if !strings.Contains(out.String(), want) {
		t.Errorf("output lacks %q:\n%s", want, out.String())
	}
	if socks, _ := filepath.Glob(filepath.Join(dir, "*.sock")); len(socks) != 0 {
		t.Errorf("sockets left after the daemon stopped: %v", socks)
	}
	t.Logf("stopped %v after the interface was deleted", time.Since(start).Round(time.Millisecond))
}

// TestDaemonHangup: a second daemon on a served interface is refused with the
// holder's PID and command; SIGHUP (the terminal of `xroce daemon ... &` closing)
// stops the first as SIGTERM does: exit 129, "stopped" logged, socket removed.
func TestDaemonHangup(t *testing.T) {
	n := testnet.New(t, testnet.Options{MTU: 1500})
	dir := t.TempDir()
	cmd, out, done := spawnServing(t, n.NsA, n.IfA, dir)
	second := exec.Command("ip", "netns", "exec", n.NsA, bin, "daemon", "-d", n.IfA)
	second.Env = append(os.Environ(), "XROCE_RUN_DIR="+t.TempDir())
	o, err := second.CombinedOutput()
	if want := fmt.Sprintf("held by PID %d (%s daemon -d %s)); one interface serves one xroce at a time", cmd.Process.Pid, bin, n.IfA); err == nil || !strings.Contains(string(o), want) {
		t.Errorf("second daemon on %s: %v, want %q in\n%s", n.IfA, err, want, o)
	}
	must(t, cmd.Process.Signal(syscall.SIGHUP)) // ip netns exec execs xroce: same process
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("daemon still running 10 s after SIGHUP:\n%s", out.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 129 || !strings.Contains(out.String(), "xroce0 stopped") {
		t.Errorf("after SIGHUP: %v (want exit status 129, 128 + SIGHUP) and log\n%s", err, out.String())
	}
	if socks, _ := filepath.Glob(filepath.Join(dir, "*.sock")); len(socks) != 0 {
		t.Errorf("sockets left after SIGHUP: %v", socks)
	}
}

// TestStatusRefusedAndNamed: `xroce stat` as a user a daemon does not serve says
// that the daemon refused the user and how to allow it, not that the daemon is
// gone; `xroce stat NAME` shows that device only, and an unknown NAME is an error
// listing the devices.
func TestStatusRefusedAndNamed(t *testing.T) {
	dir := t.TempDir()
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		must(t, os.Chmod(d, 0o755)) // nobody may enter; the socket stays 0600, root's
	}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: filepath.Join(dir, "xroce3.sock"), Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	must(t, os.Chmod(filepath.Join(dir, "xroce3.sock"), 0o600))
	exe := filepath.Join(dir, "xroce")
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(exe, data, 0o755))
	cmd := exec.Command(exe, "stat")
	cmd.Env = append(os.Environ(), "XROCE_RUN_DIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	want := "1 of 1 devices in " + dir + " refused this user (uid 65534): their daemons serve only their own user and root; start them with --any-user, or run this as their user"
	if err == nil || !strings.Contains(string(out), want) || strings.Contains(string(out), "did not answer") {
		t.Errorf("stat as uid 65534: %v, want %q alone in\n%s", err, want, out)
	}
	cmd = exec.Command(bin, "stat", "xroce9")
	cmd.Env = append(os.Environ(), "XROCE_RUN_DIR="+dir)
	out, err = cmd.CombinedOutput()
	if want := "no device xroce9 in " + dir + ": it has xroce3"; err == nil || !strings.Contains(string(out), want) {
		t.Errorf("stat xroce9: %v, want %q in\n%s", err, want, out)
	}
}

// TestDaemonNames: --name takes what an RDMA device may be called and nothing that
// would hide its socket or leave the run directory.
func TestDaemonNames(t *testing.T) {
	for name, ok := range map[string]bool{"xroce0": true, "rxe_A-1.b": true, "": false, ".": false, "..": false,
		".lock": false, "-x": false, "a/b": false, "a b": false, "a\nb": false, strings.Repeat("x", 63): true, strings.Repeat("x", 64): false} {
		if err := checkDevName(name); (err == nil) != ok {
			t.Errorf("checkDevName(%q) = %v, want ok %v", name, err, ok)
		}
	}
}

// TestDaemonMTULog: lowering the served interface's MTU under the path MTU QPs may
// use is logged with the port's new active_mtu and the fix, an MTU that carries
// no RoCE frame as such, and raising it again without a warning.
func TestDaemonMTULog(t *testing.T) {
	n := testnet.New(t, testnet.Options{MTU: 9000})
	_, out, _ := spawnServing(t, n.NsA, n.IfA, t.TempDir())
	testnet.Sh(t, "ip", "-n", n.NsA, "link", "set", n.IfA, "mtu", "1500")
	down := "the interface " + n.IfA + "'s MTU changed from 9000 to 1500: the port's active_mtu is now 1024; QPs of a path MTU above 1024 over IPv4 (above 1024 over IPv6) send frames it no longer carries: set it back (ip link set " + n.IfA + " mtu 9000) or connect them again with a smaller path MTU\n"
	for i := 0; i < 100 && !strings.Contains(out.String(), down); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	testnet.Sh(t, "ip", "-n", n.NsA, "link", "set", n.IfA, "mtu", "300")
	tiny := "the interface " + n.IfA + "'s MTU changed from 1500 to 300, which carries no RoCE frame (a path MTU of 256 needs 324 over IPv4, 344 over IPv6): nothing can be sent until it is raised again (ip link set " + n.IfA + " mtu 1500); the port reports active_mtu 256, as rdma_rxe does\n"
	for i := 0; i < 100 && !strings.Contains(out.String(), tiny); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	testnet.Sh(t, "ip", "-n", n.NsA, "link", "set", n.IfA, "mtu", "9000")
	up := "the interface " + n.IfA + "'s MTU changed from 300 to 9000: the port's active_mtu is now 4096\n"
	for i := 0; i < 100 && !strings.Contains(out.String(), up); i++ {
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(out.String(), down) || !strings.Contains(out.String(), tiny) || !strings.Contains(out.String(), up) {
		t.Fatalf("daemon log, want %q, %q and %q:\n%s", down, tiny, up, out.String())
	}
}

// TestDaemonOversizeLog: ibv_rc_pingpong -m 512 against -m 1024 (rc_pingpong
// exchanges no MTU): the -m 512 side's daemon refuses the 1024-byte packets and
// its log names the path MTU mismatch, which the applications cannot see; the
// other way round, the -m 1024 side's daemon refuses the 512-byte FIRST packets
// (a fresh user's trial found that direction unlogged).
func TestDaemonOversizeLog(t *testing.T) {
	libxroce(t)
	if _, err := os.Stat("/usr/bin/ibv_rc_pingpong"); err != nil {
		t.Skip("no ibv_rc_pingpong: apt-get install ibverbs-utils (.ci/run installs it)")
	}
	n := testnet.New(t, testnet.Options{MTU: 1500})
	dirA, dirB := t.TempDir(), t.TempDir()
	_, stopA := startDaemon(t, n.NsA, n.IfA, dirA)
	startDaemon(t, n.NsB, n.IfB, dirB)
	pp := []string{"ibv_rc_pingpong", "-g", "1", "-p", "18650", "-s", "4096", "-n", "5"}
	_, sout, sdone := server(t, n.NsA, dirA, append(pp, "-m", "512")...)
	_, cout, cdone := app(t, n.NsB, dirB, append(pp, "-m", "1024", n.IPA.String())...)
	cerr := wait(t, "client", cdone, cout, 30*time.Second)
	serr := wait(t, "server", sdone, sout, 30*time.Second)
	if cerr == nil || serr == nil {
		t.Fatalf("mismatched path MTUs passed: client %v\n%s\nserver %v\n%s", cerr, cout.String(), serr, sout.String())
	}
	_, sout, sdone = server(t, n.NsA, dirA, append(pp, "-p", "18651", "-m", "1024")...)
	_, cout, cdone = app(t, n.NsB, dirB, append(pp, "-p", "18651", "-m", "512", n.IPA.String())...)
	cerr = wait(t, "client", cdone, cout, 30*time.Second)
	serr = wait(t, "server", sdone, sout, 30*time.Second)
	if cerr == nil || serr == nil {
		t.Fatalf("mismatched path MTUs passed the other way: client %v\n%s\nserver %v\n%s", cerr, cout.String(), serr, sout.String())
	}
	time.Sleep(2 * ifaceWatch)
	log, _ := stopA()
	for _, want := range []string{"longer than their QP's path MTU refused (rcvd_oversize ", "a peer sends with a larger path MTU",
		"shorter than their QP's path MTU in the middle of a message refused (rcvd_undersize ", "a peer sends with a smaller path MTU"} {
		if !strings.Contains(log, want) || !strings.Contains(log, "give both sides the same path MTU") {
			t.Errorf("daemon A's log, want %q:\n%s", want, log)
		}
	}
}

// TestDaemonLinkStateLog: a daemon started on an interface that is down and whose
// MTU carries no RoCE frame serves (as rdma_rxe's device exists there) and warns
// of both; the port's going up and down again is logged as it happens.
func TestDaemonLinkStateLog(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	testnet.Sh(t, "ip", "-n", n.NsA, "link", "set", n.IfA, "down")
	testnet.Sh(t, "ip", "-n", n.NsA, "link", "set", n.IfA, "mtu", "300")
	_, out, _ := spawnServing(t, n.NsA, n.IfA, t.TempDir())
	wait := func(want string) {
		t.Helper()
		for i := 0; i < 100 && !strings.Contains(out.String(), want); i++ {
			time.Sleep(50 * time.Millisecond)
		}
		if !strings.Contains(out.String(), want) {
			t.Fatalf("daemon log, want %q:\n%s", want, out.String())
		}
	}
	wait("warning: the interface " + n.IfA + " is down: bring it up (ip link set " + n.IfA + " up) (the port is PORT_DOWN until then)\n")
	wait("warning: the interface " + n.IfA + "'s MTU 300 carries no RoCE frame (a path MTU of 256 needs 324 over IPv4, 344 over IPv6): nothing can be sent until it is raised (ip link set " + n.IfA + " mtu 1500); the port reports active_mtu 256, as rdma_rxe does\n")
	testnet.Sh(t, "ip", "-n", n.NsA, "link", "set", n.IfA, "mtu", "1500", "up")
	wait("the interface " + n.IfA + " is up and has carrier: the port is PORT_ACTIVE\n")
	testnet.Sh(t, "ip", "-n", n.NsB, "link", "set", n.IfB, "down")
	wait("the interface " + n.IfA + " has no carrier: its link is down (a cable, the switch port, or the other end of a veth pair); nothing reaches the peer until it is up: the port is PORT_DOWN; connected QPs lose what they send until it is back (an RC QP fails when its retries run out)\n")
}

// TestDaemonRNRLog: ib_send_bw against an ib_write_bw server (which posts no
// receives): the client's SENDs are answered with RNR NAKs and, with perftest's
// rnr_retry 7, retried for ever without a word to either application, as on
// rdma_rxe; the client's daemon names the cause in its log after rnrSpell.
func TestDaemonRNRLog(t *testing.T) {
	needTool(t, "/usr/bin/ib_send_bw", "perftest")
	p := newVerbsPair(t)
	_, sout, _ := server(t, p.n.NsA, p.dirA, "ib_write_bw", "-x", "1", "-F", "-p", "18661", "-s", "1024", "-n", "1000")
	_, cout, cdone := app(t, p.n.NsB, p.dirB, "ib_send_bw", "-x", "1", "-F", "-p", "18661", "-s", "1024", "-n", "1000", p.n.IPA.String())
	select {
	case err := <-cdone:
		t.Fatalf("ib_send_bw ended (%v) against ib_write_bw:\n%s\nserver:\n%s", err, cout.String(), sout.String())
	case <-time.After(rnrSpell + 3*ifaceWatch + 2*time.Second):
	}
	log, _ := p.stopB()
	if want := "a peer posts no receive for the SENDs of a QP here, which retries them while its rnr_retry allows (7, as perftest and ibv_rc_pingpong set it: for ever); does the peer run the same test (ib_send_bw against ib_write_bw, say) and the same -n?\n"; !strings.Contains(log, want) || !strings.Contains(log, "RNR NAKs for ") {
		t.Errorf("client daemon's log, want %q:\n%s\nclient:\n%s", want, log, cout.String())
	}
}

// TestMTUChangedByFamily: an MTU change warns of the QPs whose longest packets no
// longer fit, by address family: 4184 → 4164 still carries path MTU 4096 over
// IPv4 (4164-byte packets) but not over IPv6 (4184); 9000 → 4184 loses nothing;
// 1500 → 330 leaves no frame over IPv6 (256 needs 344) and 256 over IPv4.
func TestMTUChangedByFamily(t *testing.T) {
	for _, c := range []struct {
		old, mtu int
		want     string
	}{
		{4184, 4164, "the interface v's MTU changed from 4184 to 4164: the port's active_mtu is now 2048; QPs of a path MTU above 4096 over IPv4 (above 2048 over IPv6) send frames it no longer carries: set it back (ip link set v mtu 4184) or connect them again with a smaller path MTU"},
		{9000, 4184, "the interface v's MTU changed from 9000 to 4184: the port's active_mtu is now 4096"},
		{1500, 330, "the interface v's MTU changed from 1500 to 330: the port's active_mtu is now 256; QPs of a path MTU above 256 over IPv4 (any over IPv6) send frames it no longer carries: set it back (ip link set v mtu 1500) or connect them again with a smaller path MTU"},
		{1500, 300, "the interface v's MTU changed from 1500 to 300, which carries no RoCE frame (a path MTU of 256 needs 324 over IPv4, 344 over IPv6): nothing can be sent until it is raised again (ip link set v mtu 1500); the port reports active_mtu 256, as rdma_rxe does"},
	} {
		if got := mtuChanged("v", c.old, c.mtu, roce.MTUFromNetdev(c.mtu)); got != c.want {
			t.Errorf("%d → %d:\n got %s\nwant %s", c.old, c.mtu, got, c.want)
		}
	}
}

// needRoot skips a test that makes network namespaces and attaches XDP programs
// when it does not run as root.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces, XDP)")
	}
}

// TestDaemonDevNode: a daemon makes /dev/infiniband/<its name>, a character device
// with /dev/null's numbers and mode 0666, for UCX, which lists only devices whose
// node it can open read-write (uct_ib_device_is_accessible). Two daemons of one
// name (run directories apart) share it; it goes when the last of them stops, and
// /dev/infiniband with it when that was not there before.
func TestDaemonDevNode(t *testing.T) {
	needRoot(t)
	path := filepath.Join(devDir, "xroce0")
	if _, err := os.Lstat(path); err == nil {
		t.Skipf("%s exists already (a daemon running, or one killed)", path)
	}
	_, dirErr := os.Stat(devDir)
	n := testnet.New(t, testnet.Options{MTU: 1500})
	_, stopA := startDaemon(t, n.NsA, n.IfA, t.TempDir())
	_, stopB := startDaemon(t, n.NsB, n.IfB, t.TempDir())
	var st unix.Stat_t
	for deadline := time.Now().Add(5 * time.Second); unix.Lstat(path, &st) != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not made within 5 s of the daemons' sockets", path)
		}
	}
	if st.Mode != unix.S_IFCHR|0o666 || unix.Major(st.Rdev) != 1 || unix.Minor(st.Rdev) != 3 {
		t.Fatalf("%s: mode %#o, device %d, %d; want a character device 0666, 1, 3", path, st.Mode, unix.Major(st.Rdev), unix.Minor(st.Rdev))
	}
	stopA()
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatalf("%s went with the first daemon while the second serves: %v", path, err)
	}
	stopB()
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s after both daemons stopped: %v, want it gone", path, err)
	}
	if _, err := os.Stat(devDir); dirErr != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s, made by the daemons, is still there after both stopped: %v", devDir, err)
	}
}

// TestDaemonDevNodeOthers: what a daemon finds at /dev/infiniband/NAME that it did
// not make (found by a trial): a regular file is left as it is and the log says what
// it is and what to do; a node of xroce's numbers at another mode is made 0666 (UCX
// needs read-write access) and removed at the end; a node replaced while the daemon
// serves (another daemon's by then) is not removed when it stops.
func TestDaemonDevNodeOthers(t *testing.T) {
	needRoot(t)
	n := testnet.New(t, testnet.Options{MTU: 1500})
	_, dirErr := os.Stat(devDir)
	if err := os.MkdirAll(devDir, 0o755); err != nil {
		t.Fatal(err)
	}
	file, node, replaced := filepath.Join(devDir, "xrtfile"), filepath.Join(devDir, "xrtmode"), filepath.Join(devDir, "xrtrepl")
	t.Cleanup(func() {
		for _, p := range []string{file, node, replaced} {
			os.Remove(p)
		}
		if dirErr != nil {
			os.Remove(devDir)
		}
	})
	must(t, os.WriteFile(file, []byte("data\n"), 0o644))
	must(t, unix.Mknod(node, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))))
	must(t, os.Chmod(node, 0o600))

	cmd, out, done := spawnDaemon(t, n.NsA, n.IfA, t.TempDir(), "--name", "xrtfile")
	want := "warning: /dev/infiniband/xrtfile is a regular file, not the node xroce makes (a character device 1, 3), and is left as it is: " +
		"UCX lists xrtfile only when that path is a character device it can open read-write; remove it and restart the daemon"
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), want); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("daemon log has no %q within 10 s:\n%s", want, out.String())
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	<-done
	if b, err := os.ReadFile(file); err != nil || string(b) != "data\n" {
		t.Errorf("%s after the daemon: %q, %v; want it untouched", file, b, err)
	}

	_, stop := startDaemon(t, n.NsA, n.IfA, t.TempDir(), "--name", "xrtmode")
	var st unix.Stat_t
	for deadline := time.Now().Add(5 * time.Second); unix.Lstat(node, &st) != nil || st.Mode&0o777 != 0o666; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: mode %#o 5 s after the daemon started, want 0666", node, st.Mode&0o777)
		}
	}
	log, stopErr := stop()
	if _, err := os.Lstat(node); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s after its daemon stopped (%v): %v, want it gone; the daemon's log:\n%s", node, stopErr, err, log)
	}

	cmd, out, done = spawnDaemon(t, n.NsA, n.IfA, t.TempDir(), "--name", "xrtrepl")
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), "serving xrtrepl"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) { // logged once the node is made and locked
			t.Fatalf("no \"serving xrtrepl\" within 10 s:\n%s", out.String())
		}
	}
	must(t, os.Remove(replaced))
	must(t, unix.Mknod(replaced, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	_ = cmd.Process.Signal(syscall.SIGTERM)
	<-done
	if _, err := os.Lstat(replaced); err != nil {
		t.Errorf("%s, made again after the daemon's was removed, went with the daemon: %v", replaced, err)
	}
}

// TestRunBadLib: `xroce run` refuses an XROCE_LIB that is not the verbs library
// (random bytes, a directory, a shared library without the verbs API) with the
// fix; ld.so would only warn that it ignored it and run the application without
// the xroce devices, and run used to exit 0 then.
func TestRunBadLib(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.so")
	if err := os.WriteFile(junk, []byte("\x19\x1fnot an ELF file at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable() // a Go test binary: an ELF executable, not a shared object
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ lib, want string }{
		{junk, junk + " is not a shared library (bad magic number"},
		{dir, dir + " is not a shared library (read " + dir + ": is a directory)"},
		{self, self + " is an ELF ET_EXEC, not a shared library"},
	} {
		cmd := exec.Command(bin, "run", "--", "/bin/true")
		cmd.Env = append(os.Environ(), "XROCE_LIB="+c.lib)
		out, err := cmd.CombinedOutput()
		if exitCode(err) != 1 || !strings.HasPrefix(string(out), "xroce run: XROCE_LIB: "+c.want) ||
			!strings.HasSuffix(string(out), ": point it at libxroce.so (make libverbs builds bin/lib/libxroce.so)\n") {
			t.Errorf("XROCE_LIB=%s: %v\n%s\nwant exit status 1 and %q", c.lib, err, out, c.want)
		}
	}
}
