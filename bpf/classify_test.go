package bpf

import (
	"net/netip"
	"runtime"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/xdp/xsk"
)

const (
	xdpPass     = 2
	xdpRedirect = 4
)

// TestClassify runs the XDP program on crafted frames (BPF_PROG_TEST_RUN) with an
// AF_XDP socket registered for queue 0 of a veth inside a namespace the test creates:
// RoCEv2 over IPv4 and IPv6 is redirected; everything the program must not vouch for
// passes to the kernel; with no socket registered for the queue, RoCE passes too.
func TestClassify(t *testing.T) {
	runtime.LockOSThread() // this thread enters a new namespace and never leaves it
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	ns, err := netns.New()
	if err != nil {
		t.Skipf("needs root: %v", err)
	}
	defer func() {
		netns.Set(orig)
		ns.Close()
		orig.Close()
	}()
	la := netlink.NewLinkAttrs()
	la.Name = "xrc0"
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: "xrc1"}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"xrc0", "xrc1"} {
		l, _ := netlink.LinkByName(n)
		if err := netlink.LinkSetUp(l); err != nil {
			t.Fatal(err)
		}
	}
	l, _ := netlink.LinkByName("xrc0")
	p, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Attach(l.Attrs().Index, ModeNative); err != nil {
		t.Fatal(err)
	}
	sock, err := xsk.Open(l.Attrs().Index, 0, xsk.Config{Frames: 64, FrameSize: 4096,
		FillSize: 32, CompletionSize: 32, RxSize: 32, TxSize: 32})
	if err != nil {
		t.Fatal(err)
	}
	defer sock.Close()
	if err := p.Register(0, sock.FD()); err != nil {
		t.Fatal(err)
	}

	frame := func(v6 bool, mutate func(b []byte)) []byte {
		pk := roce.Packet{IsIPv6: v6, UDP: roce.UDP{SrcPort: 0xc000, DstPort: roce.UDPPort},
			BTH: roce.BTH{Opcode: roce.RC_SEND_ONLY, PKey: 0xffff, DestQP: 17}, Payload: make([]byte, 64)}
		pk.IPv4 = roce.IPv4{FlagsFrag: 0x4000, TTL: 64, Src: [4]byte{10, 0, 0, 1}, Dst: [4]byte{10, 0, 0, 2}}
		pk.IPv6 = roce.IPv6{HopLimit: 64, Src: netip.MustParseAddr("fd00::1").As16(), Dst: netip.MustParseAddr("fd00::2").As16()}
		b := make([]byte, pk.Len()+8)
		n, err := pk.Encode(b)
		if err != nil {
			t.Fatal(err)
		}
		b = b[:n]
		if mutate != nil {
			mutate(b)
		}
		return b
	}
	run := func(data []byte, queue uint32) uint32 {
		// The test run delivers on receive queue 0 (a context naming the veth's queue
		// is refused by this kernel's test run for veth); "no socket for the queue"
		// is tested by removing queue 0's entry.
		if queue != 0 {
			if err := p.objs.Xsks.Delete(uint32(0)); err != nil {
				t.Fatal(err)
			}
			defer p.Register(0, sock.FD())
		}
		ret, err := p.objs.XroceRedirect.Run(&ebpf.RunOptions{Data: data})
		if err != nil {
			t.Fatal(err)
		}
		return ret
	}
	vlan := func(b []byte) []byte {
		return append(append(append([]byte{}, b[:12]...), 0x81, 0x00, 0x00, 0x05), b[12:]...)
	}
	for _, c := range []struct {
		name  string
		data  []byte
		queue uint32
		want  uint32
	}{
		{"RoCEv2 over IPv4", frame(false, nil), 0, xdpRedirect},
		{"RoCEv2 over IPv6", frame(true, nil), 0, xdpRedirect},
		{"RoCEv2 on a queue with no socket", frame(false, nil), 1, xdpPass},
		{"UDP to port 4790", frame(false, func(b []byte) { b[37] = 0xb6 }), 0, xdpPass},
		{"UDP from port 4791 to another", frame(false, func(b []byte) { b[34], b[35], b[36], b[37] = 0x12, 0xb7, 0x13, 0x88 }), 0, xdpPass},
		{"TCP", frame(false, func(b []byte) { b[23] = 6 }), 0, xdpPass},
		{"IPv4 with options", frame(false, func(b []byte) { b[14] = 0x46 }), 0, xdpPass},
		{"IPv4 fragment", frame(false, func(b []byte) { b[20] = 0x20 }), 0, xdpPass},
		{"IPv4 later fragment", frame(false, func(b []byte) { b[21] = 0x10 }), 0, xdpPass},
		{"IPv6 hop-by-hop header", frame(true, func(b []byte) { b[20] = 0 }), 0, xdpPass},
		{"VLAN-tagged RoCE", vlan(frame(false, nil)), 0, xdpPass},
		{"ARP", frame(false, func(b []byte) { b[12], b[13] = 0x08, 0x06 }), 0, xdpPass},
		{"truncated UDP header", frame(false, nil)[:38], 0, xdpPass},
	} {
		if got := run(c.data, c.queue); got != c.want {
			t.Errorf("%s: XDP action %d, want %d", c.name, got, c.want)
		}
	}
}
