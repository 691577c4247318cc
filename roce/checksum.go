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
// field is taken as zero. It adds the header as 32-bit words (the checksum field's
// half of the third one left out) and folds the sum: one's-complement addition
// does not depend on the word size (RFC 1071 §2(B)), and it runs on every frame
// sent, where the 16-bit loop cost 25 ns a frame.
func ipv4HeaderChecksum(h []byte) uint16 {
	_ = h[19]
	s := uint64(binary.BigEndian.Uint32(h[0:4])) + uint64(binary.BigEndian.Uint32(h[4:8])) +
		uint64(binary.BigEndian.Uint16(h[8:10]))<<16 +
		uint64(binary.BigEndian.Uint32(h[12:16])) + uint64(binary.BigEndian.Uint32(h[16:20]))
	s = s>>32 + s&0xFFFFFFFF
	return fold(uint32(s>>32 + s&0xFFFFFFFF))
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
