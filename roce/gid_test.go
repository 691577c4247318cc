package roce_test

import (
	"net/netip"
	"strings"
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

// TestGIDTableFollow: address changes keep every other entry's index, leave empty
// slots for addresses removed and fill the first empty slot with a new one, as
// rdma_rxe's table does (ib_cache.c).
func TestGIDTableFollow(t *testing.T) {
	a := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, x := range s {
			out = append(out, netip.MustParseAddr(x))
		}
		return out
	}
	steps := []struct {
		addrs          []netip.Addr
		table          string
		added, removed string
	}{
		{a("10.77.0.11", "10.77.0.12", "fd00:77::b"),
			"0 fe80::5054:ff:fe77:b v2|1 ::ffff:10.77.0.11 v2|2 fd00:77::b v2|3 ::ffff:10.77.0.12 v2|", "3 ::ffff:10.77.0.12 v2|", ""},
		{a("10.77.0.12", "fd00:77::b"),
			"0 fe80::5054:ff:fe77:b v2|1 empty|2 fd00:77::b v2|3 ::ffff:10.77.0.12 v2|", "", "1 ::ffff:10.77.0.11 v2|"},
		{a("10.77.0.12", "fd00:77::b"),
			"0 fe80::5054:ff:fe77:b v2|1 empty|2 fd00:77::b v2|3 ::ffff:10.77.0.12 v2|", "", ""},
		{a("10.77.0.13", "10.77.0.12", "fd00:77::b", "fd00:77::c"),
			"0 fe80::5054:ff:fe77:b v2|1 ::ffff:10.77.0.13 v2|2 fd00:77::b v2|3 ::ffff:10.77.0.12 v2|4 fd00:77::c v2|", "1 ::ffff:10.77.0.13 v2|4 fd00:77::c v2|", ""},
		{a("10.77.0.13"),
			"0 fe80::5054:ff:fe77:b v2|1 ::ffff:10.77.0.13 v2|2 empty|3 empty|4 empty|", "", "2 fd00:77::b v2|3 ::ffff:10.77.0.12 v2|4 fd00:77::c v2|"},
		{nil, "0 fe80::5054:ff:fe77:b v2|1 empty|2 empty|3 empty|4 empty|", "", "1 ::ffff:10.77.0.13 v2|"},
	}
	render := func(t roce.GIDTable) string {
		s := strings.ReplaceAll(strings.ReplaceAll(t.String(), "\t", " "), "\n", "|")
		return strings.ReplaceAll(s, "RoCE ", "")
	}
	tbl := roce.BuildGIDTable(rxeServerMAC, a("10.77.0.11", "fd00:77::b"))
	for i, st := range steps {
		before := render(tbl)
		next, added, removed := tbl.Follow(rxeServerMAC, st.addrs)
		if render(tbl) != before {
			t.Fatalf("step %d: Follow changed the table it was called on", i)
		}
		if got := render(next); got != st.table {
			t.Errorf("step %d: table %q, want %q", i, got, st.table)
		}
		if got := render(added); got != st.added {
			t.Errorf("step %d: added %q, want %q", i, got, st.added)
		}
		if got := render(removed); got != st.removed {
			t.Errorf("step %d: removed %q, want %q", i, got, st.removed)
		}
		tbl = next
		if i == 4 {
			if _, err := tbl.Entry(4); err == nil || err.Error() != "roce: GID index 4 is empty: its address was removed from the interface" {
				t.Errorf("Entry(4), the last slot, emptied: %v", err)
			}
		}
		if i == 1 {
			if _, err := tbl.Entry(1); err == nil || err.Error() != "roce: GID index 1 is empty: its address was removed from the interface" {
				t.Errorf("Entry(1) of an empty slot: %v", err)
			}
			if _, ok := tbl.Find(roce.GID{}); ok {
				t.Error("Find found the zero GID in an empty slot")
			}
			if _, ok := tbl.Find(mustGID(t, "::ffff:10.77.0.11")); ok {
				t.Error("Find found a removed address")
			}
		}
	}
}
