// Package testnet builds throwaway networks for tests: two network namespaces, A and
// B, joined by a veth pair, or by two veth pairs and a bridge in a third namespace
// (where faults can be injected with nftables). Every name carries a random suffix
// so tests can run in parallel, and everything is removed when the test ends, even
// when it fails (Create serves programs that are not tests). Needs root and iproute2.
package testnet

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
)

// Options shape the network.
type Options struct {
	MTU     int  // netdev MTU of every interface; 0 means 1500
	Bridge  bool // put a bridge namespace between A and B
	Queues  int  // veth queues (no-bridge networks); 0 means 1
	QueuesB int  // IfB's queues when they differ from IfA's (no-bridge networks); 0 means Queues
	TxA     int  // IfA's transmit queues when they differ from its receive queues; 0 means Queues
}

// Net is a test network. IPA/IPB (10.79.0.1/24, .2) and IP6A/IP6B (fd00:79::1/64,
// ::2, no DAD) are on IfA in NsA and IfB in NsB.
type Net struct {
	NsA, NsB, NsBr string
	IfA, IfB       string
	IPA, IPB       netip.Addr
	IP6A, IP6B     netip.Addr
	PortA, PortB   string // with Bridge: the bridge's ports (in NsBr) towards A and B
}

// Sh runs a command and fails the test if it fails.
func Sh(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Path returns the path of a named namespace, for xdp.Config.Netns.
func Path(ns string) string { return "/var/run/netns/" + ns }

// New creates the network; t.Cleanup removes it, after failing the test for any
// process the test left running in its namespaces (and killing it).
func New(t testing.TB, o Options) *Net {
	t.Helper()
	n, remove, err := Create(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		n.reapLeftovers(t)
		remove()
	})
	return n
}

// Create creates the network for a program that is not a test (test/bench) and
// returns the function that removes it. On error it removes what it had made.
func Create(o Options) (n *Net, remove func(), err error) {
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, nil, fmt.Errorf("iproute2's ip is required")
	}
	if o.MTU == 0 {
		o.MTU = 1500
	}
	if o.Queues == 0 {
		o.Queues = 1
	}
	var r [3]byte
	_, _ = rand.Read(r[:])
	id := hex.EncodeToString(r[:])
	n = &Net{NsA: "xr" + id + "a", NsB: "xr" + id + "b", IfA: "xa" + id, IfB: "xb" + id,
		IPA: netip.MustParseAddr("10.79.0.1"), IPB: netip.MustParseAddr("10.79.0.2"),
		IP6A: netip.MustParseAddr("fd00:79::1"), IP6B: netip.MustParseAddr("fd00:79::2")}
	nss := []string{n.NsA, n.NsB}
	if o.Bridge {
		n.NsBr, n.PortA, n.PortB = "xr"+id+"m", "pa"+id, "pb"+id
		nss = append(nss, n.NsBr)
	}
	del := func() {
		for _, ns := range nss {
			_ = exec.Command("ip", "netns", "del", ns).Run()
		}
	}
	defer func() {
		if err != nil {
			del() // the failed return has set remove to nil
		}
	}()
	var cmds [][]string
	for _, ns := range nss {
		cmds = append(cmds, []string{"ip", "netns", "add", ns}, []string{"ip", "-n", ns, "link", "set", "lo", "up"})
	}
	m := fmt.Sprint(o.MTU)
	if !o.Bridge {
		q, qb, txa := fmt.Sprint(o.Queues), fmt.Sprint(o.Queues), fmt.Sprint(o.Queues)
		if o.QueuesB != 0 {
			qb = fmt.Sprint(o.QueuesB)
		}
		if o.TxA != 0 {
			txa = fmt.Sprint(o.TxA)
		}
		cmds = append(cmds, []string{"ip", "link", "add", n.IfA, "netns", n.NsA, "mtu", m, "numtxqueues", txa, "numrxqueues", q, "type", "veth",
			"peer", "name", n.IfB, "netns", n.NsB, "mtu", m, "numtxqueues", qb, "numrxqueues", qb})
	} else {
		cmds = append(cmds, []string{"ip", "-n", n.NsBr, "link", "add", "br0", "mtu", m, "type", "bridge"})
		for _, s := range []struct{ ns, ifn, port string }{{n.NsA, n.IfA, n.PortA}, {n.NsB, n.IfB, n.PortB}} {
			cmds = append(cmds, []string{"ip", "link", "add", s.ifn, "netns", s.ns, "mtu", m, "type", "veth", "peer", "name", s.port, "netns", n.NsBr, "mtu", m},
				[]string{"ip", "-n", n.NsBr, "link", "set", s.port, "master", "br0", "up"})
		}
		cmds = append(cmds, []string{"ip", "-n", n.NsBr, "link", "set", "br0", "up"})
	}
	cmds = append(cmds,
		[]string{"ip", "-n", n.NsA, "addr", "add", n.IPA.String() + "/24", "dev", n.IfA},
		[]string{"ip", "-n", n.NsB, "addr", "add", n.IPB.String() + "/24", "dev", n.IfB},
		[]string{"ip", "-n", n.NsA, "addr", "add", n.IP6A.String() + "/64", "dev", n.IfA, "nodad"},
		[]string{"ip", "-n", n.NsB, "addr", "add", n.IP6B.String() + "/64", "dev", n.IfB, "nodad"},
		[]string{"ip", "-n", n.NsA, "link", "set", n.IfA, "up"},
		[]string{"ip", "-n", n.NsB, "link", "set", n.IfB, "up"})
	for _, c := range cmds {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			return nil, nil, fmt.Errorf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	return n, del, nil
}
