package roce

import (
	"encoding/binary"
	"net/netip"

	"github.com/xroce/xroce/roce/internal/crc"
)

// UDPPort is the IANA-assigned RoCEv2 destination port (Annex A17.2.1).
const UDPPort = 4791

// EtherTypes recognised by the frame decoder.
const (
	EtherTypeIPv4 = 0x0800
	EtherTypeIPv6 = 0x86DD
	EtherTypeVLAN = 0x8100 // one IEEE 802.1Q tag is accepted
)

// Ethernet is the Ethernet II header of a frame, with at most one 802.1Q tag.
type Ethernet struct {
	Dst, Src  [6]byte
	HasVLAN   bool
	VLANTCI   uint16 // 802.1Q tag control information (PCP, DEI, VID) when HasVLAN
	EtherType uint16 // of the IP header that follows: EtherTypeIPv4 or EtherTypeIPv6
}

// Len returns the header's size in bytes: 14, or 18 with a VLAN tag.
func (e *Ethernet) Len() int {
	if e.HasVLAN {
		return 18
	}
	return 14
}

// IPv4 holds the fields of a 20-byte IPv4 header (RFC 791) that a RoCEv2 frame
// sets; the protocol is always UDP and the lengths and checksum are derived.
// rdma_rxe sends DF set, TTL 64 and TOS = the GRH traffic class.
type IPv4 struct {
	TOS       uint8
	ID        uint16
	FlagsFrag uint16 // flags (3 bits) and fragment offset; 0x4000 is DF
	TTL       uint8
	Src, Dst  [4]byte
	Checksum  uint16 // as received; Encode computes it
}

// IPv6 holds the fields of a 40-byte IPv6 header (RFC 8200) that a RoCEv2 frame
// sets; the next header is always UDP and the payload length is derived.
type IPv6 struct {
	TrafficClass uint8
	FlowLabel    uint32 // 20 bits
	HopLimit     uint8
	Src, Dst     [16]byte
}

// UDP is the UDP header (RFC 768). Length is derived on Encode; Checksum is 0 for
// IPv4 (as rdma_rxe sends) and computed for IPv6, where 0 is not allowed.
type UDP struct {
	SrcPort, DstPort uint16
	Length           uint16
	Checksum         uint16
}

// Packet is one decoded RoCEv2 frame. Decode fills it from a frame's bytes without
// allocating; Encode writes a frame from its fields. Payload aliases the decoded
// frame. Only the extension headers named in Headers are meaningful.
type Packet struct {
	Eth    Ethernet
	IsIPv6 bool
	IPv4   IPv4 // when !IsIPv6
	IPv6   IPv6 // when IsIPv6
	UDP    UDP
	BTH    BTH

	Headers      Header // extension headers present, from the opcode table
	DETH         DETH
	FETH         FETH
	RETH         RETH
	AtomicETH    AtomicETH
	AETH         AETH
	AtomicAckETH AtomicAckETH
	ImmDt        ImmDt
	IETH         IETH
	CNPReserved  [CNPReservedLen]byte

	Payload []byte // the message data in this packet, without pad
	ICRC    uint32 // as carried in the frame

	// Offsets into the frame, in bytes: IP header, UDP header, BTH, payload, ICRC.
	L3Off, L4Off, BTHOff, PayloadOff, ICRCOff int

	frame []byte // set only when the structure decoded (or encoded) completely

}

// Frame returns the bytes last decoded or encoded, trimmed to the end of the ICRC, or
// nil if the last Decode failed with anything but ErrBadICRC.
func (p *Packet) Frame() []byte {
	if p.frame == nil {
		return nil
	}
	return p.frame[:p.ICRCOff+ICRCLen]
}

// SrcAddr and DstAddr return the IP addresses (IPv4 addresses as 4-byte addrs).
func (p *Packet) SrcAddr() netip.Addr {
	if p.IsIPv6 {
		return netip.AddrFrom16(p.IPv6.Src)
	}
	return netip.AddrFrom4(p.IPv4.Src)
}

// DstAddr returns the destination IP address.
func (p *Packet) DstAddr() netip.Addr {
	if p.IsIPv6 {
		return netip.AddrFrom16(p.IPv6.Dst)
	}
	return netip.AddrFrom4(p.IPv4.Dst)
}

// Decode parses an Ethernet frame carrying RoCEv2 and verifies its ICRC. The packet
// keeps references into frame. Trailing bytes after the IP datagram (Ethernet
// padding) are allowed and ignored. Neither the IPv4 header checksum nor the UDP
// checksum is verified: the ICRC covers both headers' invariant fields, and Linux
// senders on veth leave partial checksums (TX offload) that only the receiving
// kernel would complete. One 802.1Q tag is accepted. The ICRC is one CRC pass over
// the frame that ORs the ICRC's masks into what it reads (icrc.go); Decode writes
// nothing into frame.
//
// Errors: ErrTruncated, ErrNotRoCE, ErrIPv4Options, ErrIPFragment, ErrLengthMismatch,
// ErrUnknownOpcode, ErrBadVersion, ErrBadPadCount, ErrUnexpectedPayload, ErrBadICRC.
// With ErrBadICRC every field is decoded and valid; with any other error the packet's
// contents are unspecified.
func (p *Packet) Decode(frame []byte) error { return p.decode(frame, true) }

func (p *Packet) decode(f []byte, verify bool) error {
	p.frame = nil
	if len(f) < 14 {
		return ErrTruncated
	}
	copy(p.Eth.Dst[:], f[0:6])
	copy(p.Eth.Src[:], f[6:12])
	et := binary.BigEndian.Uint16(f[12:14])
	l3 := 14
	p.Eth.HasVLAN = et == EtherTypeVLAN
	p.Eth.VLANTCI = 0
	if p.Eth.HasVLAN {
		if len(f) < 18 {
			return ErrTruncated
		}
		p.Eth.VLANTCI = binary.BigEndian.Uint16(f[14:16])
		et = binary.BigEndian.Uint16(f[16:18])
		l3 = 18
	}
	p.Eth.EtherType = et
	p.L3Off = l3
	var l4, ipEnd int
	switch et {
	case EtherTypeIPv4:
		p.IsIPv6 = false
		ip := f[l3:]
		if len(ip) < 20 {
			return ErrTruncated
		}
		if ip[0]>>4 != 4 {
			return ErrNotRoCE
		}
		if ip[0]&0x0F != 5 {
			return ErrIPv4Options
		}
		total := int(binary.BigEndian.Uint16(ip[2:4]))
		if total < 20+8 { // no room for the UDP header
			return ErrLengthMismatch
		}
		if total > len(ip) {
			return ErrTruncated
		}
		h := &p.IPv4
		h.TOS = ip[1]
		h.ID = binary.BigEndian.Uint16(ip[4:6])
		h.FlagsFrag = binary.BigEndian.Uint16(ip[6:8])
		h.TTL = ip[8]
		h.Checksum = binary.BigEndian.Uint16(ip[10:12])
		copy(h.Src[:], ip[12:16])
		copy(h.Dst[:], ip[16:20])
		if h.FlagsFrag&0x3FFF != 0 { // MF or a fragment offset
			return ErrIPFragment
		}
		if ip[9] != 17 {
			return ErrNotRoCE
		}
		l4, ipEnd = l3+20, l3+total
	case EtherTypeIPv6:
		p.IsIPv6 = true
		ip := f[l3:]
		if len(ip) < 40 {
			return ErrTruncated
		}
		if ip[0]>>4 != 6 {
			return ErrNotRoCE
		}
		if ip[6] != 17 { // extension headers are not RoCEv2
			return ErrNotRoCE
		}
		plen := int(binary.BigEndian.Uint16(ip[4:6]))
		if plen < 8 { // no room for the UDP header (jumbograms are not RoCE)
			return ErrLengthMismatch
		}
		if 40+plen > len(ip) {
			return ErrTruncated
		}
		h := &p.IPv6
		vtf := binary.BigEndian.Uint32(ip[0:4])
		h.TrafficClass = uint8(vtf >> 20)
		h.FlowLabel = vtf & 0xFFFFF
		h.HopLimit = ip[7]
		copy(h.Src[:], ip[8:24])
		copy(h.Dst[:], ip[24:40])
		l4, ipEnd = l3+40, l3+40+plen
	default:
		return ErrNotRoCE
	}
	p.L4Off = l4
	u := f[l4:]
	p.UDP = UDP{
		SrcPort:  binary.BigEndian.Uint16(u[0:2]),
		DstPort:  binary.BigEndian.Uint16(u[2:4]),
		Length:   binary.BigEndian.Uint16(u[4:6]),
		Checksum: binary.BigEndian.Uint16(u[6:8]),
	}
	if p.UDP.DstPort != UDPPort {
		return ErrNotRoCE
	}
	if int(p.UDP.Length) != ipEnd-l4 {
		return ErrLengthMismatch
	}
	if err := p.decodeTransport(f[:ipEnd], l4+8); err != nil {
		return err
	}
	p.frame = f
	if verify && p.ComputeICRC() != p.ICRC {
		return ErrBadICRC
	}
	return nil
}

// DecodeTransport parses the payload b of a UDP/4791 datagram: BTH, the extension
// headers its opcode names, the message data, pad and ICRC, with the checks Decode
// makes of them. The ICRC is read but not verified (it covers the IP and UDP
// headers, which b does not hold); the Ethernet, IP and UDP fields keep whatever they
// held, the offsets count from the start of b (BTHOff is 0), Payload aliases b, and
// Frame returns nil. It is for tools that take the datagram apart with other decoders
// (roce/rocelayers).
//
// Errors: ErrTruncated, ErrLengthMismatch, ErrUnknownOpcode, ErrBadVersion,
// ErrBadPadCount, ErrUnexpectedPayload.
func (p *Packet) DecodeTransport(b []byte) error {
	p.frame = nil
	return p.decodeTransport(b, 0)
}

// decodeTransport parses BTH … ICRC from f[off:], where f ends at the end of the UDP
// datagram.
func (p *Packet) decodeTransport(f []byte, off int) error {
	b := f[off:]
	p.BTHOff = off
	if len(b) < BTHLen+ICRCLen {
		return ErrTruncated
	}
	var err error
	if p.BTH, err = DecodeBTH(b); err != nil {
		return err
	}
	info := &opcodeTable[p.BTH.Opcode]
	if info.Name == "" {
		return ErrUnknownOpcode
	}
	if len(b) < info.HeaderLen+ICRCLen {
		return ErrTruncated
	}
	if len(b)%4 != 0 { // headers, payload and pad fill whole 4-byte words (§9.2.4)
		return ErrLengthMismatch
	}
	p.Headers = info.Headers
	h := b[BTHLen:info.HeaderLen]
	if p.Headers&HdrDETH != 0 {
		p.DETH, _ = DecodeDETH(h)
		h = h[DETHLen:]
	}
	if p.Headers&HdrFETH != 0 {
		p.FETH, _ = DecodeFETH(h)
		h = h[FETHLen:]
	}
	if p.Headers&HdrRETH != 0 {
		p.RETH, _ = DecodeRETH(h)
		h = h[RETHLen:]
	}
	if p.Headers&HdrAtomicETH != 0 {
		p.AtomicETH, _ = DecodeAtomicETH(h)
		h = h[AtomicETHLen:]
	}
	if p.Headers&HdrAETH != 0 {
		p.AETH, _ = DecodeAETH(h)
		h = h[AETHLen:]
	}
	if p.Headers&HdrAtomicAckETH != 0 {
		p.AtomicAckETH, _ = DecodeAtomicAckETH(h)
		h = h[AtomicAckETHLen:]
	}
	if p.Headers&HdrImmDt != 0 {
		p.ImmDt, _ = DecodeImmDt(h)
		h = h[ImmDtLen:]
	}
	if p.Headers&HdrIETH != 0 {
		p.IETH, _ = DecodeIETH(h)
		h = h[IETHLen:]
	}
	if p.Headers&HdrCNPReserved != 0 {
		copy(p.CNPReserved[:], h)
	}
	end := len(b) - ICRCLen
	p.ICRCOff = off + end
	p.ICRC = binary.LittleEndian.Uint32(b[end:])
	body := end - info.HeaderLen // payload and pad
	pad := int(p.BTH.PadCnt)
	if !info.Payload && body != 0 {
		return ErrUnexpectedPayload
	}
	if pad > body {
		return ErrBadPadCount
	}
	p.PayloadOff = off + info.HeaderLen
	p.Payload = b[info.HeaderLen : end-pad]
	return nil
}

// Len returns the size in bytes of the frame Encode would write for p: headers from
// the opcode table, the payload, the pad to a 4-byte boundary and the ICRC.
// It returns 0 for an unknown opcode.
func (p *Packet) Len() int {
	info := &opcodeTable[p.BTH.Opcode]
	if info.Name == "" {
		return 0
	}
	n := p.Eth.Len() + 20 + 8 + info.HeaderLen + len(p.Payload) + padFor(len(p.Payload)) + ICRCLen
	if p.IsIPv6 {
		n += 20
	}
	return n
}

func padFor(n int) int { return -n & 3 }

// Encode writes the frame described by p into buf and returns its length. It derives
// what RoCEv2 fixes: the EtherType from IsIPv6, the IP and UDP lengths, UDP
// destination port 4791, the BTH PadCnt, the extension-header layout from the opcode
// (the header structs the opcode names are written; Headers is set to match), the
// IPv4 header checksum, the UDP checksum (0 for IPv4 as rdma_rxe sends; computed for
// IPv6) and the ICRC. Fields are cut to their wire widths (24-bit QPNs, PSN and MSN,
// 20-bit flow label, …). Everything else is written as given, so a test can build
// frames a receiver must refuse: Decode rejects a TVer other than 0 and IPv4
// fragment bits. After Encode, p describes the new frame exactly as Decode would.
// Payload may alias buf (re-encoding a decoded frame in place works).
//
// Errors, checked before anything is written: ErrUnknownOpcode; ErrUnexpectedPayload
// for a payload on an opcode that carries none; ErrLengthMismatch if the IP datagram
// would exceed 65535 bytes; ErrTruncated if buf is shorter than p.Len().
func (p *Packet) Encode(buf []byte) (int, error) {
	info := &opcodeTable[p.BTH.Opcode]
	if info.Name == "" {
		return 0, ErrUnknownOpcode
	}
	if !info.Payload && len(p.Payload) != 0 {
		return 0, ErrUnexpectedPayload
	}
	n := p.Len()
	l3 := p.Eth.Len()
	if n-l3 > 0xFFFF+40*boolInt(p.IsIPv6) {
		return 0, ErrLengthMismatch
	}
	if len(buf) < n {
		return 0, ErrTruncated
	}
	p.normalize()
	f := buf[:n]
	ipLen := 20
	if p.IsIPv6 {
		ipLen = 40
	}
	l4 := l3 + ipLen
	bth := l4 + 8
	po := bth + info.HeaderLen
	end := po + len(p.Payload)
	payload := p.Payload
	inBuf := crc.Overlap(buf, payload)
	if inBuf {
		copy(f[po:end], payload) // first: headers may land on it (memmove)
	}
	copy(f[0:6], p.Eth.Dst[:])
	copy(f[6:12], p.Eth.Src[:])
	p.Eth.EtherType = EtherTypeIPv4
	if p.IsIPv6 {
		p.Eth.EtherType = EtherTypeIPv6
	}
	if p.Eth.HasVLAN {
		binary.BigEndian.PutUint16(f[12:14], EtherTypeVLAN)
		binary.BigEndian.PutUint16(f[14:16], p.Eth.VLANTCI)
	}
	binary.BigEndian.PutUint16(f[l3-2:l3], p.Eth.EtherType)
	ip := f[l3:l4]
	if p.IsIPv6 {
		h := &p.IPv6
		binary.BigEndian.PutUint32(ip[0:4], 6<<28|uint32(h.TrafficClass)<<20|h.FlowLabel)
		binary.BigEndian.PutUint16(ip[4:6], uint16(n-l4))
		ip[6] = 17
		ip[7] = h.HopLimit
		copy(ip[8:24], h.Src[:])
		copy(ip[24:40], h.Dst[:])
	} else {
		h := &p.IPv4
		ip[0] = 0x45
		ip[1] = h.TOS
		binary.BigEndian.PutUint16(ip[2:4], uint16(n-l3))
		binary.BigEndian.PutUint16(ip[4:6], h.ID)
		binary.BigEndian.PutUint16(ip[6:8], h.FlagsFrag)
		ip[8] = h.TTL
		ip[9] = 17
		copy(ip[12:16], h.Src[:])
		copy(ip[16:20], h.Dst[:])
		h.Checksum = h.checksum(uint16(n - l3))
		binary.BigEndian.PutUint16(ip[10:12], h.Checksum)
	}
	u := f[l4:bth]
	p.UDP.DstPort = UDPPort
	p.UDP.Length = uint16(n - l4)
	binary.BigEndian.PutUint16(u[0:2], p.UDP.SrcPort)
	binary.BigEndian.PutUint16(u[2:4], p.UDP.DstPort)
	binary.BigEndian.PutUint16(u[4:6], p.UDP.Length)
	binary.BigEndian.PutUint16(u[6:8], 0)

	p.BTH.PadCnt = uint8(padFor(len(p.Payload)))
	p.BTH.Put(f[bth:])
	p.Headers = info.Headers
	h := f[bth+BTHLen : po]
	if p.Headers&HdrDETH != 0 {
		p.DETH.Put(h)
		h = h[DETHLen:]
	}
	if p.Headers&HdrFETH != 0 {
		p.FETH.Put(h)
		h = h[FETHLen:]
	}
	if p.Headers&HdrRETH != 0 {
		p.RETH.Put(h)
		h = h[RETHLen:]
	}
	if p.Headers&HdrAtomicETH != 0 {
		p.AtomicETH.Put(h)
		h = h[AtomicETHLen:]
	}
	if p.Headers&HdrAETH != 0 {
		p.AETH.Put(h)
		h = h[AETHLen:]
	}
	if p.Headers&HdrAtomicAckETH != 0 {
		p.AtomicAckETH.Put(h)
		h = h[AtomicAckETHLen:]
	}
	if p.Headers&HdrImmDt != 0 {
		p.ImmDt.Put(h)
		h = h[ImmDtLen:]
	}
	if p.Headers&HdrIETH != 0 {
		p.IETH.Put(h)
		h = h[IETHLen:]
	}
	if p.Headers&HdrCNPReserved != 0 {
		copy(h, p.CNPReserved[:])
	}
	clear(f[end : n-ICRCLen]) // pad
	p.L3Off, p.L4Off, p.BTHOff, p.PayloadOff, p.ICRCOff = l3, l4, bth, po, n-ICRCLen
	p.frame = f
	p.Payload = f[po:end]
	if inBuf {
		p.ICRC = p.ComputeICRC()
	} else { // the payload is copied in as the ICRC reads it
		p.ICRC = icrcCopy(f, l3, p.IsIPv6, p.ICRCOff, po, payload)
	}
	putICRC(f, p.ICRCOff, p.ICRC)
	p.setUDPChecksum()
	return n, nil
}

// normalize cuts fields to their wire widths, so p equals what Decode would read.
func (p *Packet) normalize() {
	b := &p.BTH
	b.PadCnt &= 3
	b.TVer &= 0x0F
	b.Resv6 &= 0x3F
	b.Resv7 &= 0x7F
	b.DestQP &= 0xFFFFFF
	b.PSN &= PSNMask
	p.DETH.SrcQP &= 0xFFFFFF
	p.AETH.MSN &= 0xFFFFFF
	p.IPv6.FlowLabel &= 0xFFFFF
	if p.IsIPv6 {
		p.IPv4 = IPv4{}
	} else {
		p.IPv6 = IPv6{}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// setUDPChecksum sets the UDP checksum of p's frame, in the frame and in p.UDP: 0 for
// IPv4, as rdma_rxe sends (the ICRC protects the packet); computed for IPv6, where
// RFC 8200 §8.1 forbids 0 and Linux drops such datagrams. It must run after the ICRC
// is written, since the UDP checksum covers it.
func (p *Packet) setUDPChecksum() {
	f := p.frame
	u := f[p.L4Off : p.ICRCOff+ICRCLen]
	p.UDP.Checksum = 0
	if p.IsIPv6 {
		binary.BigEndian.PutUint16(u[6:8], 0)
		p.UDP.Checksum = udpChecksum(f[p.L3Off:p.L4Off], true, u)
	}
	binary.BigEndian.PutUint16(u[6:8], p.UDP.Checksum)
}
