package main

import (
	"strings"
	"testing"
	"time"

	"github.com/xroce/xroce/test/testnet"
)

// TestMTUAboveActive: -m 4096 on a 1500-byte interface runs at the port's
// active_mtu, 1024, as perftest does (its two lines on stdout), and says on stderr
// what the interface's MTU would have to be (it was refused at connect).
func TestMTUAboveActive(t *testing.T) {
	n := testnet.New(t, testnet.Options{MTU: 1500})
	args := []string{"write_bw", "-m", "4096", "-s", "8192", "-n", "100"}
	srv, cli := pair(t, n, append(args, "-d", n.IfB), append(args, "-d", n.IfA, n.IPB.String()))
	for who, c := range map[string]struct{ out, ifname string }{"server": {srv, n.IfB}, "client": {cli, n.IfA}} {
		for _, want := range []string{
			"Requested mtu is higher than active mtu \nChanging to active mtu - 1024\n",
			"xroce write_bw: warning: -m 4096 runs at 1024: the interface " + c.ifname + "'s MTU 1500 gives the port active_mtu 1024 (rdma_rxe's rule: the largest path MTU 80 bytes under it); raise it to 4176 or more for 4096 (ip link set " + c.ifname + " mtu 4176)\n",
			" Mtu             : 1024[B]\n",
		} {
			if !strings.Contains(c.out, want) {
				t.Errorf("%s: no %q in\n%s", who, want, c.out)
			}
		}
	}
}

// TestPingpongMTUAboveActive: pingpong -m 4096 on a 1500-byte interface is refused
// by either side at once, before the exchange (each run here alone, with no
// peer), naming its interface's MTU, the MTU that would carry 4096 and the -m
// that works. Before, only the side that connected first said why; the other saw
// its peer leave the exchange.
func TestPingpongMTUAboveActive(t *testing.T) {
	n := testnet.New(t, testnet.Options{MTU: 1500})
	args := []string{"pingpong", "-m", "4096", "-s", "4096", "-n", "10"}
	for who, c := range map[string]struct {
		ns     string
		args   []string
		ifname string
	}{"server": {n.NsB, append(args, "-d", n.IfB), n.IfB}, "client": {n.NsA, append(args, "-d", n.IfA, n.IPB.String()), n.IfA}} {
		start := time.Now()
		p := startIn(t, c.ns, 60*time.Second, c.args...)
		err := p.wait(10 * time.Second)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: the refusal took %v", who, d)
		}
		want := "xroce pingpong: -m 4096: its longest IPv4 packets are 4164 bytes, and the interface " + c.ifname + "'s MTU is 1500: raise it to 4176 or more (ip link set " + c.ifname + " mtu 4176), or give both sides -m 1024\n"
		if out := p.out.String(); exitCode(err) != 1 || !strings.Contains(out, want) {
			t.Errorf("%s: %v\n%s\nwant exit status 1 and %q", who, err, out, want)
		}
	}
}

// TestPingpongAboveActiveFits: on a 1100-byte interface the port's active_mtu is
// 512 (rdma_rxe's rule), but path MTU 1024's longest IPv4 packets (1092 bytes)
// fit: pingpong -m 1024 runs and verifies its data, as ibv_rc_pingpong's default
// -m 1024 does on rdma_rxe there (it checks max_mtu only); -m 2048 does not fit
// and is refused with the fix.
func TestPingpongAboveActiveFits(t *testing.T) {
	n := testnet.New(t, testnet.Options{}) // IPv6 addresses need 1280 to be added
	testnet.Sh(t, "ip", "-n", n.NsA, "link", "set", n.IfA, "mtu", "1100")
	testnet.Sh(t, "ip", "-n", n.NsB, "link", "set", n.IfB, "mtu", "1100")
	args := []string{"pingpong", "-m", "1024", "-s", "4096", "-n", "20", "-c"}
	srv, cli, srvErr, cliErr := pairRaw(t, n, append(args, "-d", n.IfB), append(args, "-d", n.IfA, n.IPB.String()))
	if srvErr != nil || cliErr != nil {
		t.Fatalf("server: %v\n%s\nclient: %v\n%s", srvErr, srv, cliErr, cli)
	}
	for who, out := range map[string]string{"server": srv, "client": cli} {
		if !strings.Contains(out, "163840 bytes in") || !strings.Contains(out, "20 iters in") {
			t.Errorf("%s: no pingpong result:\n%s", who, out)
		}
	}
	// -m 2048 does not fit (2116-byte packets): refused before the exchange, with
	// the MTU that carries it and the largest -m that fits.
	p := startIn(t, n.NsB, 60*time.Second, "pingpong", "-m", "2048", "-d", n.IfB)
	err := p.wait(10 * time.Second)
	want := "xroce pingpong: -m 2048: its longest IPv4 packets are 2116 bytes, and the interface " + n.IfB + "'s MTU is 1100: raise it to 2128 or more (ip link set " + n.IfB + " mtu 2128), or give both sides -m 1024\n"
	if out := p.out.String(); exitCode(err) != 1 || !strings.Contains(out, want) {
		t.Errorf("-m 2048 on 1100 bytes: %v\n%s\nwant exit status 1 and %q", err, out, want)
	}
}
