package roce

import "encoding/binary"

// Internet checksum (RFC 1071) helpers for the IPv4 header checksum (RFC 791) and
// the UDP checksum over the IPv6 pseudo-header (RFC 8200 §8.1).

func sum16(b []byte, s uint32) uint32 {
	for len(b) >= 2 {
		s += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		s += uint32(b[0]) << 8
	}
	return s
}

func fold(s uint32) uint16 {
	for s > 0xFFFF {
		s = s>>16 + s&0xFFFF
	}
	return ^uint16(s)
}

// ipv4HeaderChecksum returns the checksum of a 20-byte IPv4 header whose checksum
// field is taken as zero.
func ipv4HeaderChecksum(h []byte) uint16 {
	s := sum16(h[0:10], 0)
	s = sum16(h[12:20], s)
	return fold(s)
}

// udpChecksum returns the UDP checksum of the datagram udp (header and data, with the
// checksum field taken as zero) carried in the IP header ip. Per RFC 768 a computed 0
// is sent as 0xFFFF.
func udpChecksum(ip []byte, v6 bool, udp []byte) uint16 {
	var s uint32
	if v6 {
		s = sum16(ip[8:40], 0)
	} else {
		s = sum16(ip[12:20], 0)
	}
	s += 17 + uint32(len(udp))
	s = sum16(udp[0:6], s)
	s = sum16(udp[8:], s)
	c := fold(s)
	if c == 0 {
		c = 0xFFFF
	}
	return c
}
