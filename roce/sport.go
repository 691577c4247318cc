package roce

// RoCEv2 UDP source port selection for RC QPs, as Linux computes it
// (include/rdma/ib_verbs.h rdma_calc_flow_label, rdma_flow_label_to_udp_sport and
// rdma_get_udp_sport; used by rdma_rxe in rxe_qp.c when the QP moves to RTR). The port
// gives ECMP entropy per QP pair; receivers must accept any source port.

// UDPSportMin is IB_ROCE_UDP_ENCAP_VALID_PORT_MIN: source ports are in 0xC000–0xFFFF.
const UDPSportMin = 0xC000

// FlowLabel returns the 20-bit flow label Linux derives from a local and a remote
// QPN when the address handle has none: the 64-bit product folded by xor-shifts of 20
// and 40 bits.
func FlowLabel(lqpn, rqpn uint32) uint32 {
	v := uint64(lqpn) * uint64(rqpn)
	v ^= v >> 20
	v ^= v >> 40
	return uint32(v & 0xFFFFF)
}

// FlowLabelToUDPSport folds a 20-bit flow label into a UDP source port: the low 14
// bits xor the high 6 bits, with the top two bits set.
func FlowLabelToUDPSport(fl uint32) uint16 {
	low := fl & 0x3FFF
	high := fl & 0xFC000
	low ^= high >> 14
	return uint16(low | UDPSportMin)
}

// UDPSourcePort returns the UDP source port of an RC QP: from the address handle's
// flow label fl when it is non-zero, else from FlowLabel(lqpn, rqpn).
func UDPSourcePort(fl, lqpn, rqpn uint32) uint16 {
	if fl == 0 {
		fl = FlowLabel(lqpn, rqpn)
	}
	return FlowLabelToUDPSport(fl)
}

// UDSourcePort returns the UDP source port rdma_rxe sends a UD QP's packets from: a
// fixed port per QP, 0xC000 plus the top 14 bits of the QPN times the 32-bit golden
// ratio (hash_32 in include/linux/hash.h; rxe_qp.c rxe_qp_init_req). A UD QP has no
// peer QPN to derive a flow label from, and the address handle of each work request
// does not change it. QP1 sends from 55410 (0xD872), as in the rdma_cm captures.
func UDSourcePort(qpn uint32) uint16 {
	const goldenRatio32 = 0x61C88647
	return uint16(UDPSportMin + (qpn*goldenRatio32)>>(32-14))
}
