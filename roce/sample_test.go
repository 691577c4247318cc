package roce_test

import (
	"net/netip"

	"github.com/xroce/xroce/roce"
)

// samplePackets returns one packet of each kind tests need, over IPv4 or IPv6, with
// distinctive field values.
func samplePackets(v6 bool) map[string]roce.Packet {
	base := func(op roce.Opcode, payload int) roce.Packet {
		p := roce.Packet{IsIPv6: v6}
		p.Eth.Dst = [6]byte{0x52, 0x54, 0x00, 0x77, 0x00, 0x0b}
		p.Eth.Src = [6]byte{0x52, 0x54, 0x00, 0x77, 0x00, 0x0c}
		if v6 {
			p.IPv6 = roce.IPv6{TrafficClass: 0x6a, FlowLabel: 0x12345, HopLimit: 64,
				Src: netip.MustParseAddr("fd00:77::c").As16(), Dst: netip.MustParseAddr("fd00:77::b").As16()}
		} else {
			p.IPv4 = roce.IPv4{TOS: 0x6a, ID: 0x1e52, FlagsFrag: 0x4000, TTL: 64,
				Src: [4]byte{10, 77, 0, 12}, Dst: [4]byte{10, 77, 0, 11}}
		}
		p.UDP = roce.UDP{SrcPort: 0xc121, DstPort: roce.UDPPort}
		p.BTH = roce.BTH{Opcode: op, PKey: 0xFFFF, DestQP: 0x000011, PSN: 0x18ab7f, AckReq: true}
		p.Payload = make([]byte, payload)
		for i := range p.Payload {
			p.Payload[i] = byte(i*7 + 3)
		}
		return p
	}
	reth := roce.RETH{VA: 0x0000555b7579f000, RKey: 0x000002a9, DMALen: 2500}
	m := map[string]roce.Packet{}
	p := base(roce.RC_SEND_ONLY, 64)
	m["SEND_ONLY"] = p
	p = base(roce.RC_SEND_FIRST, 1024)
	m["SEND_FIRST"] = p
	p = base(roce.RC_SEND_LAST_WITH_IMMEDIATE, 13)
	p.ImmDt = 0xdeadbeef
	m["SEND_LAST_WITH_IMMEDIATE"] = p
	p = base(roce.RC_RDMA_WRITE_FIRST, 1024)
	p.RETH = reth
	m["RDMA_WRITE_FIRST"] = p
	m["RDMA_WRITE_MIDDLE"] = base(roce.RC_RDMA_WRITE_MIDDLE, 1024)
	m["RDMA_WRITE_LAST"] = base(roce.RC_RDMA_WRITE_LAST, 450)
	p = base(roce.RC_RDMA_WRITE_ONLY, 61)
	p.RETH = roce.RETH{VA: 0x7f0000001000, RKey: 0x1234, DMALen: 61}
	m["RDMA_WRITE_ONLY"] = p
	p = base(roce.RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, 8)
	p.RETH = roce.RETH{VA: 0x7f0000002000, RKey: 0x4321, DMALen: 8}
	p.ImmDt = 0x01020304
	m["RDMA_WRITE_ONLY_WITH_IMMEDIATE"] = p
	p = base(roce.RC_RDMA_READ_REQUEST, 0)
	p.RETH = reth
	m["RDMA_READ_REQUEST"] = p
	for _, op := range []roce.Opcode{roce.RC_RDMA_READ_RESPONSE_FIRST, roce.RC_RDMA_READ_RESPONSE_LAST, roce.RC_RDMA_READ_RESPONSE_ONLY} {
		p = base(op, 1022)
		p.BTH.AckReq = false
		p.AETH = roce.AETH{Syndrome: roce.SyndromeACK, MSN: 0x000102}
		m[op.Info().Name] = p
	}
	m["RDMA_READ_RESPONSE_MIDDLE"] = base(roce.RC_RDMA_READ_RESPONSE_MIDDLE, 1024)
	p = base(roce.RC_ACKNOWLEDGE, 0)
	p.AETH = roce.AETH{Syndrome: roce.SyndromeACK, MSN: 5}
	m["ACKNOWLEDGE"] = p
	p = base(roce.RC_ACKNOWLEDGE, 0)
	p.AETH = roce.AETH{Syndrome: roce.SyndromeNAKPSNSequenceError, MSN: 7}
	m["NAK"] = p
	p = base(roce.RC_ACKNOWLEDGE, 0)
	p.AETH = roce.AETH{Syndrome: roce.RNRNAKSyndrome(12), MSN: 9}
	m["RNR_NAK"] = p
	p = base(roce.RC_COMPARE_SWAP, 0)
	p.AtomicETH = roce.AtomicETH{VA: 0x7f0000003008, RKey: 0xabcd, SwapAdd: 0x1111222233334444, Compare: 0x5555666677778888}
	m["COMPARE_SWAP"] = p
	p = base(roce.RC_FETCH_ADD, 0)
	p.AtomicETH = roce.AtomicETH{VA: 0x7f0000003010, RKey: 0xabce, SwapAdd: 1}
	m["FETCH_ADD"] = p
	p = base(roce.RC_ATOMIC_ACKNOWLEDGE, 0)
	p.AETH = roce.AETH{Syndrome: roce.SyndromeACK, MSN: 3}
	p.AtomicAckETH = roce.AtomicAckETH{OrigRemData: 0x0102030405060708}
	m["ATOMIC_ACKNOWLEDGE"] = p
	p = base(roce.RC_SEND_ONLY_WITH_INVALIDATE, 5)
	p.IETH = roce.IETH{RKey: 0x55aa}
	m["SEND_ONLY_WITH_INVALIDATE"] = p
	p = base(roce.UD_SEND_ONLY_WITH_IMMEDIATE, 30)
	p.DETH = roce.DETH{QKey: 0x80010000, SrcQP: 0x000001}
	p.ImmDt = 0x99
	m["UD_SEND_ONLY_WITH_IMMEDIATE"] = p
	p = base(roce.RC_FLUSH, 0)
	p.FETH = roce.FETH{Bits: 0x13}
	p.RETH = roce.RETH{VA: 0x7f0000004000, RKey: 0x99, DMALen: 4096}
	m["FLUSH"] = p
	p = base(roce.RC_ATOMIC_WRITE, 8)
	p.RETH = roce.RETH{VA: 0x7f0000005000, RKey: 0x98, DMALen: 8}
	m["ATOMIC_WRITE"] = p
	p = base(roce.CNP, 0)
	p.BTH.BECN = true
	p.BTH.AckReq = false
	m["CNP"] = p
	return m
}
