package main

import (
	"net/netip"
	"testing"
)

// TestPortUnreachable: the ICMP and ICMPv6 port-unreachable messages a host
// sends for a UDP datagram to port 4791 are recognised by the headers they quote;
// another type, code, protocol, port or destination, or a short message, is not.
func TestPortUnreachable(t *testing.T) {
	peer4 := netip.MustParseAddr("10.1.2.3")
	v4 := func(typ, code, proto byte, dst [4]byte, port uint16) []byte {
		m := []byte{typ, code, 0, 0, 0, 0, 0, 0}
		ip := make([]byte, 20)
		ip[0], ip[9] = 0x45, proto
		copy(ip[16:], dst[:])
		udp := []byte{0xc0, 0x00, byte(port >> 8), byte(port), 0, 8, 0, 0}
		return append(append(m, ip...), udp...)
	}
	good := v4(3, 3, 17, [4]byte{10, 1, 2, 3}, 4791)
	if !portUnreachable(good, peer4) {
		t.Error("IPv4 port unreachable for 4791 not recognised")
	}
	for name, m := range map[string][]byte{
		"echo reply":       v4(0, 0, 17, [4]byte{10, 1, 2, 3}, 4791),
		"host unreachable": v4(3, 1, 17, [4]byte{10, 1, 2, 3}, 4791),
		"TCP":              v4(3, 3, 6, [4]byte{10, 1, 2, 3}, 4791),
		"port 53":          v4(3, 3, 17, [4]byte{10, 1, 2, 3}, 53),
		"other host":       v4(3, 3, 17, [4]byte{10, 1, 2, 4}, 4791),
		"short":            good[:30],
		"empty":            nil,
	} {
		if portUnreachable(m, peer4) {
			t.Errorf("%s: recognised as port unreachable", name)
		}
	}

	peer6 := netip.MustParseAddr("fd00::3")
	m6 := []byte{1, 4, 0, 0, 0, 0, 0, 0}
	ip6 := make([]byte, 40)
	ip6[0], ip6[6] = 0x60, 17
	d := peer6.As16()
	copy(ip6[24:], d[:])
	m6 = append(append(m6, ip6...), 0xc0, 0x00, 0x12, 0xb7, 0, 8, 0, 0) // dst port 4791
	if !portUnreachable(m6, peer6) {
		t.Error("ICMPv6 port unreachable for 4791 not recognised")
	}
	m6[1] = 3 // address unreachable
	if portUnreachable(m6, peer6) {
		t.Error("ICMPv6 address unreachable recognised as port unreachable")
	}
}

// FuzzPortUnreachable: any bytes a raw ICMP socket may return are looked at
// without a panic, and only a type 3 code 3 (IPv4) or type 1 code 4 (IPv6)
// message is ever taken for port unreachable.
func FuzzPortUnreachable(f *testing.F) {
	f.Add([]byte{3, 3, 0, 0, 0, 0, 0, 0, 0x45, 0, 0, 0, 0, 0, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0, 10, 1, 2, 3, 0, 0, 0x12, 0xb7}, false)
	f.Add([]byte{1, 4, 0, 0, 0, 0, 0, 0, 0x60}, true)
	f.Fuzz(func(t *testing.T, msg []byte, v6 bool) {
		peer := netip.MustParseAddr("10.1.2.3")
		typ, code := byte(3), byte(3)
		if v6 {
			peer, typ, code = netip.MustParseAddr("fd00::3"), 1, 4
		}
		if portUnreachable(msg, peer) && (msg[0] != typ || msg[1] != code) {
			t.Errorf("% x taken for port unreachable", msg)
		}
	})
}
