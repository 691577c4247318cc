package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

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
	server := exec.Command("ip", append([]string{"netns", "exec", n.NsB, "timeout", "60", bin}, srvArgs...)...)
	var sb strings.Builder
	server.Stdout, server.Stderr = &sb, &sb
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for the server's TCP listener.
	quiet := cliArgs[0] == "pingpong"
	for i := 0; i < 500 && !strings.Contains(sb.String(), "Waiting for client") && !quiet; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if quiet { // rc_pingpong's server prints nothing: watch for its socket
		for i := 0; i < 500 && !listening(n.NsB, 18515); i++ {
			time.Sleep(20 * time.Millisecond)
		}
	}
	client := exec.Command("ip", append([]string{"netns", "exec", n.NsA, "timeout", "60", bin}, cliArgs...)...)
	out, cliErr := client.CombinedOutput()
	srvErr = server.Wait()
	return sb.String(), string(out), srvErr, cliErr
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
	if it, _ := strconv.Atoi(m[2]); it < iters-1 || it > iters {
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
	re := regexp.MustCompile(`(?m)^1000000 bytes in [\d.]+ seconds = ([\d.]+) Mbit/sec\n200 iters in [\d.]+ seconds = ([\d.]+) usec/iter$`)
	for who, out := range map[string]string{"server": srv, "client": cli} {
		m := re.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("%s output:\n%s", who, out)
		}
		if v, _ := strconv.ParseFloat(m[1], 64); v <= 0 {
			t.Errorf("%s: %s Mbit/sec", who, m[1])
		}
		if !strings.Contains(out, "remote address: LID 0x0000, QPN 0x") {
			t.Errorf("%s: no address lines:\n%s", who, out)
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
		"active_mtu:\t\t4096 (5)", "link_layer:\t\tEthernet", "node_guid:\t\t\t"} {
		if !strings.Contains(out, want) {
			t.Errorf("devinfo: no %q in\n%s", want, out)
		}
	}
}

// TestDurationProgress: with -D the client prints a progress line a second and then
// its table.
func TestDurationProgress(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	_, cli := pair(t, n, []string{"write_bw", "-d", n.IfB, "-s", "4096"}, []string{"write_bw", "-d", n.IfA, "-s", "4096", "-D", "3", n.IPB.String()})
	lines := bwLine.FindAllStringSubmatch(cli, -1)
	if len(lines) < 3 { // at least two progress lines and the table
		t.Fatalf("%d result lines with -D 3:\n%s", len(lines), cli)
	}
	for _, m := range lines {
		if m[1] != "4096" {
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
