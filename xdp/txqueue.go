package xdp

import "encoding/binary"

// txQueue picks the queue whose socket transmits a frame: the frame's UDP source
// port modulo the queues. RoCEv2 gives each QP pair its own source port (Linux's
// rdma_get_udp_sport, roce.UDPSourcePort), so one QP's frames leave from one socket,
// in the order the engine built them, while different QPs spread over every queue
// as a multi-queue NIC's RSS spreads them on receive. A frame that is not IPv4 or
// IPv6 over UDP (the engine builds none) goes to queue 0.
//
// frame is a whole Ethernet frame without a VLAN tag; n is the number of queues (≥ 1).
func txQueue(frame []byte, n int) int {
	if n == 1 || len(frame) < 14 {
		return 0
	}
	var udp int
	switch binary.BigEndian.Uint16(frame[12:14]) {
	case 0x0800: // IPv4: the header's length is in its first byte (IHL, 32-bit words)
		if len(frame) < 24 || frame[23] != 17 {
			return 0
		}
		udp = 14 + int(frame[14]&0x0F)*4
	case 0x86DD: // IPv6 without extension headers
		if len(frame) < 21 || frame[20] != 17 {
			return 0
		}
		udp = 14 + 40
	default:
		return 0
	}
	if len(frame) < udp+2 {
		return 0
	}
	return int(binary.BigEndian.Uint16(frame[udp:])) % n
}
