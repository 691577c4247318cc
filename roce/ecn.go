package roce

// ECN is the IP header's Explicit Congestion Notification field (RFC 3168 §5): the
// two low bits of the IPv4 TOS byte or the IPv6 traffic class. RoCEv2 congestion
// control marks congestion there, not in the BTH's FECN bit (IBTA Vol 1 Annex
// A17.9.1): a switch sets CE on an ECN-capable packet, and the receiver answers with
// a CNP (Annex A17.9.2-3).
type ECN uint8

// ECN codepoints (RFC 3168 §5).
const (
	NotECT ECN = 0 // not ECN-capable: rdma_rxe sends this unless the traffic class says otherwise
	ECT1   ECN = 1 // ECN-capable transport (1)
	ECT0   ECN = 2 // ECN-capable transport (0): what a DCQCN sender marks its packets
	CE     ECN = 3 // congestion experienced: set by a switch
)

// String returns RFC 3168's name: "Not-ECT", "ECT(1)", "ECT(0)" or "CE".
func (e ECN) String() string {
	return [...]string{"Not-ECT", "ECT(1)", "ECT(0)", "CE"}[e&3]
}

// ECN returns the ECN field of the packet's IP header.
func (p *Packet) ECN() ECN {
	if p.IsIPv6 {
		return ECN(p.IPv6.TrafficClass & 3)
	}
	return ECN(p.IPv4.TOS & 3)
}
