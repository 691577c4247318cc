package main

import (
	"strings"
	"testing"
	"time"

	"github.com/xroce/xroce/test/testnet"
)

// TestMTULowered: an interface MTU lowered under a running path-MTU-4096 test.
// On the sender's side the veth still carries its 4154-byte frames (a NIC would
// not), so only the tool's own look at its interface can end the run; on the
// receiver's side the veth drops them and the sender runs out of retries. Either
// way, the side whose MTU fell names it and the fix within seconds (both used to
// report a peer that failed, or nothing).
func TestMTULowered(t *testing.T) {
	for _, c := range []struct {
		name  string
		ns    func(*testnet.Net) (string, string)
		check func(t *testing.T, n *testnet.Net, srv, cli *bgProc, srvErr, cliErr error)
	}{
		{"sender", func(n *testnet.Net) (string, string) { return n.NsA, n.IfA },
			func(t *testing.T, n *testnet.Net, srv, cli *bgProc, srvErr, cliErr error) {
				wantErr(t, "client", cli.out.String(), cliErr, "xroce write_bw: the interface "+n.IfA+"'s MTU is now 1500, which carries path MTU 1024 at most, and this run's path MTU is 4096: set it back (ip link set "+n.IfA+" mtu 4176 or more), or run with a smaller -m\n")
				wantErr(t, "server", srv.out.String(), srvErr, "closed the exchange early")
			}},
		{"receiver", func(n *testnet.Net) (string, string) { return n.NsB, n.IfB },
			func(t *testing.T, n *testnet.Net, srv, cli *bgProc, srvErr, cliErr error) {
				wantErr(t, "server", srv.out.String(), srvErr, "the interface "+n.IfB+"'s MTU is now 1500, which carries path MTU 1024 at most, and this run's path MTU is 4096: set it back (ip link set "+n.IfB+" mtu 4176 or more), or run with a smaller -m\n")
				wantErr(t, "client", cli.out.String(), cliErr, "xroce write_bw:")
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := testnet.New(t, testnet.Options{MTU: 9000})
			args := []string{"write_bw", "-m", "4096", "-s", "65536", "-D", "20"}
			server := startIn(t, n.NsB, 60*time.Second, append(args, "-d", n.IfB)...)
			for i := 0; i < 500 && !strings.Contains(server.out.String(), "Waiting for client"); i++ {
				time.Sleep(20 * time.Millisecond)
			}
			client := startIn(t, n.NsA, 60*time.Second, append(args, "-d", n.IfA, n.IPB.String())...)
			time.Sleep(2 * time.Second)
			ns, ifname := c.ns(n)
			testnet.Sh(t, "ip", "-n", ns, "link", "set", ifname, "mtu", "1500")
			lowered := time.Now()
			cliErr := client.wait(time.Hour)
			srvErr := server.wait(time.Hour)
			if took := time.Since(lowered); took > 8*time.Second {
				t.Errorf("both sides ended %v after the MTU fell; want within 8 s", took.Round(time.Millisecond))
			}
			c.check(t, n, server, client, srvErr, cliErr)
		})
	}
}

// TestAddressRemoved: the address a running test sends from is removed from its
// interface (either side's). On a veth the frames still flow, so only the tool's
// own look at its interface ends the run: the side whose address went names it and
// the fix within seconds. A trial's runs went on to the end, then both sides
// waited 66-91 s on the out-of-band exchange and blamed the peer.
func TestAddressRemoved(t *testing.T) {
	for _, side := range []string{"client", "server"} {
		t.Run(side, func(t *testing.T) {
			n := testnet.New(t, testnet.Options{MTU: 1500})
			args := []string{"write_bw", "-s", "65536", "-D", "20"}
			server := startIn(t, n.NsB, 60*time.Second, append(args, "-d", n.IfB)...)
			for i := 0; i < 500 && !strings.Contains(server.out.String(), "Waiting for client"); i++ {
				time.Sleep(20 * time.Millisecond)
			}
			client := startIn(t, n.NsA, 60*time.Second, append(args, "-d", n.IfA, n.IPB.String())...)
			time.Sleep(2 * time.Second)
			p, ns, ifname, addr := client, n.NsA, n.IfA, n.IPA.String()
			if side == "server" {
				p, ns, ifname, addr = server, n.NsB, n.IfB, n.IPB.String()
			}
			testnet.Sh(t, "ip", "-n", ns, "addr", "del", addr+"/24", "dev", ifname)
			removed := time.Now()
			err := p.wait(time.Minute)
			if took := time.Since(removed); took > 5*time.Second {
				t.Errorf("the %s ended %v after its address went; want within 5 s", side, took.Round(time.Millisecond))
			}
			wantErr(t, side, p.out.String(), err, "the address "+addr+" was removed from the interface "+ifname+
				", and this run's QPs send from it, so no answer reaches them: add it back (ip addr add "+addr+"/PREFIX dev "+ifname+") and run again\n")
			client.kill()
			server.kill()
		})
	}
}

// TestPingpongMTUMismatch: pingpong -m 4096 against -m 1024 (rc_pingpong exchanges
// no MTU): the side at 1024 refuses the first 4096-byte packet and names the
// cause, the other is told the request was invalid; the other way round the side
// at 4096 refuses a 1024-byte SEND FIRST; with UC the receiver names the dropped
// packets.
func TestPingpongMTUMismatch(t *testing.T) {
	n := testnet.New(t, testnet.Options{MTU: 9000})
	srv, cli, srvErr, cliErr := pairRaw(t, n, []string{"pingpong", "-m", "1024", "-s", "8192", "-n", "10", "-d", n.IfB},
		[]string{"pingpong", "-m", "4096", "-s", "8192", "-n", "10", "-d", n.IfA, n.IPB.String()})
	wantErr(t, "server (-m 1024)", srv, srvErr, "the QP went to the error state after this side refused 1 packet longer than its path MTU (1024): the peer runs a larger -m; give both sides the same -m")
	wantErr(t, "client (-m 4096)", cli, cliErr, "IBV_WC_REM_INV_REQ_ERR", "a path MTU mismatch")
	// The other way round: the side at 4096 refuses the first 1024-byte SEND FIRST
	// (a FIRST or MIDDLE packet carries exactly one path MTU, IBA §9.7.5.1.4), a
	// packet shorter than its path MTU, and its hint names that case too.
	srv, cli, srvErr, cliErr = pairRaw(t, n, []string{"pingpong", "-m", "4096", "-s", "8192", "-n", "10", "-d", n.IfB},
		[]string{"pingpong", "-m", "1024", "-s", "8192", "-n", "10", "-d", n.IfA, n.IPB.String()})
	wantErr(t, "server (-m 4096)", srv, srvErr, "IBV_WC_WR_FLUSH_ERR", "the QP went to the error state after this side refused 1 FIRST or MIDDLE packet shorter than its path MTU (4096): the peer runs a smaller -m; give both sides the same -m")
	wantErr(t, "client (-m 1024)", cli, cliErr, "IBV_WC_REM_INV_REQ_ERR", "a path MTU mismatch")
	// UC drops the longer packets, and the receiver says so at once instead of
	// waiting 30 s for a message that cannot come.
	start := time.Now()
	srv, _, srvErr, _ = pairRaw(t, n, []string{"pingpong", "--connection", "UC", "-m", "512", "-s", "4096", "-n", "5", "-d", n.IfB},
		[]string{"pingpong", "--connection", "UC", "-m", "1024", "-s", "4096", "-n", "5", "-d", n.IfA, n.IPB.String()})
	wantErr(t, "UC server (-m 512)", srv, srvErr, "this side refused 1 packet longer than its path MTU (512): the peer runs a larger -m; give both sides the same -m")
	if el := time.Since(start); el > 15*time.Second {
		t.Errorf("the UC pair ended after %v; want the client's 5 s of silence and little more", el.Round(time.Millisecond))
	}
	// And the side with the larger -m drops the shorter FIRST and MIDDLE packets:
	// it names them too, instead of blaming a loss after 30 s of waiting.
	start = time.Now()
	srv, _, srvErr, _ = pairRaw(t, n, []string{"pingpong", "--connection", "UC", "-m", "4096", "-s", "65536", "-n", "5", "-d", n.IfB},
		[]string{"pingpong", "--connection", "UC", "-m", "1024", "-s", "65536", "-n", "5", "-d", n.IfA, n.IPB.String()})
	wantErr(t, "UC server (-m 4096)", srv, srvErr, "shorter than its path MTU (4096): the peer runs a smaller -m; give both sides the same -m")
	if el := time.Since(start); el > 15*time.Second {
		t.Errorf("the UC pair with the server at -m 4096 ended after %v; want the client's 5 s of silence and little more", el.Round(time.Millisecond))
	}
}

// TestNativeXDPQueues: a veth with fewer receive queues (1) than its peer has
// transmit queues (4) refuses native XDP with ENOSPC, whose reason the kernel
// gives only as an extack message: --xdp-mode native names it and the fixes, and
// auto mode's fallback to generic says why in the link's description.
func TestNativeXDPQueues(t *testing.T) {
	n := testnet.New(t, testnet.Options{Queues: 4, QueuesB: 1})
	p := startIn(t, n.NsB, 20*time.Second, "write_bw", "--xdp-mode", "native", "-d", n.IfB)
	err := p.wait(5 * time.Second)
	want := "xroce write_bw: bpf: " + n.IfB + ": the interface's queues do not allow native XDP: native XDP on a veth needs at least as many receive queues on it as its peer has transmit queues, and it has 1 (the peer's count is in the peer's namespace: ip -d link show there): create the pair with equal queue counts"
	if exitCode(err) != 1 || !strings.HasPrefix(p.out.String(), want) || !strings.Contains(p.out.String(), "or use --xdp-mode generic: ") {
		t.Errorf("--xdp-mode native: %v\n%s\nwant exit status 1 and %q", err, p.out.String(), want)
	}
	_, out, _ := spawnServing(t, n.NsB, n.IfB, t.TempDir())
	if want := "(xdp generic (native refused: " + n.IfB + ": the interface's queues do not allow native XDP: "; !strings.Contains(out.String(), want) {
		t.Errorf("daemon log, want %q:\n%s", want, out.String())
	}
}
