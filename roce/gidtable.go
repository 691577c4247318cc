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

// Empty reports whether e is an empty slot: the zero GID, as a slot whose address
// was removed reads through verbs (ib_cache.c del_gid; libibverbs's
// ibv_query_gid gives the zero GID for it).
func (e GIDEntry) Empty() bool { return e.GID == GID{} }

// GIDTable is a port's GID table: entry i has Index i. A table built for an
// interface (BuildGIDTable) has no empty slots; one that followed address changes
// (Follow) may have some, at its end too (so that Entry calls the slot of a removed
// address empty, not out of range).
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

// Find returns the index of g in the table; empty slots match nothing.
func (t GIDTable) Find(g GID) (int, bool) {
	for _, e := range t {
		if e.GID == g && !e.Empty() {
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
	if t[i].Empty() {
		return GIDEntry{}, fmt.Errorf("roce: GID index %d is empty: its address was removed from the interface", i)
	}
	return t[i], nil
}

// Follow returns the table after the interface's addresses became addrs (in the
// kernel's order), as ib_core's roce_gid_mgmt.c keeps rdma_rxe's table through
// address notifiers: the entries of addresses still present keep their indexes,
// those of addresses gone become empty slots (ib_cache.c del_gid), and each new
// address takes the first empty slot, or the next index (ib_cache.c
// find_gid's empty slot). The default GID (index 0) stays. added and removed are
// the entries that came and went; t itself is not changed.
func (t GIDTable) Follow(mac [6]byte, addrs []netip.Addr) (next GIDTable, added, removed []GIDEntry) {
	want := BuildGIDTable(mac, addrs)
	next = append(GIDTable(nil), t...)
	for i, e := range next {
		if _, ok := want.Find(e.GID); !ok && !e.Empty() {
			removed = append(removed, e)
			next[i] = GIDEntry{Index: i}
		}
	}
	for _, e := range want {
		if _, ok := next.Find(e.GID); ok {
			continue
		}
		i := 0
		for i < len(next) && !next[i].Empty() {
			i++
		}
		e.Index = i
		if i == len(next) {
			next = append(next, e)
		} else {
			next[i] = e
		}
		added = append(added, e)
	}
	return next, added, removed
}

// String renders the table one entry per line: "index GID version", or "index
// empty" for an empty slot.
func (t GIDTable) String() string {
	var b strings.Builder
	for _, e := range t {
		if e.Empty() {
			fmt.Fprintf(&b, "%d\tempty\n", e.Index)
			continue
		}
		fmt.Fprintf(&b, "%d\t%s\t%s\n", e.Index, e.GID, e.Version)
	}
	return b.String()
}
