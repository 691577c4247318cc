package roce

import "fmt"

// MTU is the InfiniBand path MTU enum as verbs encode it (enum ibv_mtu; IBTA Vol 1
// §7.7.2 "PMTU"): 1 = 256 … 5 = 4096 bytes of payload per packet.
type MTU uint8

// IB path MTUs.
const (
	MTU256  MTU = 1
	MTU512  MTU = 2
	MTU1024 MTU = 3
	MTU2048 MTU = 4
	MTU4096 MTU = 5
)

// RoCEOverhead is what rdma_rxe subtracts from the netdev MTU before choosing a path
// MTU: RXE_MAX_HDR_LENGTH, 80 bytes (drivers/infiniband/sw/rxe/rxe_param.h,
// eth_mtu_int_to_enum).
const RoCEOverhead = 80

// Bytes returns the MTU in bytes, or 0 for an invalid value.
func (m MTU) Bytes() int {
	if m < MTU256 || m > MTU4096 {
		return 0
	}
	return 128 << m
}

// Valid reports whether m is one of MTU256…MTU4096.
func (m MTU) Valid() bool { return m >= MTU256 && m <= MTU4096 }

func (m MTU) String() string {
	if !m.Valid() {
		return fmt.Sprintf("MTU(%d)", uint8(m))
	}
	return fmt.Sprintf("%d", m.Bytes())
}

// MTUFromBytes returns the enum for exactly 256, 512, 1024, 2048 or 4096 bytes.
func MTUFromBytes(n int) (MTU, error) {
	for m := MTU256; m <= MTU4096; m++ {
		if m.Bytes() == n {
			return m, nil
		}
	}
	return 0, fmt.Errorf("roce: %d is not an IB MTU (256, 512, 1024, 2048 or 4096)", n)
}

// MTUFromNetdev returns the path MTU rdma_rxe uses on a netdev of the given MTU in
// bytes: the largest IB MTU ≤ netdevMTU − 80 (rxe_param.h eth_mtu_int_to_enum).
// 1500 gives MTU1024, 9000 gives MTU4096. It returns 0 when netdevMTU − 80 < 256.
func MTUFromNetdev(netdevMTU int) MTU {
	n := netdevMTU - RoCEOverhead
	for m := MTU4096; m >= MTU256; m-- {
		if n >= m.Bytes() {
			return m
		}
	}
	return 0
}

// NetdevMTU returns the smallest netdev MTU in bytes on which rdma_rxe's rule
// (MTUFromNetdev) allows path MTU m: m's bytes + RoCEOverhead (4176 for MTU4096).
func NetdevMTU(m MTU) int { return m.Bytes() + RoCEOverhead }

// MinMTU returns the smaller of two path MTUs: what two peers must use.
func MinMTU(a, b MTU) MTU {
	if a < b {
		return a
	}
	return b
}

// maxExtHeaders is the most transport header bytes after the BTH that a packet
// carrying a full path MTU of payload has: XRCETH (4), RETH (16) and ImmDt (4) in
// an XRC RDMA WRITE ONLY with Immediate (IBTA Vol 1 §9.2 and §9.3; RC and UC have
// at most 20: RETH and ImmDt).
const maxExtHeaders = 4 + 16 + 4

// LargestIPPacket returns the longest IP packet, in bytes, that a QP of path MTU m
// sends over RoCEv2: the IPv4 (20) or IPv6 (40) header, UDP (8), BTH (12), the
// largest extended headers (maxExtHeaders), m's bytes of payload and the ICRC (4).
// A netdev carries the QP's frames when its MTU is at least that: 1092 for IPv4 at
// MTU1024, where rdma_rxe's active MTU rule (MTUFromNetdev) asks 1104.
func LargestIPPacket(m MTU, v6 bool) int {
	ip := 20
	if v6 {
		ip = 40
	}
	return ip + 8 + 12 + maxExtHeaders + m.Bytes() + 4
}

// NetdevMTUFor returns the netdev MTU in bytes to suggest for path MTU m: the
// larger of what its packets need (LargestIPPacket) and what rdma_rxe's active MTU
// rule asks (NetdevMTU), so that a fix named in a message both carries the packets
// and lets the port report m as its active_mtu (perftest refuses a -m above it):
// 1104 for IPv4 at MTU1024, 1112 for IPv6; 4176 and 4184 at MTU4096.
func NetdevMTUFor(m MTU, v6 bool) int { return max(LargestIPPacket(m, v6), NetdevMTU(m)) }

// LargestFitting returns the largest path MTU whose packets (LargestIPPacket) a
// netdev of MTU netdevMTU carries, or 0 if none does.
func LargestFitting(netdevMTU int, v6 bool) MTU {
	for m := MTU4096; m >= MTU256; m-- {
		if LargestIPPacket(m, v6) <= netdevMTU {
			return m
		}
	}
	return 0
}
