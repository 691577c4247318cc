package roce_test

import (
	"net/netip"
	"testing"

	"github.com/xroce/xroce/roce"
)

var rxeServerMAC = [6]byte{0x52, 0x54, 0x00, 0x77, 0x00, 0x0b}

func TestLinkLocalGID(t *testing.T) {
	g := roce.LinkLocalGID(rxeServerMAC)
	if g.String() != "fe80::5054:ff:fe77:b" {
		t.Errorf("LinkLocalGID = %s", g)
	}
	if g.Hex() != "fe80:0000:0000:0000:5054:00ff:fe77:000b" {
		t.Errorf("Hex = %s", g.Hex())
	}
}

func TestParseGID(t *testing.T) {
	for _, c := range []struct {
		in, str string
		mapped  bool
	}{
		{"10.77.0.11", "::ffff:10.77.0.11", true},
		{"::ffff:10.77.0.11", "::ffff:10.77.0.11", true},
		{"0000:0000:0000:0000:0000:ffff:0a4d:000b", "::ffff:10.77.0.11", true},
		{"fe80::5054:ff:fe77:b", "fe80::5054:ff:fe77:b", false},
		{"fd00:77::b", "fd00:77::b", false},
	} {
		g, err := roce.ParseGID(c.in)
		if err != nil {
			t.Fatalf("ParseGID(%q): %v", c.in, err)
		}
		if g.String() != c.str || g.IsIPv4Mapped() != c.mapped {
			t.Errorf("ParseGID(%q) = %s mapped=%v, want %s mapped=%v", c.in, g, g.IsIPv4Mapped(), c.str, c.mapped)
		}
	}
	g, _ := roce.ParseGID("10.77.0.11")
	if g.Addr() != netip.MustParseAddr("10.77.0.11") {
		t.Errorf("Addr = %v", g.Addr())
	}
	for _, bad := range []string{"", "10.77.0.256", "fe80::1%eth0", "zz::1", "1.2.3"} {
		if _, err := roce.ParseGID(bad); err == nil {
			t.Errorf("ParseGID(%q) succeeded", bad)
		}
	}
}

// TestBuildGIDTableRxe is the table the rdma_rxe guests showed for the capture server.
func TestBuildGIDTableRxe(t *testing.T) {
	tbl := roce.BuildGIDTable(rxeServerMAC, []netip.Addr{
		netip.MustParseAddr("10.77.0.11"),
		netip.MustParseAddr("fe80::5054:ff:fe77:b"), // the kernel's own EUI-64 link-local: no second entry
	})
	want := roce.GIDTable{
		{Index: 0, GID: mustGID(t, "fe80::5054:ff:fe77:b"), Version: roce.RoCEv2},
		{Index: 1, GID: mustGID(t, "::ffff:10.77.0.11"), Version: roce.RoCEv2},
	}
	if tbl.String() != want.String() {
		t.Errorf("table\n%s\nwant\n%s", tbl, want)
	}
	if _, err := tbl.Entry(2); err == nil || err.Error() != "roce: GID index 2 out of range: the table has 2 entries (0..1)" {
		t.Errorf("Entry(2) error = %v", err)
	}
}

// TestBuildGIDTableOrder: IPv4 addresses come before IPv6 ones whatever the input
// order (roce_gid_mgmt.c add_netdev_ips), duplicates collapse.
func TestBuildGIDTableOrder(t *testing.T) {
	tbl := roce.BuildGIDTable(rxeServerMAC, []netip.Addr{
		netip.MustParseAddr("fd00:77::b"),
		netip.MustParseAddr("10.77.0.11"),
		netip.MustParseAddr("fe80::1"),
		netip.MustParseAddr("10.78.0.11"),
		netip.MustParseAddr("10.77.0.11"),
	})
	want := []string{"fe80::5054:ff:fe77:b", "::ffff:10.77.0.11", "::ffff:10.78.0.11", "fd00:77::b", "fe80::1"}
	if len(tbl) != len(want) {
		t.Fatalf("table\n%s", tbl)
	}
	for i, w := range want {
		if tbl[i].Index != i || tbl[i].GID.String() != w || tbl[i].Version != roce.RoCEv2 {
			t.Errorf("entry %d = %+v, want %s", i, tbl[i], w)
		}
	}
}

func mustGID(t *testing.T, s string) roce.GID {
	t.Helper()
	g, err := roce.ParseGID(s)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
