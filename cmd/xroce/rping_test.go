package main

import (
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/test/testnet"
)

// rpingLine is what xroce rping -v prints for ping i of size n (after the
// prefix): its start buffer up to the NUL.
func rpingLine(i, n int) string {
	b := make([]byte, n)
	rpingFill(b, i, byte(65+i%58))
	return string(cstr(b))
}

// TestRpingLine: the start buffer as rping forms it: ping 0 of 64 bytes as
// docs/rdmacm-peers.md quotes rping's line, ping 1 one letter later, ping 57
// starting at 'z' and wrapping to 'A', the last byte NUL. (The interop cells compare
// 100 pings with real rping's output.)
func TestRpingLine(t *testing.T) {
	for _, c := range []struct {
		i, n int
		want string
	}{
		{0, 64, "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr"},
		{1, 64, "rdma-ping-1: BCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrs"},
		{57, 30, "rdma-ping-57: zABCDEFGHIJKLMN"},
		{58, 26, "rdma-ping-58: ABCDEFGHIJK"},
	} {
		if got := rpingLine(c.i, c.n); got != c.want || len(got) != c.n-1 {
			t.Errorf("ping %d, %d bytes: %q\nwant %q", c.i, c.n, got, c.want)
		}
	}
}

// startRpingServer starts `xroce rping -s -d args` in n's namespace B and waits
// until it listens (its debug line rdma_listen).
func startRpingServer(t *testing.T, n *testnet.Net, args ...string) *bgProc {
	t.Helper()
	srv := startIn(t, n.NsB, 60*time.Second, append([]string{"rping", "-s", "-d"}, args...)...)
	for i := 0; !strings.Contains(srv.out.String(), "rdma_listen\n"); i++ {
		if i == 500 || srv.wait(0) != errRunning {
			t.Fatalf("the server did not listen:\n%s", srv.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return srv
}

// pingLines returns the lines of out that start with prefix.
func pingLines(out, prefix string) []string {
	var l []string
	for _, s := range strings.Split(out, "\n") {
		if strings.HasPrefix(s, prefix) {
			l = append(l, s)
		}
	}
	return l
}

// TestRping: xroce rping server and client in two namespaces, over AF_XDP and over
// the UDP link, with -v -V -C 10 -S 100: both print rping's data line for pings 0
// to 9, exactly, and exit 0 (the client disconnects, the server takes the DREQ,
// answers it and exits). The server's recording shows the wire: the REQ asks for
// responder resources and initiator depth 1, retry and RNR retry 7 (rping's
// conn_param), the REP answers 1 and 1 (rdma_accept(NULL): the REQ's, capped), every
// SEND carries 16 bytes, and every RDMA READ and WRITE moves -S bytes.
func TestRping(t *testing.T) {
	for _, link := range []string{"xdp", "udp"} {
		t.Run(link, func(t *testing.T) {
			n := testnet.New(t, testnet.Options{})
			rec := filepath.Join(t.TempDir(), "server.pcapng")
			srv := startRpingServer(t, n, "-v", "-S", "100", "--link", link, "--pcap", rec)
			cli := startIn(t, n.NsA, 60*time.Second, "rping", "-c", "-a", n.IPB.String(), "-v", "-V", "-C", "10", "-S", "100", "--link", link)
			cerr, serr := cli.wait(time.Minute), srv.wait(30*time.Second)
			cout, sout := cli.out.String(), srv.out.String()
			if cerr != nil || serr != nil {
				t.Fatalf("client: %v\n%s\nserver: %v\n%s", cerr, cout, serr, sout)
			}
			var want, swant []string
			for i := range 10 {
				want = append(want, "ping data: "+rpingLine(i, 100))
				swant = append(swant, "server ping data: "+rpingLine(i, 100))
			}
			if got := pingLines(sout, "server ping data: "); strings.Join(got, "\n") != strings.Join(swant, "\n") {
				t.Errorf("server's lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(swant, "\n"))
			}
			// The client prints its ten lines and nothing else but rping's
			// DISCONNECT EVENT line (stderr).
			var rest []string
			for _, l := range strings.Split(strings.TrimSpace(cout), "\n") {
				if !strings.HasPrefix(l, "ping data: ") && l != "client DISCONNECT EVENT..." {
					rest = append(rest, l)
				}
			}
			if got := pingLines(cout, "ping data: "); strings.Join(got, "\n") != strings.Join(want, "\n") || len(rest) > 0 {
				t.Errorf("client's output:\n%s\nwant:\n%s", cout, strings.Join(want, "\n"))
			}
			if !strings.Contains(sout, "server DISCONNECT EVENT...") {
				t.Errorf("server's output has no DISCONNECT EVENT line:\n%s", sout)
			}
			checkRpingWire(t, rec, 10, 100)
		})
	}
}

// checkRpingWire checks the server's recording of an rping run of count pings of
// size bytes.
func checkRpingWire(t *testing.T, rec string, count, size int) {
	t.Helper()
	frames, err := pcap.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	var reqs, reps, reads, writes, sends int
	for _, f := range frames {
		var p roce.Packet
		if err := p.Decode(f.Data); err != nil {
			if !errors.Is(err, roce.ErrNotRoCE) {
				t.Errorf("frame %d: %v", f.Index, err)
			}
			continue
		}
		if mad, err := cm.MADFromPacket(&p); err == nil {
			_, m, err := cm.Decode(mad)
			if err != nil {
				t.Errorf("frame %d: %v", f.Index, err)
				continue
			}
			switch m := m.(type) {
			case *cm.REQ:
				reqs++
				if f.Dir != pcap.DirRX || m.ResponderResources != 1 || m.InitiatorDepth != 1 || m.RetryCount != 7 || m.RNRRetryCount != 7 {
					t.Errorf("REQ (frame %d, %v): responder resources %d, initiator depth %d, retry %d, RNR retry %d; want 1, 1, 7, 7",
						f.Index, f.Dir, m.ResponderResources, m.InitiatorDepth, m.RetryCount, m.RNRRetryCount)
				}
			case *cm.REP:
				reps++
				if f.Dir != pcap.DirTX || m.ResponderResources != 1 || m.InitiatorDepth != 1 || m.RNRRetryCount != 7 {
					t.Errorf("REP (frame %d): responder resources %d, initiator depth %d, RNR retry %d; want 1, 1, 7",
						f.Index, m.ResponderResources, m.InitiatorDepth, m.RNRRetryCount)
				}
			}
			continue
		}
		switch p.BTH.Opcode {
		case roce.RC_RDMA_READ_REQUEST:
			reads++
			if f.Dir != pcap.DirTX || p.RETH.DMALen != uint32(size) {
				t.Errorf("RDMA READ (frame %d, %v): %d bytes, want %d", f.Index, f.Dir, p.RETH.DMALen, size)
			}
		case roce.RC_RDMA_WRITE_ONLY, roce.RC_RDMA_WRITE_FIRST:
			writes++
			if f.Dir != pcap.DirTX || p.RETH.DMALen != uint32(size) {
				t.Errorf("RDMA WRITE (frame %d, %v): %d bytes, want %d", f.Index, f.Dir, p.RETH.DMALen, size)
			}
		case roce.RC_SEND_ONLY:
			sends++
			if len(p.Payload) != 16 {
				t.Errorf("SEND (frame %d, %v): %d bytes, want 16", f.Index, f.Dir, len(p.Payload))
			}
		}
	}
	// Per ping two SENDs each way (retransmissions would add more).
	if reqs != 1 || reps != 1 || reads != count || writes != count || sends < 4*count {
		t.Errorf("recording: %d REQs, %d REPs, %d READs, %d WRITEs, %d SENDs; want 1, 1, %d, %d, %d", reqs, reps, reads, writes, sends, count, count, 4*count)
	}
}

// TestRpingErrors: what rping refuses, and a client with nothing to connect to
// ends within seconds, naming the cause.
func TestRpingErrors(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-s", "-S", "22"}, "invalid size 22 (valid range is 23 to 65536)"},
		{[]string{"-c", "-a", n.IPB.String(), "-S", "65536"}, "invalid size 65536 (valid range is 23 to 65536)"},
		{[]string{"-c", "-a", n.IPB.String(), "-C", "-1"}, "invalid count -1"},
		{[]string{"-c"}, "the client needs the server's address: -a ADDR"},
		{[]string{"-a", n.IPB.String()}, "give -s (server) or -c (client)"},
		{[]string{"-s", "-a", "10.79.0.77"}, "10.79.0.77 is not an address of this host"},
		{[]string{"-c", "-a", "no.such.host.invalid"}, "-a no.such.host.invalid: not an IP address, and the name does not resolve"},
		{[]string{"-c", "-a", "10.79.0.77"}, "resolving -a 10.79.0.77: "},
	} {
		start := time.Now()
		out, err := runIn(n.NsA, append([]string{"rping"}, c.args...)...)
		wantErr(t, strings.Join(c.args, " "), out, err, c.want)
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%v: took %v", c.args, d)
		}
	}
	// Nothing listens on the port: the server's CM answers REJ (Invalid Service
	// ID) and the client says so at once.
	srv := startRpingServer(t, n, "-p", "7175")
	start := time.Now()
	out, err := runIn(n.NsA, "rping", "-c", "-a", n.IPB.String(), "-C", "1")
	wantErr(t, "nothing listening", out, err, "nothing listens on port 7174 there: start the server first, or check the port")
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the rejected client took %v", d)
	}
	// A client with a larger -S than the server's: the server refuses the READ
	// with the fix, the client learns of the disconnect; both exit non-zero.
	cli := startIn(t, n.NsA, 60*time.Second, "rping", "-c", "-a", n.IPB.String(), "-p", "7175", "-S", "200", "-C", "1")
	serr, cerr := srv.wait(30*time.Second), cli.wait(30*time.Second)
	wantErr(t, "server with a smaller -S", srv.out.String(), serr,
		"the client advertises a 200-byte buffer for ping 0; this server's -S is 64: give the server -S 200 or more")
	wantErr(t, "client of that server", cli.out.String(), cerr, "the server disconnected in ping 0 of 1")
	if m := regexp.MustCompile(`(?m)^xroce rping: `).FindAllString(srv.out.String(), -1); len(m) != 1 {
		t.Errorf("server output:\n%s", srv.out.String())
	}
}

// TestRpingPersistent: a server with -P serves one client after another, each
// connection its own QP, and keeps listening. (Two clients at once would need two
// interfaces on the client's side: one xroce per interface.)
func TestRpingPersistent(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	srv := startRpingServer(t, n, "-P", "-v", "-S", "40")
	client := func() *bgProc {
		return startIn(t, n.NsA, 60*time.Second, "rping", "-c", "-a", n.IPB.String(), "-v", "-V", "-C", "3", "-S", "40")
	}
	for round := range 4 {
		c := client()
		if err := c.wait(time.Minute); err != nil || len(pingLines(c.out.String(), "ping data: ")) != 3 {
			t.Fatalf("round %d: client: %v\n%s\nserver:\n%s", round, err, c.out.String(), srv.out.String())
		}
	}
	if err := srv.wait(0); err != errRunning {
		t.Fatalf("the -P server exited: %v\n%s", err, srv.out.String())
	}
	if got := len(pingLines(srv.out.String(), "server ping data: ")); got != 12 {
		t.Errorf("the server printed %d data lines, want 12:\n%s", got, srv.out.String())
	}
}

// TestRpingInterrupted: Ctrl-C (SIGINT) of a client pinging forever (-C 0)
// disconnects it before it exits, as the kernel's rdma_cm does for a dying
// process: the server takes the DREQ and ends at once, not after its retries.
func TestRpingInterrupted(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	srv := startRpingServer(t, n)
	c := startIn(t, n.NsA, 0, "rping", "-c", "-a", n.IPB.String(), "-C", "0")
	time.Sleep(time.Second)
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := c.wait(5 * time.Second); err == nil || !strings.Contains(err.Error(), "130") {
		t.Errorf("client after SIGINT: %v\n%s", err, c.out.String())
	}
	start := time.Now()
	if err := srv.wait(5 * time.Second); err == errRunning { // it ends, with the broken ping as its error
		t.Errorf("server still running:\n%s", srv.out.String())
	}
	if d := time.Since(start); d > 3*time.Second || !strings.Contains(srv.out.String(), "server DISCONNECT EVENT") {
		t.Errorf("the server ended %v after the client's SIGINT:\n%s", d, srv.out.String())
	}
}
