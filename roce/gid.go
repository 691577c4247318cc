package roce

import (
	"fmt"
	"net"
	"net/netip"
)

// GID is a 16-byte InfiniBand Global Identifier (IBTA Vol 1 §4.1.1). For RoCEv2 it
// is the endpoint's IP address: an IPv6 address, or an IPv4 address in IPv4-mapped
// form ::ffff:a.b.c.d (Annex A17.4.5.1; rdma_ip2gid in include/rdma/ib_addr.h).
type GID [16]byte

// GIDFromAddr returns the GID of an IP address: IPv4 addresses become IPv4-mapped.
func GIDFromAddr(a netip.Addr) GID {
	return GID(a.As16())
}

// LinkLocalGID returns the IPv6 link-local GID fe80::/64 with the modified EUI-64
// interface identifier of a MAC address (RFC 4291 Appendix A): the MAC's first byte
// with the universal/local bit flipped, then ff:fe in the middle. This is rdma_rxe's
// default GID at index 0 (addrconf_addr_eui48 via rxe_node_guid / the ib_core default
// GID), e.g. 52:54:00:77:00:0b → fe80::5054:ff:fe77:b.
func LinkLocalGID(mac [6]byte) GID {
	return GID{0: 0xfe, 1: 0x80,
		8: mac[0] ^ 0x02, 9: mac[1], 10: mac[2], 11: 0xff, 12: 0xfe,
		13: mac[3], 14: mac[4], 15: mac[5]}
}

// Addr returns the GID as an IP address: IPv4-mapped GIDs become 4-byte IPv4
// addresses, all others IPv6.
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g).Unmap() }

// IsIPv4Mapped reports whether g is ::ffff:a.b.c.d.
func (g GID) IsIPv4Mapped() bool { return netip.AddrFrom16(g).Is4In6() }

// IsZero reports whether g is all zeros (an empty GID table slot).
func (g GID) IsZero() bool { return g == GID{} }

// String returns the GID in IPv6 text form (RFC 5952), IPv4-mapped GIDs as
// "::ffff:a.b.c.d", matching what ibv_devinfo -v and rdma_rxe's sysfs show.
func (g GID) String() string { return netip.AddrFrom16(g).String() }

// Hex returns the GID as eight colon-separated groups of four hex digits, the form of
// /sys/class/infiniband/*/ports/*/gids/* and show_gids.
func (g GID) Hex() string {
	return fmt.Sprintf("%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x:%02x%02x",
		g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15])
}

// ParseGID parses a GID written as an IPv6 address (any RFC 4291 text form, including
// the eight-group form of Hex), or as an IPv4 address, which becomes IPv4-mapped.
func ParseGID(s string) (GID, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return GID{}, fmt.Errorf("roce: bad GID %q: want an IPv6 or IPv4 address", s)
	}
	return GIDFromAddr(a), nil
}

// MACFromHardwareAddr converts a 6-byte net.HardwareAddr.
func MACFromHardwareAddr(hw net.HardwareAddr) ([6]byte, error) {
	var m [6]byte
	if len(hw) != 6 {
		return m, fmt.Errorf("roce: hardware address %v is not a 6-byte Ethernet MAC", hw)
	}
	copy(m[:], hw)
	return m, nil
}

// RoCEVersion is a GID's type: RoCE v1 (Ethertype 0x8915, GRH) or RoCE v2 (UDP/IP).
type RoCEVersion uint8

// GID types, as sysfs gid_attrs/types names them ("IB/RoCE v1", "RoCE v2").
const (
	RoCEv1 RoCEVersion = 1
	RoCEv2 RoCEVersion = 2
)

// String returns "v1" or "v2", as show_gids prints the VER column.
func (v RoCEVersion) String() string {
	switch v {
	case RoCEv1:
		return "v1"
	case RoCEv2:
		return "v2"
	}
	return fmt.Sprintf("RoCEVersion(%d)", uint8(v))
}
