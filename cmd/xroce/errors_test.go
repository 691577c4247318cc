package main

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/xroce/xroce/test/testnet"
)

// run runs xroce in a namespace and returns its combined output and error.
func runIn(ns string, args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", ns, "timeout", "60", bin}, args...)...).CombinedOutput()
	return string(out), err
}

func wantErr(t *testing.T, what, out string, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: succeeded:\n%s", what, out)
		return
	}
	for _, p := range parts {
		if !strings.Contains(out, p) {
			t.Errorf("%s: no %q in\n%s", what, p, out)
		}
	}
}

// TestErrorMessages triggers each failure users meet in the field and checks the
// message says what to do.
func TestErrorMessages(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	out, err := runIn(n.NsA, "write_bw", "-d", n.IfA, "-x", "7")
	wantErr(t, "GID index out of range", out, err, "GID index 7 out of range", "  1  ::ffff:10.79.0.1", "use -x")
	out, err = runIn(n.NsA, "write_bw", "-d", n.IfA, "-D", "-1")
	wantErr(t, "negative duration", out, err, "-D -1: the duration is in seconds, 1..31536000")
	out, err = runIn(n.NsA, "write_bw", "-d", n.IfA, "--busy-poll", "-1s")
	wantErr(t, "negative busy poll", out, err, "--busy-poll -1s: 0 (never) or a positive duration")
	out, err = runIn(n.NsA, "write_bw", "-d", n.IfA, "-n", "0")
	wantErr(t, "no iterations", out, err, "-n 0: the number of iterations must be at least 1")
	out, err = runIn(n.NsA, "write_bw", "-d", n.IfA, "-t", "0")
	wantErr(t, "no TX depth", out, err, "-t 0: the TX depth must be at least 1")
	// crosscheck and --provider refuse bad values with what they take.
	out, err = runIn(n.NsA, "crosscheck", "-d", n.IfA, "-m", "1000")
	wantErr(t, "crosscheck -m", out, err, "-m 1000")
	out, err = runIn(n.NsA, "crosscheck", "-d", n.IfA, "10.0.0.1", "10.0.0.2")
	wantErr(t, "crosscheck two addresses", out, err, "one server address at most")
	out, err = runIn(n.NsA, "write_bw", "-d", n.IfA, "--provider", "bogus")
	wantErr(t, "unknown provider", out, err, `--provider "bogus": want engine (xroce's own) or verbs (libibverbs)`)
	out, err = runIn(n.NsA, "write_bw", "-d", "rxe0", "--provider", "verbs")
	wantErr(t, "verbs not built", out, err, "built without libibverbs; build it with `make verbs`")
	out, err = runIn(n.NsA, "pingpong", "-d", n.IfA, "-g", "7")
	wantErr(t, "pingpong GID index out of range", out, err, "GID index 7 out of range", "use -g with one of these")

	// A device without native XDP (a bridge here; virtio_net and cloud NICs too).
	testnet.Sh(t, "ip", "-n", n.NsA, "link", "add", "xbr0", "type", "bridge")
	testnet.Sh(t, "ip", "-n", n.NsA, "addr", "add", "10.79.7.1/24", "dev", "xbr0")
	testnet.Sh(t, "ip", "-n", n.NsA, "link", "set", "xbr0", "up")
	out, err = runIn(n.NsA, "write_bw", "-d", "xbr0", "--xdp-mode", "native")
	wantErr(t, "no native XDP", out, err, "in native mode", "operation not supported", "use --xdp-mode auto or generic")

	// veth has no AF_XDP zero-copy: asked for, it is refused with the cause and the fix.
	start := time.Now()
	out, err = runIn(n.NsA, "write_bw", "-d", n.IfA, "--xdp-bind", "zero-copy")
	wantErr(t, "zero-copy on veth", out, err, "AF_XDP zero-copy refused on "+n.IfA+" (driver veth)", "use --xdp-bind auto")
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the zero-copy refusal took %v", d)
	}
	out, err = runIn(n.NsA, "write_bw", "-d", n.IfA, "--xdp-bind", "zerocopy")
	wantErr(t, "bad --xdp-bind", out, err, `--xdp-bind: AF_XDP bind "zerocopy": want auto, zero-copy or copy`)

	testnet.Sh(t, "ip", "-n", n.NsA, "link", "add", "xnoaddr0", "type", "veth", "peer", "name", "xnoaddr1")
	testnet.Sh(t, "ip", "-n", n.NsA, "link", "set", "xnoaddr0", "up")
	out, err = runIn(n.NsA, "write_bw", "-d", "xnoaddr0", "--link", "udp")
	wantErr(t, "no address", out, err, "has no IP address", "ip addr add")

	for _, c := range []struct{ args, want []string }{
		{[]string{"write_bw", "-d", n.IfA, "--tclass", "999"}, []string{"--tclass 999: the traffic class is 0..255"}},
		{[]string{"write_bw", "-d", n.IfA, "-x", "-7"}, []string{"-x -7: GID indexes start at 0"}},
		{[]string{"write_bw", "-d", n.IfA, "-p", "70000"}, []string{"-p 70000: TCP ports are 1..65535"}},
		{[]string{"gids", "-d", "lo"}, []string{`interface "lo" has no Ethernet address`}},
		{[]string{"devinfo", "-d", "lo"}, []string{`interface "lo" has no Ethernet address`, "give -d an Ethernet interface"}},
		{[]string{"write_bw", "-d", "lo"}, []string{`interface "lo" has no Ethernet address`, "give -d an Ethernet interface"}},
		{[]string{"devinfo", "-d", "nosuch0"}, []string{`interface "nosuch0": no such network interface in this network namespace`}},
		{[]string{"write_lat", "-d", n.IfA, "-q", "2"}, []string{"-q 2: multiple QPs only available on bw tests"}},
		{[]string{"write_bw", "-d", n.IfA, "-q", "0"}, []string{"-q 0: the number of QPs is 1..64"}},
		{[]string{"write_bw", "-d", n.IfA, "-q", "64", "-t", "1024"}, []string{"-q 64 with -t 1024 and -r 1: the QPs may have 65600 work requests outstanding, more than a CQ holds (max_cqe 32767): lower -q, -t or -r"}},
		// A receive depth the device cannot take is refused at once (it used to
		// post 100 million receives, gigabytes, before opening its port).
		{[]string{"pingpong", "-d", n.IfA, "-r", "100000000"}, []string{"-r 100000000: at most 32759 (the receives and a few sends complete to one CQ, and the device's max_cqe is 32767)"}},
		{[]string{"pingpong", "-d", n.IfA, "--connection", "UD", "-r", "32760"}, []string{"-r 32760: at most 32759"}},
		{[]string{"atomic_bw", "-d", n.IfA, "-a"}, []string{"-a: the message size cannot be changed for atomic tests"}},
		{[]string{"write_bw", "-d", n.IfA, "-a", "-D", "2"}, []string{"-a runs -n iterations of each size", "-D"}},
		{[]string{"atomic_bw", "-d", n.IfA, "-A", "SWAP"}, []string{"-A SWAP: FETCH_AND_ADD or CMP_AND_SWAP"}},
		{[]string{"atomic_bw", "-d", n.IfA, "-A", "CMP_AND_SWAP", "--verify"}, []string{"it does not go with -A CMP_AND_SWAP"}},
		{[]string{"write_lat", "-d", n.IfA, "-D", "3"}, []string{"-D and --run_infinitely are for the bandwidth tests: write_lat runs -n iterations"}},
		{[]string{"read_lat", "-d", n.IfA, "--run_infinitely"}, []string{"-D and --run_infinitely are for the bandwidth tests: read_lat runs -n iterations"}},
	} {
		out, err := runIn(n.NsA, c.args...)
		wantErr(t, strings.Join(c.args, " "), out, err, c.want...)
	}

	// A second xroce on the same interface is told what is going on.
	busy := startIn(t, n.NsA, 20*time.Second, "write_bw", "-d", n.IfA)
	for i := 0; i < 100 && !strings.Contains(busy.out.String(), "Waiting for client"); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	out, err = runIn(n.NsA, "write_bw", "-d", n.IfA, "-p", "18600")
	wantErr(t, "interface in use", out, err, "another xroce process is using "+n.IfA)
	out, err = runIn(n.NsA, "write_bw", "-d", n.IfA, "--link", "udp", "-p", "18601")
	wantErr(t, "UDP link beside AF_XDP", out, err, "another xroce process is using it over AF_XDP", "stop it or use another interface")
	busy.kill()

	out, err = runIn(n.NsA, "write_bw", "-d", "nosuch0")
	wantErr(t, "no interface", out, err, `interface "nosuch0"`, "no such network interface")

	out, err = runIn(n.NsA, "write_bw", "-d", n.IfA, "-p", "29999", n.IPB.String())
	wantErr(t, "TCP refused", out, err, "refused the connection", "start the server first")

	out, err = runIn(n.NsA, "write_bw", "-d", n.IfA, "10.79.0.99")
	wantErr(t, "no host", out, err, "no route to 10.79.0.99:18515: nothing answers at that address", "wrong address")
	out, err = runIn(n.NsA, "write_bw", "-d", n.IfA, "10.250.7.9") // outside every route
	wantErr(t, "no route", out, err, "no route to 10.250.7.9:18515 in this network namespace (network is unreachable): check the address, or add a route")
	out, err = runIn(n.NsA, "write_bw", "-d", n.IfA, "fe80::1")
	wantErr(t, "link-local without zone", out, err, "fe80::1 is link-local: name the interface it is on, as in fe80::1%eth0")
	out, err = runIn(n.NsA, "write_bw", "-d", n.IfA, "-p", "29999", "[fd79::2]")
	wantErr(t, "bracketed IPv6", out, err, "[fd79::2]:29999") // dialled as an address, not "[[fd79::2]]"

	// GID kinds: the server on its IPv6 GID, the client on IPv4.
	srv, cli, srvErr, cliErr := pairRaw(t, n, []string{"write_bw", "-d", n.IfB, "-x", "2", "-n", "10"},
		[]string{"write_bw", "-d", n.IfA, "-n", "10", n.IPB.String()})
	wantErr(t, "GID kind mismatch (client)", cli, cliErr, "GID kind mismatch", "IPv4-mapped", "use -x 2")
	wantErr(t, "GID kind mismatch (server)", srv, srvErr, "GID kind mismatch", "use -x 1")

	// A SEND larger than the server's receives: the server says why.
	srv, _, srvErr, _ = pairRaw(t, n, []string{"send_bw", "-d", n.IfB, "-s", "100", "-n", "10"},
		[]string{"send_bw", "-d", n.IfA, "-s", "4000", "-n", "10", n.IPB.String()})
	wantErr(t, "SEND larger than the receive (server)", srv, srvErr, "IBV_WC_LOC_LEN_ERR", "larger than our receive buffer")

	// Different -q on the two sides: the exchange says so.
	_, cli, _, cliErr = pairRaw(t, n, []string{"write_bw", "-d", n.IfB, "-q", "2", "-n", "10"},
		[]string{"write_bw", "-d", n.IfA, "-n", "10", n.IPB.String()})
	wantErr(t, "-q mismatch", cli, cliErr, "out of step", "same -q")

	// Path MTUs differ: both say so and use the smaller.
	srv, cli = pair(t, n, []string{"write_bw", "-d", n.IfB, "-n", "50"}, []string{"write_bw", "-d", n.IfA, "-m", "512", "-n", "50", n.IPB.String()})
	for who, o := range map[string]string{"server": srv, "client": cli} {
		if !strings.Contains(o, "Mtu             : 512[B]") || !strings.Contains(o, "using 512[B]") {
			t.Errorf("%s: MTU mismatch not reported:\n%s", who, o)
		}
	}

	// A message larger than the peer's region.
	srv, cli, srvErr, cliErr = pairRaw(t, n, []string{"write_bw", "-d", n.IfB, "-s", "4096", "-n", "10"},
		[]string{"write_bw", "-d", n.IfA, "-s", "65536", "-n", "10", n.IPB.String()})
	wantErr(t, "size larger than the region", cli, cliErr, "IBV_WC_REM_ACCESS_ERR", "its buffer is smaller than -s (give both sides the same -s)")
	_, _ = srv, srvErr

	// -a on the client only: the server's buffer holds its one -s (64 KiB), and the
	// client's sizes pass it.
	_, cli, _, cliErr = pairRaw(t, n, []string{"write_bw", "-d", n.IfB, "-n", "10"},
		[]string{"write_bw", "-d", n.IfA, "-a", "-n", "10", n.IPB.String()})
	wantErr(t, "-a on the client only", cli, cliErr, "IBV_WC_REM_ACCESS_ERR", "as when the peer runs without -a (give -a to both sides)")
}

// TestPeerNotAnswering: a bridge that drops every RoCE frame makes the client give
// up after its retries, with the usual causes named.
func TestPeerNotAnswering(t *testing.T) {
	n := testnet.New(t, testnet.Options{Bridge: true})
	testnet.Sh(t, "ip", "netns", "exec", n.NsBr, "nft", "add", "table", "bridge", "chaos")
	testnet.Sh(t, "ip", "netns", "exec", n.NsBr, "nft", "add", "chain", "bridge", "chaos", "fw", "{ type filter hook forward priority 0; }")
	testnet.Sh(t, "ip", "netns", "exec", n.NsBr, "nft", "add", "rule", "bridge", "chaos", "fw", "udp", "dport", "4791", "drop")
	testnet.Sh(t, "ip", "netns", "exec", n.NsBr, "nft", "add", "rule", "bridge", "chaos", "fw", "tcp", "dport", "28000", "drop")
	_, cli, _, cliErr := pairRaw(t, n, []string{"write_bw", "-d", n.IfB, "-n", "10"}, []string{"write_bw", "-d", n.IfA, "-n", "10", n.IPB.String()})
	wantErr(t, "peer not answering", cli, cliErr, "IBV_WC_RETRY_EXC_ERR", "wrong GID index (-x)", "path MTU", "UDP port 4791")
	// A TCP exchange that gets no answer at all (a firewall dropping it) times out.
	out, err := runIn(n.NsA, "write_bw", "-d", n.IfA, "-p", "28000", n.IPB.String())
	wantErr(t, "TCP timeout", out, err, "no answer from 10.79.0.2:28000 within 10s")
}

// TestUnprivileged: without CAP_BPF/CAP_NET_ADMIN the AF_XDP link is refused with a
// pointer to --link udp.
func TestUnprivileged(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	out, err := exec.Command("ip", "netns", "exec", n.NsA, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
		"--inh-caps=-all", "--bounding-set=-all", bin, "write_bw", "-d", n.IfA).CombinedOutput()
	wantErr(t, "unprivileged", string(out), err, "CAP_BPF", "--link udp", "operation not permitted")
	if strings.Contains(string(out), "rlimit.RemoveMemlock") {
		t.Errorf("the message ends with a library's hint:\n%s", out)
	}
}

// TestUMEMOverMemlock: without CAP_IPC_LOCK the kernel charges an AF_XDP socket's
// UMEM to RLIMIT_MEMLOCK and answers ENOBUFS beyond it, even where BPF maps need
// no such limit; the message names the limit, its value and the fixes, within
// seconds. (Raising the limit, which xroce tries first, needs CAP_SYS_RESOURCE,
// which this machine's root lacks: the success side is not tested here.)
func TestUMEMOverMemlock(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	start := time.Now()
	out, err := exec.Command("ip", "netns", "exec", n.NsA, "prlimit", "--memlock=65536", "setpriv",
		"--inh-caps=-ipc_lock,-sys_resource", "--bounding-set=-ipc_lock,-sys_resource", "timeout", "30", bin, "write_bw", "-d", n.IfA).CombinedOutput()
	wantErr(t, "UMEM over RLIMIT_MEMLOCK", string(out), err, "the AF_XDP UMEM is locked memory beyond RLIMIT_MEMLOCK",
		"CAP_IPC_LOCK", "ulimit -l unlimited", "each queue pins 16 MiB; RLIMIT_MEMLOCK is 64 KiB", "no buffer space available")
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the error took %v", d)
	}
}

// TestHelp: asking for the usage (-h, --help, help) prints it and succeeds; no
// command at all, or an unknown one, is an error; a tool's help lists what it takes.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"write_bw", "--help"}, {"dump", "-h"}, {"pingpong", "--help"}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil || !strings.Contains(strings.ToLower(string(out)), "usage") {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
	// The help says what the tool takes: -I up to transport.MaxInline, and no -q
	// or --verify-all on a latency test, which refuses them (a fresh user's trial).
	lat, _ := exec.Command(bin, "write_lat", "-h").CombinedOutput()
	bw, _ := exec.Command(bin, "write_bw", "-h").CombinedOutput()
	if strings.Contains(string(lat), "--qp int") || strings.Contains(string(lat), "--verify-all") || !strings.Contains(string(bw), "--qp int") ||
		!strings.Contains(string(bw), "inline (at most 512)") {
		t.Errorf("write_lat -h:\n%s\nwrite_bw -h:\n%s", lat, bw)
	}
	for _, args := range [][]string{{}, {"nosuch"}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
			t.Errorf("%v: %v, want exit status 2\n%s", args, err, out)
		}
	}
}

// TestInterfaceGone: the veth pair deleted mid-run: the client says its interface
// is gone within seconds (it waited 30 s for a completion first), and so does the
// server, waiting for the end of the client's test (it blamed the exchange after
// 120 s).
func TestInterfaceGone(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	server := startIn(t, n.NsB, 60*time.Second, "write_bw", "-d", n.IfB, "-n", "100000000")
	for i := 0; i < 500 && !strings.Contains(server.out.String(), "Waiting for client"); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	client := startIn(t, n.NsA, 60*time.Second, "write_bw", "-d", n.IfA, "-n", "100000000", n.IPB.String())
	time.Sleep(2 * time.Second)
	testnet.Sh(t, "ip", "-n", n.NsA, "link", "del", n.IfA)
	deleted := time.Now()
	cliErr := client.wait(time.Hour)
	cliTook := time.Since(deleted)
	srvErr := server.wait(time.Hour)
	srvTook := time.Since(deleted)
	wantErr(t, "interface deleted (client)", client.out.String(), cliErr, "the interface "+n.IfA+" is gone (deleted, or moved to another namespace)")
	// Deleting one end of a veth pair deletes the other: the server's goes too.
	wantErr(t, "interface deleted (server)", server.out.String(), srvErr, "oob: waiting for the peer's exchange: the interface "+n.IfB+" is gone (deleted, or moved to another namespace)")
	if cliTook > 5*time.Second || srvTook > 6*time.Second {
		t.Errorf("after the interface was deleted the client ran %v, the server %v; want at most 5 s and 6 s", cliTook.Round(time.Millisecond), srvTook.Round(time.Millisecond))
	}
}

// TestInterfaceDown: an interface that is down, or has no carrier, is refused at
// start with the fix, on either side (the client was told "no route ... host is
// down", the server waited for a client for ever).
func TestInterfaceDown(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	testnet.Sh(t, "ip", "-n", n.NsA, "link", "set", n.IfA, "down")
	for _, c := range []struct {
		ns   string
		args []string
		want string
	}{
		{n.NsA, []string{"write_bw", "-d", n.IfA, n.IPB.String()}, "xroce write_bw: the interface " + n.IfA + " is down: bring it up (ip link set " + n.IfA + " up)\n"},
		{n.NsA, []string{"pingpong", "-d", n.IfA}, "xroce pingpong: the interface " + n.IfA + " is down: bring it up (ip link set " + n.IfA + " up)\n"},
		{n.NsB, []string{"send_bw", "-d", n.IfB}, "xroce send_bw: the interface " + n.IfB + " has no carrier: its link is down (a cable, the switch port, or the other end of a veth pair); nothing reaches the peer until it is up\n"},
	} {
		p := startIn(t, c.ns, 20*time.Second, c.args...)
		err := p.wait(5 * time.Second) // 3 s of them for the carrier
		if exitCode(err) != 1 || p.out.String() != c.want {
			t.Errorf("%v: %v\n%s\nwant exit status 1 within 5 s and %q", c.args, err, p.out.String(), c.want)
		}
	}
}

// TestRNRStall: a send_bw server that receives fewer messages (-n 10) than the
// client sends (-n 400) leaves the client's SENDs answered by RNR NAKs for ever
// (rnr_retry 7). The client ends 5 s into nothing but RNR NAKs, naming the cause,
// instead of waiting in silence.
func TestRNRStall(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	start := time.Now()
	_, cli, _, cliErr := pairRaw(t, n, []string{"send_bw", "-d", n.IfB, "-n", "10", "-s", "4096"},
		[]string{"send_bw", "-d", n.IfA, "-n", "400", "-s", "4096", n.IPB.String()})
	wantErr(t, "RNR stall", cli, cliErr, "no completion for 5s: the peer posts no receives (RNR NAK, ", "times in the last 5s): are -n (and pingpong's -r) the same on both sides")
	if el := time.Since(start); el > 15*time.Second {
		t.Errorf("the client ended after %v, want about 5 s", el.Round(time.Second))
	}
}

// TestNotSupportedYet: perftest flags the tools lack are refused as not supported,
// with the reason, not as unknown flags.
func TestNotSupportedYet(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"write_bw", "-z"}, "-z/--comm_rdma_cm is not supported yet: the exchange runs over TCP, or with -R both it and the test QPs over the RDMA CM"},
		{[]string{"write_bw", "--comm_rdma_cm"}, "-z/--comm_rdma_cm is not supported yet"},
	} {
		out, err := exec.Command(bin, c.args...).CombinedOutput()
		wantErr(t, strings.Join(c.args, " "), string(out), err, c.want)
	}
}

// TestUDPThenXDP: an xroce over the UDP link, then one over AF_XDP on the same
// interface: the second is refused at once, naming the first (it attached its XDP
// program, took the first one's frames, and the first failed with RETRY_EXC_ERR).
// The other order is refused in TestErrorMessages.
func TestUDPThenXDP(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	udp := startIn(t, n.NsA, 30*time.Second, "write_bw", "--link", "udp", "-d", n.IfA)
	for i := 0; i < 500 && !strings.Contains(udp.out.String(), "Waiting for client"); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	x := startIn(t, n.NsA, 30*time.Second, "write_bw", "-d", n.IfA, "-p", "18600")
	err := x.wait(5 * time.Second)
	want := "has UDP port 4791 open in this network namespace (xroce --link udp, or another RoCE stack over UDP): an XDP program on " + n.IfA + " would take the RoCE frames that process receives there; stop it, or run this xroce in another network namespace\n"
	if exitCode(err) != 1 || !strings.Contains(x.out.String(), "xroce write_bw: PID ") || !strings.HasSuffix(x.out.String(), want) {
		t.Errorf("AF_XDP after the UDP link: %v\n%s\nwant exit status 1 within 5 s and %q", err, x.out.String(), want)
	}
}
