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
			"xroce write_bw: -m 4096: the interface " + c.ifname + "'s MTU 1500 carries path MTU 1024 at most; raise it to 4176 or more for 4096 (ip link set " + c.ifname + " mtu 4176)\n",
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
		want := "xroce pingpong: -m 4096: the interface " + c.ifname + "'s MTU 1500 carries path MTU 1024 at most; raise it to 4176 or more for 4096 (ip link set " + c.ifname + " mtu 4176); or give both sides -m 1024\n"
		if out := p.out.String(); exitCode(err) != 1 || !strings.Contains(out, want) {
			t.Errorf("%s: %v\n%s\nwant exit status 1 and %q", who, err, out, want)
		}
	}
}
