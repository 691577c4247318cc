package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Debian's unmodified ibv_ud_pingpong and ibv_uc_pingpong through the verbs
// library: UD and UC QPs, address handles (ibv_create_ah, ibv_destroy_ah), UD
// sends with their address in the send ring and UD receive completions with
// src_qp and the GRH.

// pingpongOut checks a pingpong's result lines, as ibv_*_pingpong prints them:
// 2×n×size bytes, n iterations and the peer's address line (with ',' before the
// GID for every type: ibv_ud_pingpong prints ':' only in its local line).
func pingpongOut(t *testing.T, what, out string, iters, size int) {
	t.Helper()
	bytes := fmt.Sprintf(`(?m)^%d bytes in \d+\.\d+ seconds = \d+\.\d+ Mbit/sec$`, 2*iters*size)
	itersRe := fmt.Sprintf(`(?m)^%d iters in \d+\.\d+ seconds = \d+\.\d+ usec/iter$`, iters)
	remote := `(?m)^  remote address: LID 0x0000, QPN 0x[0-9a-f]{6}, PSN 0x[0-9a-f]{6}, GID ::ffff:10\.79\.0\.[12]$`
	if !regexpMatch(bytes, out) || !regexpMatch(itersRe, out) || !regexpMatch(remote, out) || strings.Contains(out, "xroce:") {
		t.Errorf("%s output:\n%s", what, out)
	}
}

// runPingpongs runs prog (ibv_rc_pingpong, ibv_uc_pingpong or ibv_ud_pingpong)
// with GID index 1 and each argument list (ending with -n 100 -s SIZE) between
// the two daemons, the server in A and the client in B, on TCP ports from port
// up, and checks both sides' result lines; then that every object went with its
// application.
func runPingpongs(t *testing.T, p *verbsPair, prog string, port int, argsets ...[]string) {
	t.Helper()
	for i, args := range argsets {
		pp := append([]string{prog, "-g", "1", "-p", fmt.Sprint(port + i)}, args...)
		_, sout, sdone := server(t, p.n.NsA, p.dirA, pp...)
		_, cout, cdone := app(t, p.n.NsB, p.dirB, append(pp, p.n.IPA.String())...)
		cerr := wait(t, "client", cdone, cout, 30*time.Second)
		serr := wait(t, "server", sdone, sout, 10*time.Second)
		for side, r := range map[string]struct {
			err error
			out string
		}{"server": {serr, sout.String()}, "client": {cerr, cout.String()}} {
			if r.err != nil {
				t.Errorf("%v: %s: %v\n%s", pp, side, r.err, r.out)
				continue
			}
			pingpongOut(t, fmt.Sprintf("%v: %s", pp, side), r.out, 100, atoi(args[len(args)-1]))
		}
	}
	for _, dir := range []string{p.dirA, p.dirB} {
		if st := status(t, dir); !strings.Contains(st, "clients: 0\n") {
			t.Errorf("status after the runs:\n%s", st)
		}
	}
}

// TestVerbsSRQPingpong: Debian's ibv_srq_pingpong between two daemons: 16 RC QPs
// on each side receiving from one shared receive queue, polling and with -e, with
// its data check (-c).
func TestVerbsSRQPingpong(t *testing.T) {
	runPingpongs(t, newVerbsPair(t), "ibv_srq_pingpong", 18660,
		[]string{"-c", "-n", "100", "-s", "4096"},
		[]string{"-e", "-c", "-n", "100", "-s", "512"})
}

// TestVerbsUDPingpong: ibv_ud_pingpong between two daemons, polling and with -e,
// with its data check (-c). Its message must fit the port's MTU (1024 on the
// veth of MTU 1500), its receive buffer takes the 40-byte GRH area first.
func TestVerbsUDPingpong(t *testing.T) {
	runPingpongs(t, newVerbsPair(t), "ibv_ud_pingpong", 18620,
		[]string{"-c", "-n", "100", "-s", "984"},
		[]string{"-e", "-c", "-n", "100", "-s", "64"})
}

// TestVerbsUCPingpong: ibv_uc_pingpong between two daemons, messages of several
// packets (4 KiB at path MTU 1024) and of one, with its data check.
func TestVerbsUCPingpong(t *testing.T) {
	runPingpongs(t, newVerbsPair(t), "ibv_uc_pingpong", 18630,
		[]string{"-c", "-n", "100", "-s", "4096"},
		[]string{"-e", "-c", "-n", "100", "-s", "64"})
}

// TestVerbsPingpongNative: ibv_ud_pingpong, ibv_uc_pingpong and ibv_rc_pingpong
// through the library in namespace A against `xroce pingpong --connection
// UD|UC|RC` running natively on B's interface (B's daemon stopped), in both roles,
// each with -c: xroce checks every message it receives against what Debian's
// tools send, and they the page starts of what xroce sends.
func TestVerbsPingpongNative(t *testing.T) {
	p := newVerbsPair(t)
	if log, _ := p.stopB(); !strings.Contains(log, "stopped") { // exit 143 on SIGTERM
		t.Fatalf("stopping B's daemon:\n%s", log)
	}
	for i, c := range []struct {
		conn, prog string
		size       int
	}{{"UD", "ibv_ud_pingpong", 984}, {"UC", "ibv_uc_pingpong", 4096}, {"RC", "ibv_rc_pingpong", 10000}} {
		for j, libServer := range []bool{true, false} {
			port := fmt.Sprint(18640 + 2*i + j)
			common := []string{"-g", "1", "-p", port, "-c", "-n", "100", "-s", fmt.Sprint(c.size)}
			lib := append([]string{c.prog}, common...)
			native := append([]string{"pingpong", "--connection", c.conn, "-d", p.n.IfB}, common...)
			what := fmt.Sprintf("%s, library as the %s", c.conn, map[bool]string{true: "server", false: "client"}[libServer])
			var libOut, natOut string
			var libErr, natErr error
			if libServer {
				_, sout, sdone := server(t, p.n.NsA, p.dirA, lib...)
				cli := startIn(t, p.n.NsB, 60*time.Second, append(native, p.n.IPA.String())...)
				natErr = cli.wait(60 * time.Second)
				libErr = wait(t, "library server", sdone, sout, 10*time.Second)
				libOut, natOut = sout.String(), cli.out.String()
			} else {
				srv := startIn(t, p.n.NsB, 60*time.Second, native...)
				for k := 0; k < 500 && !listening(p.n.NsB, atoi(port)); k++ {
					time.Sleep(20 * time.Millisecond)
				}
				_, cout, cdone := app(t, p.n.NsA, p.dirA, append(lib, p.n.IPB.String())...)
				libErr = wait(t, "library client", cdone, cout, 30*time.Second)
				natErr = srv.wait(30 * time.Second)
				libOut, natOut = cout.String(), srv.out.String()
			}
			if libErr != nil || natErr != nil {
				t.Errorf("%s: library: %v\n%s\nnative: %v\n%s", what, libErr, libOut, natErr, natOut)
				continue
			}
			pingpongOut(t, what+": library", libOut, 100, c.size)
			pingpongOut(t, what+": native", natOut, 100, c.size)
			if strings.Contains(libOut, "invalid data") {
				t.Errorf("%s: the library's side found xroce's bytes wrong:\n%s", what, libOut)
			}
		}
	}
}
