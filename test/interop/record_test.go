package interop

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xroce/xroce/test/testnet"
)

// TestRecordExchange records perftest's own out-of-band exchange, perftest against
// perftest, for the oob package's test vectors (cmd/xroce/oob/testdata). Both run
// in the guest on rdma_rxe (their RoCE traffic loops back inside it); the client
// connects to a TCP relay on the host side of the bridge, which passes the bytes on
// to the server, so the exchange crosses the bridge, where dumpcap records it
// (client ↔ relay, port 18515).
//
//	XROCE_RECORD=dir XROCE_RECORD_RUNS='name:perftest args;...' go test -run '^TestRecordExchange$' ./test/interop/
//
// records dir/name.pcap for each run ("name:ib_write_bw -d rxe0 -x 1 -F -n 5 -q 2"),
// the same arguments on both sides, and logs both sides' output.
func TestRecordExchange(t *testing.T) {
	dir, runs := os.Getenv("XROCE_RECORD"), os.Getenv("XROCE_RECORD_RUNS")
	if dir == "" || runs == "" {
		t.Skip("set XROCE_RECORD and XROCE_RECORD_RUNS")
	}
	img, err := Prepare(15 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	lab, err := NewLab(img, 1500)
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Close()
	for _, run := range strings.Split(runs, ";") {
		name, args, ok := strings.Cut(run, ":")
		if !ok {
			t.Fatalf("run %q: want name:arguments", run)
		}
		record(t, lab, filepath.Join(dir, name+".pcap"), strings.TrimSpace(args))
	}
}

// record runs one perftest pair through the relay, capturing the exchange.
func record(t *testing.T, lab *Lab, file, args string) {
	var ln net.Listener
	if err := inNetns(lab.NS, func() (err error) { ln, err = net.Listen("tcp", lab.XIP.String()+":18515"); return }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dump := exec.Command("ip", "netns", "exec", lab.NS, "dumpcap", "-q", "-i", "br0", "-f", "tcp port 18515", "-w", file)
	if err := dump.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var s net.Conn
		if err := inNetns(lab.NS, func() (err error) { s, err = net.Dial("tcp", lab.GuestIP.String()+":18516"); return }); err != nil {
			t.Error(err)
			return
		}
		defer s.Close()
		var relay sync.WaitGroup
		pass := func(dst, src net.Conn) {
			defer relay.Done()
			buf := make([]byte, 1<<16)
			for {
				n, err := src.Read(buf)
				if n > 0 {
					_, _ = dst.Write(buf[:n])
				}
				if err != nil {
					_ = dst.(*net.TCPConn).CloseWrite()
					return
				}
			}
		}
		relay.Add(2)
		go pass(s, c)
		go pass(c, s)
		relay.Wait()
	}()
	server := lab.Guest(args + " -p 18516")
	lab.Guest("i=0; while ! netstat -ltn | grep -q :18516 && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done")(40 * time.Second)
	cout, crc, cerr := lab.Guest(fmt.Sprintf("%s -p 18515 %s", args, lab.XIP))(3 * time.Minute)
	sout, src, serr := server(3 * time.Minute)
	ln.Close()
	wg.Wait()
	time.Sleep(300 * time.Millisecond)
	_ = dump.Process.Signal(syscall.SIGINT)
	_ = dump.Wait()
	t.Logf("%s: %s\n=== server (rc %d %v):\n%s\n=== client (rc %d %v):\n%s", filepath.Base(file), args, src, serr, sout, crc, cerr, cout)
	if crc != 0 || src != 0 || cerr != nil || serr != nil {
		t.Errorf("%s: perftest failed", args)
	}
}

// inNetns runs f on a thread in the named network namespace: sockets it opens stay
// in that namespace.
func inNetns(ns string, f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self, err := unix.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(self)
	target, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		return err
	}
	defer func() { _ = unix.Setns(self, unix.CLONE_NEWNET) }()
	return f()
}

// TestRecordCaptures records the rdma_rxe captures of the repository's testdata/
// (testdata/README.md says how each was made): two rdma_rxe guests on one bridge
// (a Pair), perftest or ibv_rc_pingpong between them, and for the hostpeer_ files
// xroce on the host side of the bridge over the kernel UDP link, all captured on
// the bridge by dumpcap as classic pcap.
//
//	XROCE_RECORD_CAPTURES=$PWD/testdata go test -count=1 -v -timeout 60m -run '^TestRecordCaptures$' ./test/interop/
//
// writes dir/rxe/*.pcap and dir/rxe-loss/*.pcap; XROCE_RECORD_ONLY=a,b records only
// the files whose names contain a or b.
func TestRecordCaptures(t *testing.T) {
	dir := os.Getenv("XROCE_RECORD_CAPTURES")
	if dir == "" {
		t.Skip("set XROCE_RECORD_CAPTURES to the directory to write (testdata)")
	}
	var only []string
	if s := os.Getenv("XROCE_RECORD_ONLY"); s != "" {
		only = strings.Split(s, ",")
	}
	img, err := Prepare(15 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	bin := xroceBin(t)
	pair, err := NewPair(img, 1500)
	if err != nil {
		t.Fatal(err)
	}
	defer pair.Close()
	// Ctrl-C or a timeout's SIGTERM still removes the namespace and stops QEMU.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	go func() {
		if _, ok := <-sig; ok {
			pair.Close()
			os.Exit(1)
		}
	}()
	t.Logf("guests booted in %v and %v (kernel %s)", pair.A.Booted.Round(time.Millisecond), pair.B.Booted.Round(time.Millisecond), img.Version)
	for _, q := range []string{"uname -r", "ib_write_bw --version", "ibv_devinfo -d rxe0 | grep -E 'fw_ver|active_mtu'", "rdma link"} {
		out, rc, err := pair.A.Guest(q)(time.Minute)
		t.Logf("guest A: %s (rc %d %v):\n%s", q, rc, err, out)
	}
	for _, r := range recordings() {
		if only != nil && !slices.ContainsFunc(only, func(s string) bool { return strings.Contains(r.file, s) }) {
			continue
		}
		file := filepath.Join(dir, r.file)
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Run(r.file, func(t *testing.T) {
			// perftest -R can lose a race with itself under TCG (the client's second
			// RDMA CM connection arrives before the server listens again, and is
			// rejected): a failed attempt is recorded again from the start.
			for attempt := 1; ; attempt++ {
				err := recordPair(t, pair, bin, file, r)
				if err == nil {
					return
				}
				pair.A.Guest(killPerftest)(20 * time.Second)
				pair.B.Guest(killPerftest)(20 * time.Second)
				if attempt == 3 {
					t.Fatalf("attempt %d: %v", attempt, err)
				}
				t.Logf("attempt %d: %v; again", attempt, err)
				time.Sleep(3 * time.Second)
			}
		})
	}
}

// recording is one capture file: its runs, one after the other, and the fault
// applied during all of them.
type recording struct {
	file  string // under the output directory
	runs  []pairRun
	fault string // "", "loss5" (5 % of UDP/4791 dropped in the bridge), "badicrc"
}

// pairRun is one run: a server and a client with the same arguments, except what
// the client adds.
type pairRun struct {
	args      string // both sides' arguments
	clientAdd string // the client's extra arguments
	host      bool   // the server is xroce on the host side (args are xroce's), the client guest B
	hostArgs  string // with host: the guest client's arguments
	cm        bool   // perftest -R: the server listens through RDMA CM, not TCP
}

// recordings is the capture set: shared/pcaps/README.md's list, recorded again.
func recordings() []recording {
	pt := func(tool string, sizes ...int) []pairRun {
		var runs []pairRun
		for _, s := range sizes {
			runs = append(runs, pairRun{args: fmt.Sprintf("%s -d rxe0 -x 1 -F -n 5 -s %d", tool, s)})
		}
		return runs
	}
	loss := func(tool string) []pairRun {
		return []pairRun{{args: tool + " -d rxe0 -x 1 -F -n 20 -s 8192"}}
	}
	host := func(n, s int) []pairRun {
		return []pairRun{{host: true, args: fmt.Sprintf("pingpong -n %d -s %d", n, s),
			hostArgs: fmt.Sprintf("ibv_rc_pingpong -d rxe0 -g 1 -n %d -s %d", n, s)}}
	}
	return []recording{
		{file: "rxe/ib_write_bw.pcap", runs: pt("ib_write_bw", 64, 2500)},
		{file: "rxe/ib_read_bw.pcap", runs: pt("ib_read_bw", 64, 2500)},
		{file: "rxe/ib_send_bw.pcap", runs: pt("ib_send_bw", 64, 2500)},
		{file: "rxe/ib_write_lat.pcap", runs: pt("ib_write_lat", 64, 2500)},
		{file: "rxe/ibv_rc_pingpong.pcap", runs: []pairRun{{args: "ibv_rc_pingpong -d rxe0 -g 1 -n 5 -s 64"}, {args: "ibv_rc_pingpong -d rxe0 -g 1 -n 5 -s 2500"}}},
		{file: "rxe/ib_atomic_bw.pcap", runs: []pairRun{{args: "ib_atomic_bw -d rxe0 -x 1 -F -n 5"}}},
		{file: "rxe/ib_write_bw_tclass106.pcap", runs: []pairRun{{args: "ib_write_bw -d rxe0 -x 1 -F -n 5 -s 64", clientAdd: "--tclass=106"}}},
		{file: "rxe/ib_write_bw_rdmacm.pcap", runs: []pairRun{{args: "ib_write_bw -d rxe0 -R -F -n 5 -s 64", cm: true}, {args: "ib_write_bw -d rxe0 -R -F -n 5 -s 2500", cm: true}}},
		{file: "rxe/hostpeer_rc_pingpong.pcap", runs: host(5, 64)},
		{file: "rxe/hostpeer_rc_pingpong_s2500.pcap", runs: host(3, 2500)},
		{file: "rxe/hostpeer_bad_icrc.pcap", runs: host(2, 64), fault: "badicrc"},
		{file: "rxe-loss/loss5_write.pcap", runs: loss("ib_write_bw"), fault: "loss5"},
		{file: "rxe-loss/loss5_read.pcap", runs: loss("ib_read_bw"), fault: "loss5"},
		{file: "rxe-loss/loss5_send.pcap", runs: loss("ib_send_bw"), fault: "loss5"},
	}
}

// killPerftest stops what a failed run left in a guest.
const killPerftest = "killall -9 ib_write_bw ib_read_bw ib_send_bw ib_atomic_bw ib_write_lat ibv_rc_pingpong 2>/dev/null; true"

// recordPair records one file; it is written only when every run succeeded.
func recordPair(t *testing.T, p *Pair, bin, file string, r recording) error {
	nsExec := func(args ...string) error { return sh(append([]string{"ip", "netns", "exec", p.NS}, args...)...) }
	tmp := file + ".tmp"
	dump := exec.Command("ip", "netns", "exec", p.NS, "dumpcap", "-q", "-P", "-i", "br0", "-f", "not ip6", "-w", tmp)
	var dumpOut testnet.Output
	dump.Stdout, dump.Stderr = &dumpOut, &dumpOut
	if err := dump.Start(); err != nil {
		return err
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			time.Sleep(500 * time.Millisecond)
			_ = dump.Process.Signal(syscall.SIGINT)
			_ = dump.Wait()
		}
	}
	defer stop()
	defer os.Remove(tmp)
	time.Sleep(time.Second)
	switch r.fault {
	case "loss5":
		// As in shared/pcaps/README.md: the capture point (the bridge's receive side)
		// sees every frame before the forward hook drops it.
		for _, c := range [][]string{{"add", "table", "bridge", "loss"},
			{"add", "chain", "bridge", "loss", "fw", "{ type filter hook forward priority 0; }"},
			{"add", "rule", "bridge", "loss", "fw", "udp", "dport", "4791", "numgen", "random", "mod", "100", "<", "5", "counter", "drop"}} {
			if err := nsExec(append([]string{"nft"}, c...)...); err != nil {
				return err
			}
		}
		defer func() { _ = nsExec("nft", "delete", "table", "bridge", "loss") }()
	case "badicrc":
		// The host's first SEND ONLY of 64 bytes (UDP length 8 + BTH 12 + 64 +
		// ICRC 4) leaves with its ICRC (UDP payload bytes 80-83, bits 672-703 of the
		// transport header) overwritten, on the namespace's output hook, before it
		// reaches the capture point.
		for _, c := range [][]string{{"add", "table", "inet", "badicrc"},
			{"add", "chain", "inet", "badicrc", "out", "{ type filter hook output priority 0; }"},
			{"add", "rule", "inet", "badicrc", "out", "udp", "dport", "4791", "udp", "length", "88", "numgen", "inc", "mod", "1000", "==", "0",
				"@th,672,32", "set", "0xdeadbeef", "counter"}} {
			if err := nsExec(append([]string{"nft"}, c...)...); err != nil {
				return err
			}
		}
		defer func() { _ = nsExec("nft", "delete", "table", "inet", "badicrc") }()
	}
	for i, run := range r.runs {
		if i > 0 {
			time.Sleep(2 * time.Second) // runs are told apart by a silence of more than a second
		}
		var sout, cout string
		var src, crc int
		var serr, cerr error
		if run.host {
			srv := exec.Command("ip", append([]string{"netns", "exec", p.NS, "timeout", "120", bin}, append(strings.Fields(run.args), "--link", "udp", "-d", p.HostIf)...)...)
			var sb testnet.Output
			srv.Stdout, srv.Stderr = &sb, &sb
			if err := srv.Start(); err != nil {
				return err
			}
			for i := 0; i < 100 && exec.Command("ip", "netns", "exec", p.NS, "sh", "-c", "ss -ltn | grep -q :18515").Run() != nil; i++ {
				time.Sleep(100 * time.Millisecond)
			}
			cout, crc, cerr = p.B.Guest(run.hostArgs + " " + p.HostIP.String())(2 * time.Minute)
			serr = srv.Wait()
			sout = sb.String()
		} else {
			server := p.A.Guest(run.args)
			wait := "netstat -ltn | grep -q :18515"
			if run.cm {
				wait = "rdma resource show cm_id | grep -q LISTEN"
			}
			p.A.Guest(fmt.Sprintf("i=0; while ! %s && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done", wait))(40 * time.Second)
			if run.cm {
				time.Sleep(time.Second)
			}
			cout, crc, cerr = p.B.Guest(strings.TrimSpace(run.args+" "+run.clientAdd) + " " + p.AIP.String())(5 * time.Minute)
			limit := 5 * time.Minute
			if crc != 0 || cerr != nil {
				limit = 10 * time.Second // the server may wait forever for a client that gave up
			}
			sout, src, serr = server(limit)
		}
		t.Logf("%s run %d: %s / client +%q\n=== server (rc %d %v):\n%s\n=== client (rc %d %v):\n%s",
			filepath.Base(file), i+1, run.args, run.clientAdd+run.hostArgs, src, serr, sout, crc, cerr, cout)
		if crc != 0 || src != 0 || cerr != nil || serr != nil {
			return fmt.Errorf("run %d failed", i+1)
		}
	}
	switch r.fault {
	case "loss5":
		out, _ := exec.Command("ip", "netns", "exec", p.NS, "nft", "list", "chain", "bridge", "loss", "fw").Output()
		t.Logf("loss rule: %s", out)
	case "badicrc":
		out, _ := exec.Command("ip", "netns", "exec", p.NS, "nft", "list", "chain", "inet", "badicrc", "out").Output()
		if !strings.Contains(string(out), "counter packets 1 ") {
			return fmt.Errorf("the ICRC rule did not act once:\n%s", out)
		}
	}
	stop()
	if err := os.Rename(tmp, file); err != nil {
		return err
	}
	st, _ := os.Stat(file)
	t.Logf("%s: %d bytes; dumpcap: %s", file, st.Size(), dumpOut.String())
	return nil
}
