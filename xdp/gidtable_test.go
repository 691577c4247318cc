package xdp_test

import (
	"errors"
	"net"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/xroce/xroce/xdp"
)

// TestGIDTable builds the table from a real interface through netlink,
// inside a network namespace the test creates and removes.
func TestGIDTable(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.New() // creates an anonymous namespace and enters it on this thread
	if err != nil {
		t.Skipf("cannot create a network namespace (needs root): %v", err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			t.Fatal(err)
		}
		ns.Close()
	}()
	la := netlink.NewLinkAttrs()
	la.Name = "xroce0"
	la.HardwareAddr = net.HardwareAddr{0x52, 0x54, 0x00, 0x77, 0x00, 0x0b}
	veth := &netlink.Veth{LinkAttrs: la, PeerName: "xroce1"}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"10.77.0.11/24", "fd00:77::b/64"} {
		addr, _ := netlink.ParseAddr(a)
		addr.Flags = 0x02 // IFA_F_NODAD
		if err := netlink.AddrAdd(veth, addr); err != nil {
			t.Fatal(err)
		}
	}
	if err := netlink.LinkSetUp(veth); err != nil {
		t.Fatal(err)
	}
	tbl, err := xdp.GIDTable("xroce0")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"fe80::5054:ff:fe77:b", "::ffff:10.77.0.11", "fd00:77::b"}
	if len(tbl) != len(want) {
		t.Fatalf("table\n%s", tbl)
	}
	for i, w := range want {
		if tbl[i].GID.String() != w {
			t.Errorf("entry %d = %s, want %s", i, tbl[i].GID, w)
		}
	}
	if _, err := xdp.GIDTable("nosuch0"); !errors.Is(err, xdp.ErrNoInterface) {
		t.Errorf("GIDTable(nosuch0): %v, want ErrNoInterface", err)
	}
	if _, err := xdp.GIDTable("lo"); err == nil || !strings.Contains(err.Error(), `"lo" has no Ethernet address`) {
		t.Errorf("GIDTable(lo): %v", err)
	}
}
