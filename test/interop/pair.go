package interop

import (
	"net/netip"
	"os/exec"
	"strconv"
)

// Pair is two rdma_rxe guests on one bridge in a network namespace, as the captures
// of testdata/ were recorded: A (10.77.0.11, MAC 52:54:00:77:00:0b) and B
// (10.77.0.12, 52:54:00:77:00:0c) on taps, and a veth whose namespace end, HostIf
// (10.77.0.1, 52:54:00:77:00:01), is a host-side peer. No traffic leaves the
// namespace.
type Pair struct {
	NS     string
	HostIf string
	A, B   *VM

	HostIP, AIP, BIP netip.Addr
}

// The pair's addresses.
const (
	pairHostMAC = "52:54:00:77:00:01"
	pairAMAC    = "52:54:00:77:00:0b"
	pairBMAC    = "52:54:00:77:00:0c"
)

// NewPair creates the namespace and bridge and boots both guests with eth0 at the
// given MTU. Close removes everything, also when NewPair fails half way.
func NewPair(img *Image, mtu int) (*Pair, error) {
	id := randomID()
	p := &Pair{NS: "xrp" + id, HostIf: "xh" + id, HostIP: netip.MustParseAddr("10.77.0.1"),
		AIP: netip.MustParseAddr("10.77.0.11"), BIP: netip.MustParseAddr("10.77.0.12")}
	m := strconv.Itoa(mtu)
	ns := func(args ...string) error { return sh(append([]string{"ip", "-n", p.NS}, args...)...) }
	steps := []func() error{
		func() error { return sh("ip", "netns", "add", p.NS) },
		func() error { return ns("link", "set", "lo", "up") },
		func() error { return ns("link", "add", "br0", "mtu", m, "type", "bridge") },
		func() error { return ns("tuntap", "add", "dev", "tap0", "mode", "tap") },
		func() error { return ns("tuntap", "add", "dev", "tap1", "mode", "tap") },
		func() error { return ns("link", "set", "tap0", "mtu", m, "master", "br0", "up") },
		func() error { return ns("link", "set", "tap1", "mtu", m, "master", "br0", "up") },
		func() error {
			return ns("link", "add", p.HostIf, "mtu", m, "address", pairHostMAC, "type", "veth", "peer", "name", "xb"+id, "mtu", m)
		},
		func() error { return ns("link", "set", "xb"+id, "master", "br0", "up") },
		func() error { return ns("addr", "add", p.HostIP.String()+"/24", "dev", p.HostIf) },
		func() error { return ns("link", "set", p.HostIf, "up") },
		func() error { return ns("link", "set", "br0", "up") },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			p.Close()
			return nil, err
		}
	}
	var err error
	if p.A, err = bootVM(img, p.NS, "tap0", pairAMAC, p.AIP, mtu); err != nil {
		p.Close()
		return nil, err
	}
	if p.B, err = bootVM(img, p.NS, "tap1", pairBMAC, p.BIP, mtu); err != nil {
		p.Close()
		return nil, err
	}
	return p, nil
}

// Close stops both guests and removes the namespace.
func (p *Pair) Close() {
	for _, v := range []*VM{p.A, p.B} {
		if v != nil {
			v.Close()
		}
	}
	_ = exec.Command("ip", "netns", "del", p.NS).Run()
}
