package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/test/testnet"
)

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "xroce-cli")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "xroce")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as make bin/xroce builds it
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building xroce: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// pair runs `xroce args...` as a server in namespace B and as a client in A, and
// returns both outputs. It fails the test if either exits non-zero.
func pair(t *testing.T, n *testnet.Net, srvArgs, cliArgs []string) (string, string) {
	t.Helper()
	out, errOut, srvErr, cliErr := pairRaw(t, n, srvArgs, cliArgs)
	if srvErr != nil || cliErr != nil {
		t.Fatalf("server: %v\n%s\nclient: %v\n%s", srvErr, out, cliErr, errOut)
	}
	return out, errOut
}

func pairRaw(t *testing.T, n *testnet.Net, srvArgs, cliArgs []string) (srv, cli string, srvErr, cliErr error) {
	t.Helper()
	server := startIn(t, n.NsB, 60*time.Second, srvArgs...)
	// Wait for the server's TCP listener.
	quiet := cliArgs[0] == "pingpong"
	for i := 0; i < 500 && !strings.Contains(server.out.String(), "Waiting for client") && !quiet; i++ {
		time.Sleep(20 * time.Millisecond)
		quiet = quiet || i%10 == 9 && listening(n.NsB, 18515) // --output prints no banner
	}
	if quiet { // rc_pingpong's server prints nothing: watch for its socket
		for i := 0; i < 500 && !listening(n.NsB, 18515); i++ {
			time.Sleep(20 * time.Millisecond)
		}
	}
	client := startIn(t, n.NsA, 60*time.Second, cliArgs...)
	cliErr = client.wait(time.Hour)
	srvErr = server.wait(time.Hour)
	return server.out.String(), client.out.String(), srvErr, cliErr
}

var (
	bwLine  = regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$`)
	latLine = regexp.MustCompile(`(?m)^ (\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$`)
)

// checkTable asserts the output holds the test's table with a non-zero figure and,
// with --verify, the verification line.
func checkTable(t *testing.T, who, out string, lat bool, size, iters int, verify bool) {
	t.Helper()
	re := bwLine
	if lat {
		re = latLine
	}
	m := re.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("%s: no result table in\n%s", who, out)
	}
	if s, _ := strconv.Atoi(m[1]); s != size {
		t.Errorf("%s: #bytes %s, want %d", who, m[1], size)
	}
	if it, _ := strconv.Atoi(m[2]); it != iters {
		t.Errorf("%s: #iterations %s, want %d", who, m[2], iters)
	}
	if v, _ := strconv.ParseFloat(m[4], 64); v <= 0 {
		t.Errorf("%s: figure %s is not positive", who, m[4])
	}
	if verify && !strings.Contains(out, " Data verified: ") {
		t.Errorf("%s: no data verification in\n%s", who, out)
	}
}

// TestPerftestCommands: every test subcommand, xroce client against xroce server,
// over both links, with --verify.
func TestPerftestCommands(t *testing.T) {
	for _, link := range []string{"xdp", "udp"} {
		n := testnet.New(t, testnet.Options{MTU: 1500})
		for _, c := range []struct {
			cmd  string
			size int
		}{
			{"write_bw", 65536}, {"read_bw", 65536}, {"send_bw", 4000}, {"atomic_bw", 8},
			{"write_lat", 64}, {"read_lat", 64}, {"send_lat", 64},
		} {
			t.Run(link+"/"+c.cmd, func(t *testing.T) {
				iters := 300
				args := []string{c.cmd, "--link", link, "--verify", "-s", fmt.Sprint(c.size), "-n", fmt.Sprint(iters)}
				srv, cli := pair(t, n, append(args, "-d", n.IfB), append(args, "-d", n.IfA, n.IPB.String()))
				lat := strings.HasSuffix(c.cmd, "_lat")
				checkTable(t, "client", cli, lat, c.size, iters, c.cmd != "write_bw" && c.cmd != "send_bw" && c.cmd != "atomic_bw")
				if !(c.cmd == "read_lat") {
					checkTable(t, "server", srv, lat, c.size, iters, c.cmd != "read_bw")
				}
			})
		}
	}
}

// checkAllTable asserts the output holds a -a table: a row for each size from 2 to
// 2^23 bytes, in order, each with iters iterations and positive figures; with verify, the line saying every
// size was verified. Bandwidth rows must show a message rate, and a bandwidth from
// 64 bytes up: perftest prints MB/s with two decimals, so a few thousand 2-byte
// messages a second (the UDP link's first size) print as 0.00 or 0.01.
func checkAllTable(t *testing.T, who, out string, lat bool, iters int, verify bool) {
	t.Helper()
	re := bwLine
	if lat {
		re = latLine
	}
	rows := re.FindAllStringSubmatch(out, -1)
	if len(rows) != 23 {
		t.Fatalf("%s: %d table rows, want 23 (2 to 8388608 bytes):\n%s", who, len(rows), out)
	}
	for i, m := range rows {
		if s, _ := strconv.Atoi(m[1]); s != 2<<i {
			t.Errorf("%s: row %d is for %s bytes, want %d", who, i, m[1], 2<<i)
		}
		if it, _ := strconv.Atoi(m[2]); it != iters {
			t.Errorf("%s: row %d: #iterations %s, want %d", who, i, m[2], iters)
		}
		figure := 4 // BW average; t_typical
		if !lat && 2<<i < 64 {
			figure = 5 // MsgRate
		}
		if v, _ := strconv.ParseFloat(m[figure], 64); v <= 0 {
			t.Errorf("%s: row %d: figure %s is not positive", who, i, m[figure])
		}
		if r, _ := strconv.ParseFloat(m[5], 64); !lat && r <= 0 {
			t.Errorf("%s: row %d: message rate %s is not positive", who, i, m[5])
		}
	}
	if verify && !strings.Contains(out, " Data verified: the last message of each size, 2 to 8388608 bytes\n") {
		t.Errorf("%s: no data verification of every size in\n%s", who, out)
	}
}

// TestPerftestAll: -a, xroce client against xroce server, over both links, with
// --verify: the client prints a row per size; the server too, except write_bw's and
// read_bw's, which print their client's last row, and read_lat's, which prints none
// (as perftest's do). The receiver of each size's data checks it.
func TestPerftestAll(t *testing.T) {
	for _, link := range []string{"xdp", "udp"} {
		n := testnet.New(t, testnet.Options{MTU: 1500})
		for _, cmd := range []string{"write_bw", "read_bw", "send_bw", "write_lat", "read_lat", "send_lat"} {
			t.Run(link+"/"+cmd, func(t *testing.T) {
				iters := 20
				args := []string{cmd, "--link", link, "--verify", "-a", "-n", fmt.Sprint(iters)}
				srv, cli := pair(t, n, append(args, "-d", n.IfB), append(args, "-d", n.IfA, n.IPB.String()))
				lat := strings.HasSuffix(cmd, "_lat")
				checkAllTable(t, "client", cli, lat, iters, cmd == "read_bw" || cmd == "write_lat" || cmd == "read_lat" || cmd == "send_lat")
				switch cmd {
				case "write_bw", "read_bw":
					checkTable(t, "server", srv, false, 1<<23, iters, cmd == "write_bw")
					if rows := bwLine.FindAllString(srv, -1); len(rows) != 1 {
						t.Errorf("server: %d rows, want the client's last one:\n%s", len(rows), srv)
					}
				case "read_lat":
					if latLine.MatchString(srv) {
						t.Errorf("read_lat server printed a table:\n%s", srv)
					}
				default:
					checkAllTable(t, "server", srv, lat, iters, true)
				}
			})
		}
	}
}

// TestPerftestQPs: -q 2 on every bandwidth test, over both links, with --verify:
// #iterations counts both QPs' (as perftest's does), each QP's data is checked, and
// both sides list both QPs.
func TestPerftestQPs(t *testing.T) {
	for _, link := range []string{"xdp", "udp"} {
		n := testnet.New(t, testnet.Options{MTU: 1500})
		for _, c := range []struct {
			cmd  string
			size int
		}{{"write_bw", 65536}, {"read_bw", 65536}, {"send_bw", 4000}, {"atomic_bw", 8}} {
			t.Run(link+"/"+c.cmd, func(t *testing.T) {
				iters := 300
				args := []string{c.cmd, "--link", link, "--verify", "-q", "2", "-s", fmt.Sprint(c.size), "-n", fmt.Sprint(iters)}
				srv, cli := pair(t, n, append(args, "-d", n.IfB), append(args, "-d", n.IfA, n.IPB.String()))
				checkTable(t, "client", cli, false, c.size, 2*iters, false)
				checkTable(t, "server", srv, false, c.size, 2*iters, false)
				verifier, other := srv, cli
				if c.cmd == "read_bw" {
					verifier, other = cli, srv
				}
				want := fmt.Sprintf(" Data verified: the %d bytes of the last message, on each of the 2 QPs\n", c.size)
				if c.cmd == "atomic_bw" {
					want = fmt.Sprintf(" Data verified: counter %d after %d FETCH_AND_ADD\n", 2*iters, 2*iters)
				}
				if !strings.Contains(verifier, want) || strings.Contains(other, "Data verified") {
					t.Errorf("want %q from the side that received the data:\nserver:\n%s\nclient:\n%s", want, srv, cli)
				}
				for who, out := range map[string]string{"server": srv, "client": cli} {
					if !strings.Contains(out, " Number of qps   : 2\t\t") || strings.Count(out, " local address: ") != 2 || strings.Count(out, " remote address: ") != 2 {
						t.Errorf("%s: not two QPs in the header:\n%s", who, out)
					}
				}
			})
		}
	}
}

// TestAtomicDurationVerify: atomic_bw -D with --verify passes: the counters' sum
// lies between the FETCH_AND_ADDs the client completed within -D and those plus
// the -t then in flight, which execute all the same. A trial found it failing
// every run ("the counters add up to 669728 after 669700").
func TestAtomicDurationVerify(t *testing.T) {
	n := testnet.New(t, testnet.Options{MTU: 1500})
	args := []string{"atomic_bw", "--verify", "-D", "1"}
	srv, cli := pair(t, n, append(args, "-d", n.IfB), append(args, "-d", n.IfA, n.IPB.String()))
	m := regexp.MustCompile(`(?m)^ Data verified: counter (\d+) after (\d+) FETCH_AND_ADD completed within -D and (\d+) then in flight$`).FindStringSubmatch(srv)
	if m == nil {
		t.Fatalf("no verify line:\nserver:\n%s\nclient:\n%s", srv, cli)
	}
	sum, done, flight := atoi(m[1]), atoi(m[2]), atoi(m[3])
	if sum != done+flight || flight > 128 || done == 0 {
		t.Errorf("counter %d after %d completed and %d in flight (at most 128)", sum, done, flight)
	}
}

// TestPingpongCommand: pingpong over both links, rc_pingpong's output.
func TestPingpongCommand(t *testing.T) {
	for _, link := range []string{"xdp", "udp"} {
		t.Run(link, func(t *testing.T) { pingpongOver(t, link) })
	}
}

func pingpongOver(t *testing.T, link string) {
	n := testnet.New(t, testnet.Options{})
	srv, cli := pair(t, n, []string{"pingpong", "--link", link, "-d", n.IfB, "-n", "200", "-s", "2500"},
		[]string{"pingpong", "--link", link, "-d", n.IfA, "-n", "200", "-s", "2500", n.IPB.String()})
	checkPingpong(t, srv, cli, 1000000, "")
}

// checkPingpong checks both sides' ibv_*_pingpong result lines for 200
// iterations moving bytes in all (a positive rate), and their address lines;
// localSep, when set, is what separates the local address line's PSN and GID
// (ibv_ud_pingpong and ibv_rc_pingpong print ':', ibv_uc_pingpong ',').
func checkPingpong(t *testing.T, srv, cli string, bytes int, localSep string) {
	t.Helper()
	re := regexp.MustCompile(`(?m)^` + strconv.Itoa(bytes) + ` bytes in [\d.]+ seconds = ([\d.]+) Mbit/sec\n200 iters in [\d.]+ seconds = ([\d.]+) usec/iter$`)
	for who, out := range map[string]string{"server": srv, "client": cli} {
		m := re.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("%s output:\n%s", who, out)
		}
		if v, _ := strconv.ParseFloat(m[1], 64); v <= 0 {
			t.Errorf("%s: %s Mbit/sec", who, m[1])
		}
		if !strings.Contains(out, "remote address: LID 0x0000, QPN 0x") || localSep != "" &&
			!regexp.MustCompile(`local address:  LID 0x0000, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}`+localSep+` GID `).MatchString(out) {
			t.Errorf("%s: address lines:\n%s", who, out)
		}
	}
}

func TestGidsAndDevinfo(t *testing.T) {
	n := testnet.New(t, testnet.Options{MTU: 9000})
	out := testnet.Sh(t, "ip", "netns", "exec", n.NsA, bin, "gids", "-d", n.IfA)
	for _, want := range []string{
		"\t1\t0\tfe80:0000:0000:0000:",
		"\t1\t1\t0000:0000:0000:0000:0000:ffff:0a4f:0001\t10.79.0.1     \tv2\t" + n.IfA,
		"\t1\t2\tfd00:0079:0000:0000:0000:0000:0000:0001\t",
		"n_gids_found=3",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("gids: no %q in\n%s", want, out)
		}
	}
	out = testnet.Sh(t, "ip", "netns", "exec", n.NsA, bin, "devinfo", "-d", n.IfA)
	for _, want := range []string{"transport:\t\t\tInfiniBand (0)", "state:\t\t\tPORT_ACTIVE (4)", "max_mtu:\t\t4096 (5)",
		"active_mtu:\t\t4096 (5)", "link_layer:\t\tEthernet", "node_guid:\t\t\t", "\tfw_ver:\t\t\t\t0.0.0\n",
		"\tvendor_id:\t\t\t0xffffff\n", "\tvendor_part_id:\t\t\t0\n", "\thw_ver:\t\t\t\t0x0\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("devinfo: no %q in\n%s", want, out)
		}
	}
	// The daemon's device (ibv_devinfo through the library) says the same; -v
	// points there (found by the trial: vendor_id 0x0000 here, -v an unknown flag).
	o, err := exec.Command("ip", "netns", "exec", n.NsA, bin, "devinfo", "-v", "-d", n.IfA).CombinedOutput()
	if want := "xroce devinfo: -v: the device's full attributes (ibv_devinfo -v) come through the verbs library: `xroce daemon -d IFACE`, then `xroce run -- ibv_devinfo -v`\n"; exitCode(err) != 1 || string(o) != want {
		t.Errorf("devinfo -v: %v\n%s\nwant %q", err, o, want)
	}
}

// TestDurationProgress: with -D the client prints a progress line a second and then
// its table, BW peak 0.00 in each (perftest computes no peak in duration mode).
func TestDurationProgress(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	_, cli := pair(t, n, []string{"write_bw", "-d", n.IfB, "-s", "4096"}, []string{"write_bw", "-d", n.IfA, "-s", "4096", "-D", "3", n.IPB.String()})
	lines := bwLine.FindAllStringSubmatch(cli, -1)
	if len(lines) < 3 { // at least two progress lines and the table
		t.Fatalf("%d result lines with -D 3:\n%s", len(lines), cli)
	}
	for _, m := range lines {
		if m[1] != "4096" || m[3] != "0.00" { // -D computes no peak (perftest's noPeak)
			t.Errorf("line %q", m[0])
		}
	}
}

// listening reports whether a TCP socket listens on port in the namespace.
func listening(ns string, port int) bool {
	out, _ := exec.Command("ip", "netns", "exec", ns, "cat", "/proc/net/tcp", "/proc/net/tcp6").Output()
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		if len(f) > 3 && strings.HasSuffix(f[1], fmt.Sprintf(":%04X", port)) && f[3] == "0A" {
			return true
		}
	}
	return false
}

// TestAtomicCmpAndSwap: atomic_bw -A CMP_AND_SWAP runs compare-and-swaps (the
// client's choice, as in perftest) against a plain atomic_bw server.
func TestAtomicCmpAndSwap(t *testing.T) {
	n := testnet.New(t, testnet.Options{MTU: 1500})
	rec := filepath.Join(t.TempDir(), "cas.pcapng")
	srv, cli := pair(t, n, []string{"atomic_bw", "-n", "300", "-d", n.IfB},
		[]string{"atomic_bw", "-A", "CMP_AND_SWAP", "-n", "300", "--pcap", rec, "-d", n.IfA, n.IPB.String()})
	checkTable(t, "client", cli, false, 8, 300, false)
	checkTable(t, "server", srv, false, 8, 300, false)
	if !strings.Contains(cli, "Atomic CMP_AND_SWAP BW Test") || !strings.Contains(srv, "Atomic FETCH_AND_ADD BW Test") {
		t.Errorf("titles:\n%s\n%s", cli, srv)
	}
	// On the wire: 300 COMPARE_SWAP requests, no FETCH_ADD.
	out, err := exec.Command(bin, "dump", rec).CombinedOutput()
	if err != nil {
		t.Fatalf("dump: %v\n%s", err, out)
	}
	if cas, fa := strings.Count(string(out), " RC_COMPARE_SWAP "), strings.Count(string(out), " RC_FETCH_ADD "); cas != 300 || fa != 0 {
		t.Errorf("%d COMPARE_SWAP and %d FETCH_ADD frames, want 300 and 0", cas, fa)
	}
}

// TestPcapDiskFull: a --pcap recording that fills its disk mid-run is reported
// when it fails, the run goes on to its end, and the tool then exits with status
// 1 (it used to say so only at exit, and exit 0): the recording asked for is
// incomplete. The disk is a 64 KiB tmpfs; the server records 300 64 KiB WRITEs.
func TestPcapDiskFull(t *testing.T) {
	n := testnet.New(t, testnet.Options{MTU: 1500})
	small := t.TempDir()
	testnet.Sh(t, "mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", small)
	t.Cleanup(func() { _ = exec.Command("umount", small).Run() })
	rec := filepath.Join(small, "s.pcapng")
	srv, cli, srvErr, cliErr := pairRaw(t, n, []string{"write_bw", "-n", "300", "--pcap", rec, "-d", n.IfB},
		[]string{"write_bw", "-n", "300", "-d", n.IfA, n.IPB.String()})
	if cliErr != nil {
		t.Fatalf("client: %v\n%s", cliErr, cli)
	}
	want := "xroce: --pcap: pcap: recording to " + rec + ": write " + rec + ": no space left on device: the recording stops here (the file keeps the frames before it) and the run goes on; it will exit with status 1\n"
	if exitCode(srvErr) != 1 || strings.Count(srv, want) != 1 {
		t.Errorf("server: %v\n%s\nwant exit status 1 and once %q", srvErr, srv, want)
	}
	// The report came before the test's results, not at exit.
	if i, j := strings.Index(srv, want), strings.Index(srv, "BW average"); i < 0 || j < 0 || i > j {
		t.Errorf("the recording's failure is not reported before the results:\n%s", srv)
	}
	if frames, err := pcap.ReadFile(rec); len(frames) == 0 || err != nil && !errors.Is(err, pcap.ErrTorn) {
		t.Errorf("the file keeps %d frames: %v", len(frames), err)
	}
}

// TestManyQPs: -q 64, the most the tools take, runs with the default depths and
// --verify (the shared CQ was sized 2q × (depth + 512) and refused above -q 25:
// a fresh user's trial), for WRITE and for SEND, whose receives count too.
func TestManyQPs(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	for _, cmd := range []string{"write_bw", "send_bw"} {
		args := []string{cmd, "-q", "64", "-n", "200", "-s", "512", "--verify"}
		out, _ := pair(t, n, append(slices.Clip(args), "-d", n.IfB), append(slices.Clip(args), "-d", n.IfA, n.IPB.String()))
		if !strings.Contains(out, "Data verified") {
			t.Errorf("%s -q 64: the server did not verify:\n%s", cmd, out)
		}
	}
}
