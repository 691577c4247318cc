package icmp

import (
	"net/netip"
	"testing"
)

// v4 builds an ICMP message of type typ and code quoting a datagram of protocol
// proto to dst, port.
func v4(typ, code, proto byte, dst [4]byte, port uint16) []byte {
	m := []byte{typ, code, 0, 0, 0, 0, 0, 0}
	ip := make([]byte, 20)
	ip[0], ip[9] = 0x45, proto
	copy(ip[16:], dst[:])
	udp := []byte{0xc0, 0x00, byte(port >> 8), byte(port), 0, 8, 0, 0}
	return append(append(m, ip...), udp...)
}

// TestParse: port unreachable, network/host unreachable and time exceeded about a
// UDP datagram to port 4791 are reported with the quoted destination, in ICMP and
// ICMPv6; another type, code, protocol or port, or a short message, is not.
func TestParse(t *testing.T) {
	dst := [4]byte{10, 1, 2, 3}
	want4 := netip.MustParseAddr("10.1.2.3")
	for name, c := range map[string]struct {
		m    []byte
		kind Kind
	}{
		"port unreachable": {v4(3, 3, 17, dst, 4791), PortUnreachable},
		"net unreachable":  {v4(3, 0, 17, dst, 4791), Unreachable},
		"host unreachable": {v4(3, 1, 17, dst, 4791), Unreachable},
		"time exceeded":    {v4(11, 0, 17, dst, 4791), TimeExceeded},
	} {
		if r, ok := Parse(c.m, false); !ok || r.Kind != c.kind || r.Dst != want4 || r.Code != c.m[1] {
			t.Errorf("%s: %+v %v", name, r, ok)
		}
	}
	good := v4(3, 3, 17, dst, 4791)
	for name, m := range map[string][]byte{
		"echo reply":          v4(0, 0, 17, dst, 4791),
		"fragmentation need":  v4(3, 4, 17, dst, 4791),
		"reassembly exceeded": v4(11, 1, 17, dst, 4791),
		"TCP":                 v4(3, 3, 6, dst, 4791),
		"port 53":             v4(3, 3, 17, dst, 53),
		"short":               good[:30],
		"empty":               nil,
	} {
		if r, ok := Parse(m, false); ok {
			t.Errorf("%s: reported %+v", name, r)
		}
	}

	peer6 := netip.MustParseAddr("fd00::3")
	m6 := []byte{1, 4, 0, 0, 0, 0, 0, 0}
	ip6 := make([]byte, 40)
	ip6[0], ip6[6] = 0x60, 17
	d := peer6.As16()
	copy(ip6[24:], d[:])
	m6 = append(append(m6, ip6...), 0xc0, 0x00, 0x12, 0xb7, 0, 8, 0, 0) // dst port 4791
	for _, c := range []struct {
		typ, code byte
		kind      Kind
	}{{1, 4, PortUnreachable}, {1, 0, Unreachable}, {1, 3, Unreachable}, {3, 0, TimeExceeded}} {
		m6[0], m6[1] = c.typ, c.code
		if r, ok := Parse(m6, true); !ok || r.Kind != c.kind || r.Dst != peer6 {
			t.Errorf("ICMPv6 type %d code %d: %+v %v", c.typ, c.code, r, ok)
		}
	}
	m6[0], m6[1] = 2, 0 // packet too big
	if r, ok := Parse(m6, true); ok {
		t.Errorf("ICMPv6 packet too big reported: %+v", r)
	}
}

// FuzzParse: any bytes a raw ICMP socket may return are looked at without a
// panic, and only the types Parse names are ever reported.
func FuzzParse(f *testing.F) {
	f.Add(v4(3, 3, 17, [4]byte{10, 1, 2, 3}, 4791), false)
	f.Add(v4(11, 0, 17, [4]byte{10, 1, 2, 3}, 4791), false)
	f.Add([]byte{1, 4, 0, 0, 0, 0, 0, 0, 0x60}, true)
	f.Fuzz(func(t *testing.T, msg []byte, v6 bool) {
		r, ok := Parse(msg, v6)
		if !ok {
			return
		}
		typ := msg[0]
		if (!v6 && typ != 3 && typ != 11) || (v6 && typ != 1 && typ != 3) || !r.Dst.IsValid() {
			t.Errorf("% x reported as %+v", msg, r)
		}
	})
}
