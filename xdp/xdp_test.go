package xdp_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/xroce/xroce/bpf"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/xdp"
)

var transferSizes = []int{1, 1000, 1024, 1025, 2500, 65536, 1 << 20, 8 << 20}

// TestAFXDPTransfer: two engines in two namespaces on a veth pair, over AF_XDP in
// native and generic mode, at path MTU 1024 (netdev MTU 1500), 2048 (3000) and 4096
// (9000: multi-buffer, every full frame sent and received as two chained
// descriptors).
func TestAFXDPTransfer(t *testing.T) {
	for _, mode := range []bpf.Mode{bpf.ModeNative, bpf.ModeGeneric} {
		for _, c := range []struct {
			mtu     int
			pathMTU roce.MTU
		}{{1500, roce.MTU1024}, {3000, roce.MTU2048}, {9000, roce.MTU4096}} {
			t.Run(fmt.Sprintf("%v/pmtu%d", mode, c.pathMTU.Bytes()), func(t *testing.T) {
				n := newTestNet(t, c.mtu, false)
				la, lb := openXDP(t, n, mode)
				if la.Mode() != mode {
					t.Fatalf("attached in %v mode", la.Mode())
				}
				a, b := transferAll(t, la, lb, n.ipA, n.ipB, c.pathMTU, transferSizes)
				chained := la.ChainedFrames() + lb.ChainedFrames()
				big := c.pathMTU == roce.MTU4096
				if big != (chained > 0) {
					t.Errorf("%d frames arrived as chained descriptors at path MTU %d", chained, c.pathMTU.Bytes())
				}
				// Every frame was encoded in lent memory and sent without a copy,
				// a full frame at path MTU 4096 in two adjacent chunks.
				for _, s := range []struct {
					l *xdp.Link
					e *endpoint
				}{{la, a}, {lb, b}} {
					sent, inPlace := s.e.dev.Counters().Map()["sent_pkts"], s.l.TxInPlace()
					if inPlace != sent {
						t.Errorf("%s: %d of %d frames sent from lent chunks", s.l.Name(), inPlace, sent)
					}
				}
				// Received chains are joined in place but where the fill ring wraps
				// or grows (rxfill.go) between a frame's two chunks.
				joined := la.ChainedInPlace() + lb.ChainedInPlace()
				t.Logf("%d of %d chained frames joined in place", joined, chained)
				if joined > chained || joined < chained*9/10 {
					t.Errorf("%d of %d chained frames joined in place", joined, chained)
				}
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
			transferAll(t, openUDPOn(t, n.ifA, n.nsA), openUDPOn(t, n.ifB, n.nsB), n.ipA, n.ipB, c.pathMTU, transferSizes)
		})
	}
}

// TestIPv6Transfer: RoCEv2 over IPv6 (ULA addresses, GID index 2) on both links.
func TestIPv6Transfer(t *testing.T) {
	for _, kind := range []string{"afxdp", "udp"} {
		t.Run(kind, func(t *testing.T) {
			n := newTestNet(t, 1500, false)
			var la, lb transport.Link
			if kind == "afxdp" {
				la, lb = openXDP(t, n, bpf.ModeNative)
			} else {
				la, lb = openUDPOn(t, n.ifA, n.nsA), openUDPOn(t, n.ifB, n.nsB)
			}
			a, b := transferAll(t, la, lb, n.ip6A, n.ip6B, roce.MTU1024, []int{1, 1025, 65536, 1 << 20})
			if c := a.dev.Counters().Get(transport.CntRcvdICRCErr) + b.dev.Counters().Get(transport.CntRcvdICRCErr); c != 0 {
				t.Errorf("%d ICRC errors over IPv6", c)
			}
		})
	}
}

// transferAll connects an engine on each link and moves every size with SEND, WRITE
// and READ, checking the data; it returns the endpoints for further checks.
func transferAll(t *testing.T, la, lb transport.Link, ipA, ipB netip.Addr, mtu roce.MTU, sizes []int) (*endpoint, *endpoint) {
	t.Helper()
	a, b := newEndpoint(t, la, 2*sizes[len(sizes)-1]+4096), newEndpoint(t, lb, 2*sizes[len(sizes)-1]+4096)
	connect(t, a, b, ipB, mtu)
	connect(t, b, a, ipA, mtu)
	stop := run(t, a, b)
	defer stop()
	for i, size := range sizes {
		for j, op := range []string{"SEND", "WRITE", "READ"} {
			transfer(t, a, b, op, size, byte(3*i+j))
		}
	}
	t.Logf("A %v", nonzero(a.dev.Counters().Map()))
	return a, b
}

// TestExampleOpen runs ExampleOpen's code on a veth pair in two namespaces, in the
// default attach mode, and checks what it prints (ExampleOpen has no Output line:
// it needs root and the veth pair).
func TestExampleOpen(t *testing.T) {
	n := newTestNet(t, 1500, false)
	var out strings.Builder
	err := writeReadXDP(&out, xdp.Config{Interface: n.ifA, Netns: nsPath(n.nsA)}, n.ipA,
		xdp.Config{Interface: n.ifB, Netns: nsPath(n.nsB)}, n.ipB)
	if err != nil {
		t.Fatal(err)
	}
	want := "1 IBV_WC_RDMA_WRITE IBV_WC_SUCCESS 16\n" +
		"2 IBV_WC_RDMA_READ IBV_WC_SUCCESS 16\n" +
		"read back: \"hello over XDP!!\"\n"
	if out.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", out.String(), want)
	}
}
