package roce

import "encoding/binary"

// BTH is the Base Transport Header, 12 bytes, present in every RoCEv2 packet
// (IBTA Vol 1 §9.2, Figure 37):
//
//	byte 0     OpCode
//	byte 1     SE(1) MigReq(1) PadCnt(2) TVer(4)
//	bytes 2-3  P_Key
//	byte 4     FECN(1) BECN(1) reserved(6)   (RoCEv2 marks congestion in the IP ECN bits;
//	           BECN is set in a CNP, Annex A17.9)
//	bytes 5-7  DestQP (24 bits)
//	byte 8     AckReq(1) reserved(7)
//	bytes 9-11 PSN (24 bits)
//
// All multi-byte fields are big-endian. Reserved bits are kept so that a decoded
// header re-encodes to the same bytes; senders should leave them zero.
type BTH struct {
	Opcode Opcode
	SE     bool   // solicited event
	MigReq bool   // migration request (APM); receivers accept 0 or 1
	PadCnt uint8  // 0-3 pad bytes between payload and ICRC
	TVer   uint8  // transport header version; 0 is the only one defined
	PKey   uint16 // partition key; 0xFFFF is the default partition
	FECN   bool
	BECN   bool
	Resv6  uint8  // 6 reserved bits of byte 4
	DestQP uint32 // destination QPN, 24 bits
	AckReq bool   // responder shall acknowledge this packet (§9.2.3)
	Resv7  uint8  // 7 reserved bits of byte 8
	PSN    uint32 // packet sequence number, 24 bits
}

// DecodeBTH reads a BTH from the first BTHLen bytes of b. It returns ErrTruncated if
// b is shorter and ErrBadVersion if TVer is not 0; any opcode value is accepted here
// (Packet.Decode checks it against the opcode table).
func DecodeBTH(b []byte) (BTH, error) {
	if len(b) < BTHLen {
		return BTH{}, ErrTruncated
	}
	h := BTH{
		Opcode: Opcode(b[0]),
		SE:     b[1]&0x80 != 0,
		MigReq: b[1]&0x40 != 0,
		PadCnt: (b[1] >> 4) & 3,
		TVer:   b[1] & 0x0F,
		PKey:   binary.BigEndian.Uint16(b[2:4]),
		FECN:   b[4]&0x80 != 0,
		BECN:   b[4]&0x40 != 0,
		Resv6:  b[4] & 0x3F,
		DestQP: uint32(b[5])<<16 | uint32(b[6])<<8 | uint32(b[7]),
		AckReq: b[8]&0x80 != 0,
		Resv7:  b[8] & 0x7F,
		PSN:    uint32(b[9])<<16 | uint32(b[10])<<8 | uint32(b[11]),
	}
	if h.TVer != 0 {
		return h, ErrBadVersion
	}
	return h, nil
}

// Put writes h into b[0:BTHLen]. It panics if len(b) < BTHLen. DestQP and PSN are
// truncated to 24 bits, PadCnt to 2 bits, TVer to 4 bits.
func (h *BTH) Put(b []byte) {
	_ = b[BTHLen-1]
	b[0] = byte(h.Opcode)
	b[1] = bit(h.SE, 0x80) | bit(h.MigReq, 0x40) | (h.PadCnt&3)<<4 | h.TVer&0x0F
	binary.BigEndian.PutUint16(b[2:4], h.PKey)
	b[4] = bit(h.FECN, 0x80) | bit(h.BECN, 0x40) | h.Resv6&0x3F
	put24(b[5:8], h.DestQP)
	b[8] = bit(h.AckReq, 0x80) | h.Resv7&0x7F
	put24(b[9:12], h.PSN)
}

func bit(v bool, mask byte) byte {
	if v {
		return mask
	}
	return 0
}

func put24(b []byte, v uint32) {
	_ = b[2]
	b[0] = byte(v >> 16)
	b[1] = byte(v >> 8)
	b[2] = byte(v)
}

func get24(b []byte) uint32 {
	_ = b[2]
	return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2])
}
