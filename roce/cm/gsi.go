package cm

import "github.com/xroce/xroce/roce"

// The General Services Interface on RoCEv2: CM MADs travel as UD SEND_ONLY between
// the QP1s of two ports, with the well-known Q_Key (IBTA Vol 1 ch. 13, the General
// Services Interface; Annex A17).
const (
	GSIQPN  = 1          // QP1
	GSIQKey = 0x80010000 // IB_QP1_QKEY: bit 31 set, a controlled Q_Key
)

// RxeGSISourcePort is the UDP source port of rdma_rxe's QP1 datagrams (every CM
// frame of testdata/rxe/ib_write_bw_rdmacm.pcap, both directions): rxe gives a
// QP 0xC000 + hash_32(qpn, 14) at creation (rxe_qp.c), 0xC000 + 0x1872 for QP1. Any
// source port is valid; this one makes our frames look like rxe's.
const RxeGSISourcePort = 0xD872

// MADFromPacket returns the MAD that a decoded RoCEv2 packet carries to the GSI: its
// payload, when the packet is a UD SEND_ONLY to QP1 with DETH Q_Key GSIQKey and
// exactly MADLen bytes of payload. The slice aliases the packet's payload.
func MADFromPacket(p *roce.Packet) ([]byte, error) {
	const m = "GSI datagram"
	switch {
	case p.BTH.Opcode != roce.UD_SEND_ONLY:
		return nil, fieldError(m, "BTH OpCode", "%v, want %v", p.BTH.Opcode, roce.UD_SEND_ONLY)
	case p.BTH.DestQP != GSIQPN:
		return nil, fieldError(m, "BTH DestQP", "0x%06x, want QP1", p.BTH.DestQP)
	case p.DETH.QKey != GSIQKey:
		return nil, fieldError(m, "DETH Q_Key", "0x%08x, want 0x%08x", p.DETH.QKey, uint32(GSIQKey))
	case len(p.Payload) != MADLen:
		return nil, fieldError(m, "payload length", "%d bytes, want a %d-byte MAD", len(p.Payload), MADLen)
	}
	return p.Payload, nil
}

// SetGSIDatagram makes p's transport headers those of a MAD sent from QP1 to QP1, as
// rdma_rxe sends them: BTH UD SEND_ONLY with the P_Key, DestQP 1, AckReq set and the
// PSN (the sender's QP1 sequence, from 0), DETH Q_Key GSIQKey and source QP 1; the
// payload is mad. The Ethernet, IP and UDP fields stay the caller's (UDP source port:
// RxeGSISourcePort, say); p.Encode then writes the frame.
func SetGSIDatagram(p *roce.Packet, mad []byte, pkey uint16, psn uint32) {
	p.BTH = roce.BTH{Opcode: roce.UD_SEND_ONLY, PKey: pkey, DestQP: GSIQPN, AckReq: true, PSN: psn & roce.PSNMask}
	p.DETH = roce.DETH{QKey: GSIQKey, SrcQP: GSIQPN}
	p.Payload = mad
}
