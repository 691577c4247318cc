package roce

import (
	"fmt"
	"net/netip"
	"strings"
)

// GIDEntry is one slot of a port's GID table.
type GIDEntry struct {
	Index   int
	GID     GID
	Version RoCEVersion
}

// GIDTable is a port's GID table, indexed from 0 without holes.
type GIDTable []GIDEntry

// BuildGIDTable returns the GID table rdma_rxe shows for an interface with MAC mac
// and the IP addresses addrs, in the order the kernel lists them (netlink dump order).
// rdma_rxe lists RoCE v2 entries only, in the order ib_core's roce_gid_mgmt.c
// add_netdev_ips fills them for an interface that has its addresses when the device
// is created: the default GID (LinkLocalGID(mac)) at index 0, then every IPv4
// address (IPv4-mapped), then every IPv6 address, skipping any GID already present
// (an EUI-64 link-local address equals the default GID).
func BuildGIDTable(mac [6]byte, addrs []netip.Addr) GIDTable {
	t := GIDTable{{Index: 0, GID: LinkLocalGID(mac), Version: RoCEv2}}
	add := func(a netip.Addr) {
		g := GIDFromAddr(a)
		if _, ok := t.Find(g); ok {
			return
		}
		t = append(t, GIDEntry{Index: len(t), GID: g, Version: RoCEv2})
	}
	for _, a := range addrs {
		if a.Is4() || a.Is4In6() {
			add(a.Unmap())
		}
	}
	for _, a := range addrs {
		if a.Is6() && !a.Is4In6() {
			add(a.WithZone(""))
		}
	}
	return t
}

// Find returns the index of g in the table.
func (t GIDTable) Find(g GID) (int, bool) {
	for _, e := range t {
		if e.GID == g {
			return e.Index, true
		}
	}
	return -1, false
}

// Entry returns the entry at index i, or an error naming the valid range.
func (t GIDTable) Entry(i int) (GIDEntry, error) {
	if i < 0 || i >= len(t) {
		return GIDEntry{}, fmt.Errorf("roce: GID index %d out of range: the table has %d entries (0..%d)", i, len(t), len(t)-1)
	}
	return t[i], nil
}

// String renders the table one entry per line: "index GID version".
func (t GIDTable) String() string {
	var b strings.Builder
	for _, e := range t {
		fmt.Fprintf(&b, "%d\t%s\t%s\n", e.Index, e.GID, e.Version)
	}
	return b.String()
}
