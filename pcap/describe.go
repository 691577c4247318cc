package pcap

import (
	"fmt"
	"strings"

	"github.com/xroce/xroce/roce"
)

// Describe renders a decoded packet's transport headers on one line, the way
// `xroce dump` prints them: the opcode's name (roce.Opcode.String), the destination
// QPN in hex, the PSN in decimal (as Wireshark shows it), the BTH flags that are set
// (AckReq, SE, MigReq, FECN, BECN), the P_Key when it is not the default partition's
// 0xFFFF and the pad count when it is not 0, then each extension header the opcode
// carries (IBTA Vol 1 §9.3) and the payload length in bytes for opcodes that carry
// one:
//
//	RC_RDMA_WRITE_ONLY QPN 0x000011 PSN 1616767 AckReq RETH va 0x0000564da7911000 rkey 0x0000028e len 64 payload 64
//	RC_ACKNOWLEDGE QPN 0x000011 PSN 1616767 AETH 0x1f ACK credits=31 MSN 1
func Describe(p *roce.Packet) string {
	var b strings.Builder
	op := p.BTH.Opcode
	fmt.Fprintf(&b, "%s QPN 0x%06x PSN %d", op, p.BTH.DestQP, p.BTH.PSN)
	for _, f := range []struct {
		on   bool
		name string
	}{{p.BTH.AckReq, "AckReq"}, {p.BTH.SE, "SE"}, {p.BTH.MigReq, "MigReq"}, {p.BTH.FECN, "FECN"}, {p.BTH.BECN, "BECN"}} {
		if f.on {
			b.WriteString(" " + f.name)
		}
	}
	if p.BTH.PKey != 0xFFFF {
		fmt.Fprintf(&b, " P_Key 0x%04x", p.BTH.PKey)
	}
	if p.BTH.PadCnt != 0 {
		fmt.Fprintf(&b, " pad %d", p.BTH.PadCnt)
	}
	h := p.Headers
	if h&roce.HdrDETH != 0 {
		fmt.Fprintf(&b, " DETH qkey 0x%08x srcqp 0x%06x", p.DETH.QKey, p.DETH.SrcQP)
	}
	if h&roce.HdrFETH != 0 {
		fmt.Fprintf(&b, " FETH selectivity %d placement %d", p.FETH.Selectivity(), p.FETH.PlacementType())
	}
	if h&roce.HdrRETH != 0 {
		fmt.Fprintf(&b, " RETH va 0x%016x rkey 0x%08x len %d", p.RETH.VA, p.RETH.RKey, p.RETH.DMALen)
	}
	if h&roce.HdrAtomicETH != 0 {
		a := &p.AtomicETH
		if op == roce.RC_COMPARE_SWAP {
			fmt.Fprintf(&b, " AtomicETH va 0x%016x rkey 0x%08x swap 0x%x compare 0x%x", a.VA, a.RKey, a.SwapAdd, a.Compare)
		} else {
			fmt.Fprintf(&b, " AtomicETH va 0x%016x rkey 0x%08x add 0x%x", a.VA, a.RKey, a.SwapAdd)
		}
	}
	if h&roce.HdrAETH != 0 {
		fmt.Fprintf(&b, " AETH 0x%02x %s MSN %d", uint8(p.AETH.Syndrome), p.AETH.Syndrome, p.AETH.MSN)
	}
	if h&roce.HdrAtomicAckETH != 0 {
		fmt.Fprintf(&b, " orig 0x%x", p.AtomicAckETH.OrigRemData)
	}
	if h&roce.HdrImmDt != 0 {
		fmt.Fprintf(&b, " imm 0x%08x", uint32(p.ImmDt))
	}
	if h&roce.HdrIETH != 0 {
		fmt.Fprintf(&b, " IETH rkey 0x%08x", p.IETH.RKey)
	}
	if op.Info().Payload {
		fmt.Fprintf(&b, " payload %d", len(p.Payload))
	}
	return b.String()
}
