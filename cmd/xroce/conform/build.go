package conform

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/xroce/xroce/roce"
)

// Conn is the addressing of one connection to a peer's QP: both sides' Ethernet
// and IPv4 addresses, this side's QPN, what the peer advertised, and the PSN its
// responder expects first (the PSN this side advertised).
type Conn struct {
	LocalMAC, PeerMAC [6]byte
	LocalIP, PeerIP   netip.Addr // IPv4
	LocalQPN          uint32
	Peer              Peer
	EPSN              uint32   // the responder's first expected PSN
	MTU               roce.MTU // the connection's path MTU
	ipID              uint16
}

// PSN returns the PSN at offset off from the first expected one (24-bit wrap).
func (c *Conn) PSN(off int) uint32 { return roce.PSNAdd(c.EPSN, off) }

// Offset returns psn's offset from the first expected PSN, in [-2^23, 2^23).
func (c *Conn) Offset(psn uint32) int { return int(roce.PSNDiff(psn, c.EPSN)) }

// defaultAckReq is the AckReq a requester sets: on the last packet of a message
// (IBTA Vol 1 §9.2.3; rdma_rxe sets it there and on READ requests and atomics);
// never on a CNP or a response (an opcode with an AETH: rxe_resp.c
// prepare_ack_packet builds them with AckReq 0).
func defaultAckReq(op roce.Opcode) bool {
	if op == roce.CNP || op.Info().Headers&roce.HdrAETH != 0 {
		return false
	}
	pos := op.Info().Position
	return pos == roce.PosLast || pos == roce.PosOnly
}

// Build encodes frame f for this connection: Ethernet, IPv4 (DF, TTL 64, UDP
// checksum 0 as rdma_rxe sends), UDP to 4791 from the source port Linux derives
// from the two QPNs (roce.UDPSourcePort), BTH with P_Key 0xFFFF to the peer's QPN,
// the extension headers the opcode names, payload, pad and ICRC (roce.Packet
// Encode); then the BTH overrides and corruption the scenario asks for, with the
// ICRC recomputed after a pad-count override (so only corrupt.icrc makes it bad).
func (c *Conn) Build(f *Frame) ([]byte, error) {
	op := f.Opcode.Opcode
	c.ipID++
	pk := roce.Packet{
		Eth:  roce.Ethernet{Dst: c.PeerMAC, Src: c.LocalMAC},
		IPv4: roce.IPv4{ID: c.ipID, FlagsFrag: 0x4000, TTL: 64, Src: c.LocalIP.As4(), Dst: c.PeerIP.As4()},
		UDP:  roce.UDP{SrcPort: roce.UDPSourcePort(0, c.LocalQPN, c.Peer.QPN)},
		BTH: roce.BTH{Opcode: op, PKey: 0xFFFF, DestQP: c.Peer.QPN, PSN: c.PSN(f.PSN),
			AckReq: defaultAckReq(op), BECN: op == roce.CNP},
		ImmDt:   roce.ImmDt(f.Imm),
		Payload: f.Payload.Bytes(),
	}
	if f.RETH != nil {
		pk.RETH = roce.RETH{VA: f.RETH.VA.Eval(c.Peer), RKey: uint32(f.RETH.RKey.Eval(c.Peer)), DMALen: f.RETH.Len}
	}
	if f.Atomic != nil {
		pk.AtomicETH = roce.AtomicETH{VA: f.Atomic.VA.Eval(c.Peer), RKey: uint32(f.Atomic.RKey.Eval(c.Peer)),
			SwapAdd: f.Atomic.SwapAdd.Eval(c.Peer), Compare: f.Atomic.Compare.Eval(c.Peer)}
	}
	if f.AETH != nil {
		pk.AETH = roce.AETH{Syndrome: roce.Syndrome(f.AETH.Syndrome), MSN: f.AETH.MSN}
	}
	pk.AtomicAckETH.OrigRemData = f.orig
	if f.payload != nil {
		pk.Payload = f.payload
	}
	if f.AckReq != nil {
		pk.BTH.AckReq = *f.AckReq
	}
	c.editBTH(&pk.BTH, &f.BTH)
	for _, a := range []struct {
		s   string
		dst *[4]byte
	}{{f.Corrupt.DestGID, &pk.IPv4.Dst}, {f.Corrupt.SrcGID, &pk.IPv4.Src}} {
		if a.s != "" {
			ip, err := netip.ParseAddr(a.s)
			if err != nil || !ip.Is4() {
				return nil, fmt.Errorf("corrupt: %q is not an IPv4 address", a.s)
			}
			*a.dst = ip.As4()
		}
	}
	buf := make([]byte, pk.Len())
	n, err := pk.Encode(buf)
	if err != nil {
		return nil, fmt.Errorf("encoding %v: %w", op, err)
	}
	frame := buf[:n]
	if f.BTH.PadCnt != nil {
		b := &frame[pk.BTHOff+1]
		*b = *b&^0x30 | (*f.BTH.PadCnt&3)<<4
		if err := roce.FinishFrame(frame); err != nil {
			return nil, fmt.Errorf("bth.pad_count %d on a %d-byte payload: %w", *f.BTH.PadCnt, len(pk.Payload), err)
		}
	}
	if f.Corrupt.ICRC {
		i := len(frame) - roce.ICRCLen
		binary.LittleEndian.PutUint32(frame[i:], ^binary.LittleEndian.Uint32(frame[i:]))
	}
	return frame, nil
}

func (c *Conn) editBTH(b *roce.BTH, e *BTHEdit) {
	setBool := func(dst *bool, v *bool) {
		if v != nil {
			*dst = *v
		}
	}
	setU8 := func(dst *uint8, v *uint8) {
		if v != nil {
			*dst = *v
		}
	}
	setBool(&b.SE, e.SE)
	setBool(&b.MigReq, e.MigReq)
	setBool(&b.FECN, e.FECN)
	setBool(&b.BECN, e.BECN)
	setU8(&b.TVer, e.TVer)
	setU8(&b.Resv6, e.Resv6)
	setU8(&b.Resv7, e.Resv7)
	if e.PKey != nil {
		b.PKey = *e.PKey
	}
	if e.DestQP != nil {
		b.DestQP = uint32(e.DestQP.Eval(c.Peer)) & 0xFFFFFF
	}
}
