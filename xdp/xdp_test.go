package xdp_test

import (
	"fmt"
	"testing"

	"github.com/xroce/xroce/bpf"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/xdp"
)

var transferSizes = []int{1, 1000, 1024, 1025, 2500, 65536, 1 << 20, 8 << 20}

// TestAFXDPTransfer: two engines in two namespaces on a veth pair, over AF_XDP in
// native and generic mode, at path MTU 1024 (netdev MTU 1500) and 2048 (3000).
func TestAFXDPTransfer(t *testing.T) {
	for _, mode := range []bpf.Mode{bpf.ModeNative, bpf.ModeGeneric} {
		for _, c := range []struct {
			mtu     int
			pathMTU roce.MTU
		}{{1500, roce.MTU1024}, {3000, roce.MTU2048}} {
			t.Run(fmt.Sprintf("%v/pmtu%d", mode, c.pathMTU.Bytes()), func(t *testing.T) {
				n := newTestNet(t, c.mtu, false)
				la, err := xdp.Open(xdp.Config{Interface: n.ifA, Mode: mode, Netns: nsPath(n.nsA)})
				if err != nil {
					t.Fatal(err)
				}
				defer la.Close()
				lb, err := xdp.Open(xdp.Config{Interface: n.ifB, Mode: mode, Netns: nsPath(n.nsB)})
				if err != nil {
					t.Fatal(err)
				}
				defer lb.Close()
				if la.Mode() != mode {
					t.Fatalf("attached in %v mode", la.Mode())
				}
				a, b := newEndpoint(t, la, 16<<20+4096), newEndpoint(t, lb, 16<<20+4096)
				connect(t, a, b, n.ipB, c.pathMTU)
				connect(t, b, a, n.ipA, c.pathMTU)
				stop := run(t, a, b)
				defer stop()
				for i, size := range transferSizes {
					for j, op := range []string{"SEND", "WRITE", "READ"} {
						transfer(t, a, b, op, size, byte(3*i+j))
					}
				}
				t.Logf("A %v", nonzero(a.dev.Counters().Map()))
			})
		}
	}
}

// TestUDPLinkTransfer: the same transfers over the kernel UDP link.
func TestUDPLinkTransfer(t *testing.T) {
	for _, c := range []struct {
		mtu     int
		pathMTU roce.MTU
	}{{1500, roce.MTU1024}, {3000, roce.MTU2048}} {
		t.Run(fmt.Sprintf("pmtu%d", c.pathMTU.Bytes()), func(t *testing.T) {
			n := newTestNet(t, c.mtu, false)
			la, err := xdp.OpenUDP(xdp.UDPConfig{Interface: n.ifA, Netns: nsPath(n.nsA)})
			if err != nil {
				t.Fatal(err)
			}
			defer la.Close()
			lb, err := xdp.OpenUDP(xdp.UDPConfig{Interface: n.ifB, Netns: nsPath(n.nsB)})
			if err != nil {
				t.Fatal(err)
			}
			defer lb.Close()
			a, b := newEndpoint(t, la, 16<<20+4096), newEndpoint(t, lb, 16<<20+4096)
			connect(t, a, b, n.ipB, c.pathMTU)
			connect(t, b, a, n.ipA, c.pathMTU)
			stop := run(t, a, b)
			defer stop()
			for i, size := range transferSizes {
				for j, op := range []string{"SEND", "WRITE", "READ"} {
					transfer(t, a, b, op, size, byte(3*i+j))
				}
			}
			t.Logf("A %v", nonzero(a.dev.Counters().Map()))
		})
	}
}

// TestIPv6Transfer: RoCEv2 over IPv6 (ULA addresses, GID index 2) on both links.
func TestIPv6Transfer(t *testing.T) {
	for _, kind := range []string{"afxdp", "udp"} {
		t.Run(kind, func(t *testing.T) {
			n := newTestNet(t, 1500, false)
			var la, lb transport.Link
			var err error
			if kind == "afxdp" {
				la, err = xdp.Open(xdp.Config{Interface: n.ifA, Mode: bpf.ModeNative, Netns: nsPath(n.nsA)})
				if err == nil {
					lb, err = xdp.Open(xdp.Config{Interface: n.ifB, Mode: bpf.ModeNative, Netns: nsPath(n.nsB)})
				}
			} else {
				la, err = xdp.OpenUDP(xdp.UDPConfig{Interface: n.ifA, Netns: nsPath(n.nsA)})
				if err == nil {
					lb, err = xdp.OpenUDP(xdp.UDPConfig{Interface: n.ifB, Netns: nsPath(n.nsB)})
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			defer la.Close()
			defer lb.Close()
			a, b := newEndpoint(t, la, 4<<20), newEndpoint(t, lb, 4<<20)
			connect(t, a, b, n.ip6B, roce.MTU1024)
			connect(t, b, a, n.ip6A, roce.MTU1024)
			stop := run(t, a, b)
			defer stop()
			for i, size := range []int{1, 1025, 65536, 1 << 20} {
				for j, op := range []string{"SEND", "WRITE", "READ"} {
					transfer(t, a, b, op, size, byte(3*i+j))
				}
			}
			if c := a.dev.Counters().Get(transport.CntRcvdICRCErr) + b.dev.Counters().Get(transport.CntRcvdICRCErr); c != 0 {
				t.Errorf("%d ICRC errors over IPv6", c)
			}
		})
	}
}
