package main

import (
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/xroce/xroce/test/testnet"
)

// TestToolMismatch: a server and a client given different tools end within
// seconds, exit 1, and one of them names the mismatch (the other says the peer
// closed the exchange, or runs another test; read_bw against read_lat: either
// side may be the one that names it). read_bw and atomic_bw exchange the same key
// message: the server's QP and buffer allow only its test's operation (as
// perftest's do), so the client's first request gets NAK Invalid Request (the QP
// does not take the operation). Before, several of these pairs hung for minutes or
// blamed -s.
func TestToolMismatch(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	const (
		closed   = "closed the exchange early: the peer exited or failed (see its output), or runs another test or tool"
		send     = "the peer runs a SEND test (send_bw or send_lat): its key message offers no rkey, so its buffer takes no RDMA WRITE, READ or atomic, and this side runs "
		reads    = "the peer runs a READ or atomic test (read_bw, read_lat or atomic_bw): its key message asks for 16 outstanding READs or atomics, and this side runs "
		step     = "oob: the peer's exchange is out of step: it sent "
		notTaken = ": a path MTU mismatch, a message larger than its receive buffer, or an operation its QP does not take, as when it runs another test (give both sides the same -m, -s and test)"
	)
	for _, c := range []struct {
		srv, cli       string
		srvMsg, cliMsg string
		bound          time.Duration
	}{
		{"write_bw", "send_bw", send + "write_bw; run the same test on both sides", closed, 5 * time.Second},
		{"send_bw", "write_bw", closed, send + "write_bw; run the same test on both sides", 5 * time.Second},
		{"atomic_bw", "write_bw", closed, reads + "write_bw; run the same test on both sides", 5 * time.Second},
		{"write_bw", "read_bw", reads + "write_bw; run the same test on both sides", closed, 5 * time.Second},
		{"write_lat", "write_bw", closed, "IBV_WC_REM_ACCESS_ERR (IBV_WC_RDMA_WRITE): the peer refused the access (rkey, address or size outside its region): its buffer is smaller than -s (give both sides the same -s), or it runs another test (give both sides the same test)", 5 * time.Second},
		// A QP without the access flag for the operation answers NAK Invalid
		// Request, as rdma_rxe's check_op_valid does.
		{"read_bw", "atomic_bw", closed, "IBV_WC_REM_INV_REQ_ERR (IBV_WC_FETCH_ADD): the peer found the request invalid" + notTaken, 5 * time.Second},
		{"atomic_bw", "read_bw", closed, "IBV_WC_REM_INV_REQ_ERR (IBV_WC_RDMA_READ): the peer found the request invalid" + notTaken, 5 * time.Second},
		{"write_bw", "write_lat", closed, "the peer's first write did not arrive within 5s: does the peer run write_lat? (a write_bw server only waits for its client's writes)", 10 * time.Second},
		{"pingpong", "send_lat", `oob: the peer sent "6.06", perftest's version field: it runs a perftest tool (send_lat, write_bw, ...), not ibv_rc_pingpong; run pingpong on both sides`, closed, 5 * time.Second},
		{"read_bw", "read_lat", step, step, 10 * time.Second},
		{"send_bw", "send_lat", "the peer closed the out-of-band connection while this side waits for its test's completions", "no completion for 5s and no frame from the peer", 10 * time.Second},
	} {
		t.Run(c.srv+"/"+c.cli, func(t *testing.T) {
			r := timedPair(t, n, []string{c.srv, "-d", n.IfB}, []string{c.cli, "-d", n.IfA, n.IPB.String()})
			srv, cli, srvErr, cliErr, cliTook, srvTook := r.srv, r.cli, r.srvErr, r.cliErr, r.cliTook, r.srvTook
			if exitCode(srvErr) != 1 || exitCode(cliErr) != 1 {
				t.Errorf("exit statuses: server %v, client %v; want 1 and 1", srvErr, cliErr)
			}
			if c.srvMsg == step && c.cliMsg == step {
				// Both sides detect the mismatch: the first to do so ends, and the
				// other may see the exchange closed before its own check.
				if !strings.Contains(srv, step) && !strings.Contains(cli, step) {
					t.Errorf("neither side says %q:\nserver:\n%s\nclient:\n%s", step, srv, cli)
				}
				for who, out := range map[string]string{"server": srv, "client": cli} {
					if !strings.Contains(out, step) && !strings.Contains(out, closed) {
						t.Errorf("%s: neither %q nor %q in\n%s", who, step, closed, out)
					}
				}
			} else {
				if !strings.Contains(srv, c.srvMsg) {
					t.Errorf("server: no %q in\n%s", c.srvMsg, srv)
				}
				if !strings.Contains(cli, c.cliMsg) {
					t.Errorf("client: no %q in\n%s", c.cliMsg, cli)
				}
			}
			if cliTook > c.bound || srvTook > c.bound {
				t.Errorf("the client ended after %v, the server after %v; want both within %v", cliTook.Round(time.Millisecond), srvTook.Round(time.Millisecond), c.bound)
			}
		})
	}
}

// TestVerifyMessages: --verify on the side that only sends the data says where
// it is checked; -s differing between two verifying sides is named as such, the
// peer's -s longer or shorter, WRITE, SEND or READ (a fresh user's trial found the
// longer WRITE and the shorter READ named only as "bytes differ"), and a sender
// without --verify as that.
func TestVerifyMessages(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	srv, cli := pair(t, n, []string{"write_bw", "-n", "100", "-d", n.IfB}, []string{"write_bw", "--verify", "-n", "100", "-d", n.IfA, n.IPB.String()})
	if want := " Data verification: this side sends the data; the server checks it when it has --verify too (it then says so in its output)\n"; !strings.Contains(cli, want) || strings.Contains(srv, "Data verif") {
		t.Errorf("write_bw --verify on the client alone: want %q from the client alone:\nserver:\n%s\nclient:\n%s", want, srv, cli)
	}
	srv, _ = pair(t, n, []string{"read_bw", "--verify", "-n", "100", "-d", n.IfB}, []string{"read_bw", "-n", "100", "-d", n.IfA, n.IPB.String()})
	if want := " Data verification: this side offers the data; the client checks it when it has --verify too"; !strings.Contains(srv, want) {
		t.Errorf("read_bw --verify on the server alone: no %q in\n%s", want, srv)
	}
	for _, c := range []struct {
		cmd, srvSize, cliSize string
		client                bool // the client checks the data (READ)
		want                  string
	}{
		{"write_bw", "65536", "4096", false, "verify: QP 0, 65536-byte messages: the peer's messages are 4096 bytes and this side's -s is 65536; give both sides the same -s"},
		{"write_bw", "1000", "2000", false, "verify: QP 0, 1000-byte messages: the peer's messages are 2000 bytes and this side's -s is 1000; give both sides the same -s"},
		{"send_bw", "4096", "1000", false, "verify: QP 0, 4096-byte messages: the peer's messages are 1000 bytes and this side's -s is 4096; give both sides the same -s"},
		// Longer than the room this side's -s gave them (it said only "bytes differ").
		{"write_bw", "4096", "4097", false, "verify: QP 0, 4096-byte messages: the peer's messages are 4097 bytes, longer than the room for this side's -s 4096; give both sides the same -s"},
		// A SEND longer than the receive buffer fails before any check, naming -s.
		{"send_bw", "1000", "2000", false, "completion IBV_WC_LOC_LEN_ERR (IBV_WC_RECV): the peer sent a message larger than our receive buffer: its -s is larger than ours"},
		{"read_bw", "1000", "2000", true, "verify: QP 0, 2000-byte messages: the peer's messages are 1000 bytes and this side's -s is 2000; give both sides the same -s"},
	} {
		srv, cli, srvErr, cliErr := pairRaw(t, n, []string{c.cmd, "--verify", "-n", "100", "-s", c.srvSize, "-d", n.IfB},
			[]string{c.cmd, "--verify", "-n", "100", "-s", c.cliSize, "-d", n.IfA, n.IPB.String()})
		out, err, side := srv, srvErr, "server"
		if c.client {
			out, err, side = cli, cliErr, "client"
		}
		if exitCode(err) != 1 || !strings.Contains(out, c.want) {
			t.Errorf("%s -s %s against -s %s: want the %s to fail with %q:\nserver: %v\n%s\nclient: %v\n%s", c.cmd, c.srvSize, c.cliSize, side, c.want, srvErr, srv, cliErr, cli)
		}
	}
	srv, _, srvErr, _ := pairRaw(t, n, []string{"write_bw", "--verify", "-n", "100", "-d", n.IfB}, []string{"write_bw", "-n", "100", "-d", n.IfA, n.IPB.String()})
	if want := "verify: QP 0, 65536-byte messages: no data arrived, or the sender ran without --verify (it then sends its buffer as it is: zeros); give both sides --verify"; exitCode(srvErr) != 1 || !strings.Contains(srv, want) {
		t.Errorf("--verify on the server alone: want %q:\n%v\n%s", want, srvErr, srv)
	}
}

// TestRefusedBeforeConnecting: flag values a test cannot run with are refused
// before anything is opened or connected (write_lat -s 0 failed after connecting).
func TestRefusedBeforeConnecting(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"write_lat", "-s", "0"}, "xroce write_lat: -s 0: the message size must be 1..2147483647, as in perftest (Message Size should be between 1 and 2147483647)\n"},
		{[]string{"send_bw", "-s", "2147483648"}, "xroce send_bw: -s 2147483648: the message size must be 1..2147483647, as in perftest (Message Size should be between 1 and 2147483647)\n"},
		{[]string{"write_bw", "-D", "0"}, "xroce write_bw: -D 0: the duration is in seconds, 1..31536000\n"},
		{[]string{"send_bw", "-D", "99999999999"}, "xroce send_bw: -D 99999999999: the duration is in seconds, 1..31536000\n"},
		{[]string{"send_bw", "-c", "UD"}, "xroce send_bw: -c UD: xroce's perftest tools run RC QPs only so far (UC and UD run in xroce pingpong --connection; no XRC or DC): run with -c RC, the default\n"},
	} {
		// No such interface and nobody at that address: only the flags are looked at.
		out, err := exec.Command(bin, append(c.args, "-d", "nosuch0", "192.0.2.1")...).CombinedOutput()
		if exitCode(err) != 1 || string(out) != c.want {
			t.Errorf("%v: %v\n%s\nwant exit status 1 and %q", c.args, err, out, c.want)
		}
	}
}

// TestRDMACMMismatch: a client with -R against a server without it gets, as from
// a host whose kernel CM has no listener, a REJ with reason Invalid Service ID for
// each REQ, and ends after its 5 s of retries naming the fix; the server, which
// goes on waiting for a client, says what that client asked for. Before, the
// client waited 30 s for an answer and the server said nothing.
func TestRDMACMMismatch(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	server := startIn(t, n.NsB, 60*time.Second, "write_bw", "-d", n.IfB)
	for i := 0; i < 500 && !strings.Contains(server.out.String(), "Waiting for client"); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	out, err := exec.Command("ip", "netns", "exec", n.NsA, bin, "write_bw", "-R", "-d", n.IfA, n.IPB.String()).CombinedOutput()
	took := time.Since(start)
	want := "xroce write_bw: rdmacm: " + n.IPB.String() + ":18515 rejected the connection: Invalid Service ID (REJ reason 8) (nothing listens on port 18515 there: start the server first, or check the port); so were all REQs for 5s: the server is not running, listens on another -p, or runs without -R (give both sides -R, or neither)\n"
	if exitCode(err) != 1 || !strings.HasSuffix(string(out), want) {
		t.Errorf("client: %v\n%s\nwant exit status 1 and, last, %q", err, out, want)
	}
	if took > 10*time.Second {
		t.Errorf("the client ended after %v; want within 10s", took.Round(time.Millisecond))
	}
	const srvWant = "xroce write_bw: a client asked to connect with the RDMA CM (perftest's -R) to this server, which runs without -R: give both sides -R, or neither\n"
	for i := 0; i < 50 && !strings.Contains(server.out.String(), srvWant); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if s := server.out.String(); strings.Count(s, srvWant) != 1 {
		t.Errorf("server: want %q once in\n%s", srvWant, s)
	}
	select {
	case <-server.done:
		t.Errorf("the server ended (%v); it should wait for a client:\n%s", server.err, server.out.String())
	default:
	}

	// A -R client to a host that runs no server: its kernel answers the REQs with
	// ICMP port unreachable; the client ends after its 5 s of retries (30 s before).
	server.kill()
	start = time.Now()
	out, err = exec.Command("ip", "netns", "exec", n.NsA, bin, "write_bw", "-R", "-d", n.IfA, n.IPB.String()).CombinedOutput()
	took = time.Since(start)
	noEP := regexp.MustCompile(`xroce write_bw: -R: no RoCE endpoint at ` + regexp.QuoteMeta(n.IPB.String()) + `: for [\d.]+s its host answered our CM REQs on UDP port 4791 with ICMP port unreachable \(no rdma_rxe, RDMA NIC or xroce there\): start the server there \(with -R\), or check its address\n$`)
	if exitCode(err) != 1 || !noEP.Match(out) || took > 10*time.Second {
		t.Errorf("-R to a host with no server: %v after %v:\n%s\nwant exit status 1 within 10s and %q", err, took.Round(time.Millisecond), out, noEP)
	}

	// xroce rping's client too (it said "no answer" after its 20 s).
	start = time.Now()
	out, err = exec.Command("ip", "netns", "exec", n.NsA, bin, "rping", "-c", "-a", n.IPB.String(), "-C", "1").CombinedOutput()
	took = time.Since(start)
	noEP = regexp.MustCompile(`xroce rping: no RoCE endpoint at ` + regexp.QuoteMeta(n.IPB.String()) + `: for [\d.]+s its host answered our CM REQs on UDP port 4791 with ICMP port unreachable \(no rdma_rxe, RDMA NIC or xroce there\): start rping -s \(or xroce rping -s\) there, or check -a\n\(rping: RDMA_CM_EVENT_UNREACHABLE\)\n$`)
	if exitCode(err) != 1 || !noEP.Match(out) || took > 10*time.Second {
		t.Errorf("rping -c to a host with no server: %v after %v:\n%s\nwant exit status 1 within 10s and %q", err, took.Round(time.Millisecond), out, noEP)
	}

	// A -R client to an address where nothing answers ARP ends when the address
	// does not resolve (rdma_resolve_addr), not after the REQs' 30 s.
	absent := n.IPB.Next()
	start = time.Now()
	out, err = exec.Command("ip", "netns", "exec", n.NsA, bin, "write_bw", "-R", "-d", n.IfA, absent.String()).CombinedOutput()
	took = time.Since(start)
	prefix := "xroce write_bw: -R: nothing answers at " + absent.String() + ", check the server's address: rdmacm: " + n.IPA.String() + " cannot reach " + absent.String() +
		": transport: address handle: xdp: no ARP/neighbour answer from " + absent.String()
	if exitCode(err) != 1 || !strings.Contains(string(out), prefix) || took > 8*time.Second {
		t.Errorf("-R to %v: %v after %v:\n%s\nwant exit status 1 within 8s and %q", absent, err, took.Round(time.Millisecond), out, prefix)
	}

	// No route to the address: at once.
	start = time.Now()
	out, err = exec.Command("ip", "netns", "exec", n.NsA, bin, "write_bw", "-R", "-d", n.IfA, "10.250.7.9").CombinedOutput()
	took = time.Since(start)
	prefix = "xroce write_bw: -R: no route to 10.250.7.9, check the server's address: rdmacm: " + n.IPA.String() + " cannot reach 10.250.7.9: transport: address handle: xdp: no route to 10.250.7.9 in this network namespace"
	if exitCode(err) != 1 || !strings.Contains(string(out), prefix) || took > 2*time.Second {
		t.Errorf("-R to 10.250.7.9: %v after %v:\n%s\nwant exit status 1 within 2s and %q", err, took.Round(time.Millisecond), out, prefix)
	}
}

// TestRDMACMQPsMismatch: with -R, each test QP is an RDMA CM connection made
// before the key messages, so -q differing between the sides shows there: a client
// with more QPs gets a REJ (no listener) for the first QP the server did not want,
// and says so at once; a server with more QPs sees the client's key message come
// while it waits for the next connection. Found by the trial: the first blamed a
// server not running or without -R after 5 s of retries, the second waited 30 s.
func TestRDMACMQPsMismatch(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	const closed = "closed the exchange early: the peer exited or failed (see its output), or runs another test or tool"
	for _, c := range []struct {
		srvQ, cliQ       string
		srvWant, cliWant string
	}{
		{"1", "3", closed, "xroce write_bw: -R: QP 2 of 3: the server accepted 1 of this side's 3 test QP connections and then stopped listening (REJ reason 8): it runs with -q 1; give both sides the same -q\n"},
		{"3", "1", "xroce write_bw: -R: the client connected 1 of this side's 3 test QPs and went on with the exchange: it runs with -q 1; give both sides the same -q\n", closed},
	} {
		t.Run(c.srvQ+"/"+c.cliQ, func(t *testing.T) {
			r := timedPair(t, n, []string{"write_bw", "-R", "-q", c.srvQ, "-d", n.IfB}, []string{"write_bw", "-R", "-q", c.cliQ, "-d", n.IfA, n.IPB.String()})
			if exitCode(r.srvErr) != 1 || exitCode(r.cliErr) != 1 || !strings.Contains(r.srv, c.srvWant) || !strings.Contains(r.cli, c.cliWant) {
				t.Errorf("want exit statuses 1 and 1:\nserver: %v, want %q\n%s\nclient: %v, want %q\n%s", r.srvErr, c.srvWant, r.srv, r.cliErr, c.cliWant, r.cli)
			}
			if r.cliTook > 5*time.Second || r.srvTook > 5*time.Second {
				t.Errorf("the client ended after %v, the server after %v; want both within 5s", r.cliTook.Round(time.Millisecond), r.srvTook.Round(time.Millisecond))
			}
		})
	}
}

// TestConnectionMismatch: pingpong's server on a UD QP and its client on an RC
// QP (no --connection): the client's SENDs reach no QP of the server's test, so
// the client ends with retry-exceeded, naming the connection type among the
// causes, and the server, which before waited 30 s, ends at 3 s naming the
// frames that came for no QP of its test.
func TestConnectionMismatch(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	r := timedPair(t, n, []string{"pingpong", "--connection", "ud", "-s", "64", "-d", n.IfB}, []string{"pingpong", "-s", "64", "-d", n.IfA, n.IPB.String()})
	if exitCode(r.srvErr) != 1 || exitCode(r.cliErr) != 1 {
		t.Errorf("exit statuses: server %v, client %v; want 1 and 1", r.srvErr, r.cliErr)
	}
	srvWant := regexp.MustCompile(`xroce pingpong: no completion for 3s: frames came since the exchange \((\d+)\) and none was for this test's QPs \(counter rcvd_unknown_qp\): the peer sends with another connection type or to another QP; give both sides the same tool and connection type \(pingpong's --connection, perftest's -c\)\n$`)
	if m := srvWant.FindStringSubmatch(r.srv); m == nil || m[1] != "8" {
		// rc_pingpong's retry_cnt 7: the SEND's one frame and 7 retransmissions
		t.Errorf("server: want 8 frames in %q at the end of\n%s", srvWant, r.srv)
	}
	if want := "a peer running another connection type (pingpong --connection, perftest -c)"; !strings.Contains(r.cli, "IBV_WC_RETRY_EXC_ERR") || !strings.Contains(r.cli, want) {
		t.Errorf("client: want IBV_WC_RETRY_EXC_ERR and %q in\n%s", want, r.cli)
	}
	if r.srvTook > 6*time.Second || r.cliTook > 6*time.Second {
		t.Errorf("the server ended after %v, the client after %v; want both within 6s", r.srvTook.Round(time.Millisecond), r.cliTook.Round(time.Millisecond))
	}
}

// TestPingpongPeerGone: once pingpong has begun, a peer that stops answering is
// named within seconds: the server of a client killed mid-run says after how
// many iterations it stopped (it waited 30 s), or, when it was sending then, that
// its retries ran out; and a UD client whose server runs
// RC says nothing came back after its first message (30 s before).
func TestPingpongPeerGone(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	server := startIn(t, n.NsB, 60*time.Second, "pingpong", "-s", "64", "-n", "100000000", "-d", n.IfB)
	for i := 0; i < 500 && !listening(n.NsB, 18515); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	client := startIn(t, n.NsA, 60*time.Second, "pingpong", "-s", "64", "-n", "100000000", "-d", n.IfA, n.IPB.String())
	time.Sleep(time.Second)
	client.kill()
	start := time.Now()
	err := server.wait(time.Minute)
	took := time.Since(start)
	// The server waited for the client's message (silence), or was sending its own
	// when the client died (its retries run out).
	want := regexp.MustCompile(`xroce pingpong: (the peer stopped answering after \d+ of 100000000 iterations \(nothing from it for 5s\): it exited or failed \(see its output\), or was given a smaller -n|completion IBV_WC_RETRY_EXC_ERR \(IBV_WC_SEND\): the peer did not answer after every retry\. If it ran until then, it exited or stopped \(see its output\), or was given a smaller -n, or the path stopped carrying frames for longer than the retries last \(about 537ms\);.*)\n$`)
	if exitCode(err) != 1 || !want.MatchString(server.out.String()) || took > 8*time.Second {
		t.Errorf("server after the client's kill: %v after %v:\n%s\nwant exit status 1 within 8s and %q", err, took.Round(time.Millisecond), server.out.String(), want)
	}

	// A peer given a smaller -n exits when it is done; whichever way this side
	// notices (its sends unanswered, or nothing to receive), it names -n.
	r := timedPair(t, n, []string{"pingpong", "-s", "64", "-n", "10", "-d", n.IfB}, []string{"pingpong", "-s", "64", "-n", "20", "-d", n.IfA, n.IPB.String()})
	if exitCode(r.srvErr) != 0 || exitCode(r.cliErr) != 1 || !strings.Contains(r.cli, "or was given a smaller -n") || r.cliTook > 8*time.Second {
		t.Errorf("-n 20 against -n 10: server %v, client %v after %v:\n%s\nwant the server to pass and the client to fail within 8s naming a smaller -n", r.srvErr, r.cliErr, r.cliTook.Round(time.Millisecond), r.cli)
	}

	r = timedPair(t, n, []string{"pingpong", "-s", "64", "-d", n.IfB}, []string{"pingpong", "--connection", "ud", "-s", "64", "-d", n.IfA, n.IPB.String()})
	const cliWant = "xroce pingpong: nothing came back from the peer for 5s after this side's first message: it exited or failed (see its output), or runs another connection type (--connection) or test; or a message was lost on the network: UC and UD send nothing again, so one lost message stops the exchange\n"
	if exitCode(r.cliErr) != 1 || !strings.HasSuffix(r.cli, cliWant) || r.cliTook > 8*time.Second {
		t.Errorf("UD client against an RC server: %v after %v:\n%s\nwant exit status 1 within 8s and %q", r.cliErr, r.cliTook.Round(time.Millisecond), r.cli, cliWant)
	}
}

// TestBidirMismatch: -b on one side only ends within seconds, exit 1, with the
// side that can tell naming -b: perftest's exchange does not carry it, so a WRITE
// or READ side tells from the requests the peer ran against it, and a send_bw -b
// side from SENDs that never come once its own are done (found by a fresh user's
// trial: both sides exited 0 with different figures, or the -b side waited 30 s
// blaming a stopped peer).
func TestBidirMismatch(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	const (
		ranNone  = "-b: the peer ran no RDMA %s against this side: it runs without -b; give both sides -b or neither"
		ranSome  = "the peer ran 100 RDMA %s requests against this side's buffer: it runs with -b (bidirectional) and this side does not; give both sides -b or neither"
		sendNone = "-b: this side's SENDs are done and the peer has sent none in 2"
		moved    = "the two sides run different tests, -n, -D, -a or -b; give both the same"
	)
	for _, c := range []struct {
		cmd        string
		srvB, cliB bool
		who, want  string
		bothFail   bool
		bound      time.Duration
	}{
		{"write_bw", false, true, "client", fmt.Sprintf(ranNone, "WRITE"), true, 5 * time.Second},
		{"write_bw", true, false, "client", fmt.Sprintf(ranSome, "WRITE"), false, 5 * time.Second},
		{"read_bw", false, true, "client", fmt.Sprintf(ranNone, "READ"), true, 5 * time.Second},
		{"read_bw", true, false, "client", fmt.Sprintf(ranSome, "READ"), false, 5 * time.Second},
		{"send_bw", false, true, "client", sendNone, true, 6 * time.Second},
		{"send_bw", true, false, "server", moved, true, 6 * time.Second},
	} {
		srvArgs := []string{c.cmd, "-n", "100", "-d", n.IfB}
		cliArgs := []string{c.cmd, "-n", "100", "-d", n.IfA, n.IPB.String()}
		if c.srvB {
			srvArgs = append(srvArgs, "-b")
		}
		if c.cliB {
			cliArgs = append(cliArgs[:len(cliArgs)-1], "-b", n.IPB.String())
		}
		t.Run(fmt.Sprintf("%s/server-b=%v", c.cmd, c.srvB), func(t *testing.T) {
			r := timedPair(t, n, srvArgs, cliArgs)
			out, err := r.cli, r.cliErr
			if c.who == "server" {
				out, err = r.srv, r.srvErr
			}
			if exitCode(err) != 1 || !strings.Contains(out, c.want) {
				t.Errorf("want the %s to fail with %q:\nserver: %v\n%s\nclient: %v\n%s", c.who, c.want, r.srvErr, r.srv, r.cliErr, r.cli)
			}
			if c.bothFail && (exitCode(r.srvErr) != 1 || exitCode(r.cliErr) != 1) {
				t.Errorf("exit statuses: server %v, client %v; want 1 and 1", r.srvErr, r.cliErr)
			}
			if r.cliTook > c.bound || r.srvTook > c.bound {
				t.Errorf("the client ended after %v, the server after %v; want both within %v", r.cliTook.Round(time.Millisecond), r.srvTook.Round(time.Millisecond), c.bound)
			}
		})
	}
	// Both with -b: no complaint.
	for _, cmd := range []string{"write_bw", "read_bw", "send_bw"} {
		pair(t, n, []string{cmd, "-b", "-n", "100", "-d", n.IfB}, []string{cmd, "-b", "-n", "100", "-d", n.IfA, n.IPB.String()})
	}
}
