package pcap

import (
	"encoding/binary"
	"fmt"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// Link types (tcpdump.org/linktypes.html) as the files carry them: gopacket's
// layers.LinkType is 8 bits and cannot hold LINKTYPE_LINUX_SLL2 (276, tcpdump -i
// any since libpcap 1.10).
const (
	linkTypeEthernet  = uint32(layers.LinkTypeEthernet)
	linkTypeLinuxSLL  = uint32(layers.LinkTypeLinuxSLL)
	linkTypeLinuxSLL2 = 276
	linkTypeRaw       = uint32(layers.LinkTypeRaw)
	linkTypeRawBSD    = 12 // DLT_RAW's value on some BSDs, raw IP too
	linkTypeIPv4      = uint32(layers.LinkTypeIPv4)
	linkTypeIPv6      = uint32(layers.LinkTypeIPv6)
)

// pcapLinkType reads the link type of a classic pcap file's header.
func pcapLinkType(b []byte) uint32 {
	if len(b) < 24 {
		return 0
	}
	if m := binary.BigEndian.Uint32(b[0:4]); m == 0xa1b2c3d4 || m == 0xa1b23c4d {
		return binary.BigEndian.Uint32(b[20:24])
	}
	return binary.LittleEndian.Uint32(b[20:24])
}

// ngLinkTypes reads the link types of a pcapng file's Interface Description
// Blocks, of every section (b holds whole blocks: checkNg).
func ngLinkTypes(b []byte) []uint32 {
	var out []uint32
	var order binary.ByteOrder = binary.LittleEndian
	for off := 0; off+12 <= len(b); {
		if binary.LittleEndian.Uint32(b[off:]) == 0x0A0D0D0A {
			order = binary.LittleEndian
			if binary.BigEndian.Uint32(b[off+8:]) == 0x1A2B3C4D {
				order = binary.BigEndian
			}
		}
		n := int(order.Uint32(b[off+4:]))
		if n < 12 || off+n > len(b) {
			break
		}
		if order.Uint32(b[off:]) == 1 && n >= 16 { // Interface Description Block
			out = append(out, uint32(order.Uint16(b[off+8:])))
		}
		off += n
	}
	return out
}

// ngLinkOf returns a frame's link type from pcapgo's (its CaptureInfo's first
// ancillary datum, with WantMixedLinkType), which is 8 bits: the file's own
// value (raw, its interfaces' link types) whose low byte it is, so that
// LINKTYPE_LINUX_SLL2 (276, seen as 20) is recognised.
func ngLinkOf(raw []uint32) func(gopacket.CaptureInfo) uint32 {
	return func(ci gopacket.CaptureInfo) uint32 {
		if len(ci.AncillaryData) == 0 {
			return 0
		}
		lt, ok := ci.AncillaryData[0].(layers.LinkType)
		if !ok {
			return 0
		}
		for _, r := range raw {
			if uint32(uint8(r)) == uint32(lt) {
				return r
			}
		}
		return uint32(lt)
	}
}

// toEthernet returns how to turn a frame of link type lt into an Ethernet frame,
// and how many bytes that adds (negative: removes), for the link types a RoCE
// capture comes in besides Ethernet: Linux cooked captures (tcpdump -i any: SLL
// and SLL2, whose header carries the sender's address and the EtherType) and raw
// IP (LINKTYPE_RAW, _IPV4, _IPV6). The Ethernet header it writes has the SLL
// sender's address as its source when it is 6 bytes long, zeros otherwise; the
// ICRC and everything RoCE covers start at the IP header, so they are unchanged.
// Link types: tcpdump.org/linktypes.html. An unsupported link type is an error.
func toEthernet(lt uint32) (conv func([]byte) ([]byte, bool), grow int, err error) {
	switch lt {
	case linkTypeEthernet:
		return nil, 0, nil
	case linkTypeLinuxSLL: // type 2, ARPHRD 2, address length 2, address 8, protocol 2
		return func(b []byte) ([]byte, bool) {
			if len(b) < 16 {
				return nil, false
			}
			return ethFrame(b[6:14], int(binary.BigEndian.Uint16(b[4:6])), binary.BigEndian.Uint16(b[14:16]), b[16:]), true
		}, 14 - 16, nil
	case linkTypeLinuxSLL2: // protocol 2, reserved 2, ifindex 4, ARPHRD 2, type 1, address length 1, address 8
		return func(b []byte) ([]byte, bool) {
			if len(b) < 20 {
				return nil, false
			}
			return ethFrame(b[12:20], int(b[11]), binary.BigEndian.Uint16(b[0:2]), b[20:]), true
		}, 14 - 20, nil
	case linkTypeRaw, linkTypeRawBSD, linkTypeIPv4, linkTypeIPv6:
		return func(b []byte) ([]byte, bool) {
			if len(b) < 1 {
				return nil, false
			}
			et := uint16(0x0800)
			if b[0]>>4 == 6 {
				et = 0x86DD
			}
			return ethFrame(nil, 0, et, b), true
		}, 14, nil
	}
	return nil, 0, fmt.Errorf("link type %d (%v): want Ethernet, Linux cooked (SLL, SLL2) or raw IP", lt, layers.LinkType(lt))
}

// ethFrame builds an Ethernet frame of EtherType et around payload, its source
// the first addrLen bytes of addr when that is 6.
func ethFrame(addr []byte, addrLen int, et uint16, payload []byte) []byte {
	f := make([]byte, 14+len(payload))
	if addrLen == 6 {
		copy(f[6:12], addr[:6])
	}
	binary.BigEndian.PutUint16(f[12:14], et)
	copy(f[14:], payload)
	return f
}
