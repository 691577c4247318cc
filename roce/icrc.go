package roce

import (
	"encoding/binary"

	"github.com/xroce/xroce/roce/internal/crc"
)

// The RoCEv2 invariant CRC (IBTA Vol 1 Annex A17.3.3 "ICRC"; rdma_rxe rxe_icrc.c).
//
// It is the standard reflected CRC-32 (IEEE polynomial, initial value ~0, final
// inversion; Go's crc32.ChecksumIEEE) over, in order:
//   - 8 bytes of 0xFF standing in for the InfiniBand LRH,
//   - the IP header with the variant fields set to all ones: IPv4 TOS, TTL and
//     header checksum; IPv6 traffic class, flow label and hop limit,
//   - the UDP header with its checksum set to all ones,
//   - the BTH with byte 4 (FECN, BECN, reserved) set to all ones,
//   - the remaining transport headers, the payload and the pad.
//
// The four ICRC bytes on the wire are the CRC's little-endian bytes, as Linux rdma_rxe
// computes them (drivers/infiniband/sw/rxe/rxe_icrc.c); the tests check them on
// every frame of recordings of rdma_rxe traffic.

var ones = [8]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}

// Offsets from the IP header of the bytes the ICRC masks to ones (besides the LRH
// stand-in): IPv4 TOS, TTL, header checksum, the UDP checksum and the BTH's byte 4;
// IPv6 traffic class and flow label (bytes 1-3 and the low nibble of byte 0), hop
// limit, the UDP checksum and the BTH's byte 4.
var (
	masked4 = [...]int{1, 8, 10, 11, 20 + 6, 20 + 7, 28 + 4}
	masked6 = [...]int{1, 2, 3, 7, 40 + 6, 40 + 7, 48 + 4}
)

// icrc computes the ICRC of the frame whose IP header starts at l3 (after the
// Ethernet header, so l3 ≥ 14), UDP header at l4 = l3+20 (IPv4) or l3+40 (IPv6), BTH
// at l4+8, and whose ICRC field starts at end; the caller guarantees the offsets are
// in range. It is one CRC over f[l3-8:end] with the LRH stand-in and the masked
// fields ORed in as the CRC reads them (icrcMask4, icrcMask6: every mask sets bits
// to one), so f is only read. Writing the masks into the frame and back, as before
// 2026-12-04, stalled the fold's wide loads of the bytes just written.
func icrc(f []byte, l3 int, v6 bool, end int) uint32 {
	return crc.IEEEMasked(0, f[l3-8:end], icrcMask(v6))
}

// icrcCopy is icrc for a frame being encoded whose payload is not in place yet: it
// copies payload to f[po:] as the CRC reads it (crc.CopyIEEEMasked: the payload is
// read once), then returns the ICRC of the whole frame, as icrc would after the
// copy. payload must not overlap f.
func icrcCopy(f []byte, l3 int, v6 bool, end, po int, payload []byte) uint32 {
	return crc.CopyIEEEMasked(0, f[l3-8:end], po-(l3-8), payload, icrcMask(v6))
}

// icrcMask4 and icrcMask6 are what the ICRC ORs into the first 64 bytes of its
// span (the LRH stand-in, then the IP header): ones over the stand-in and the
// masked fields, and for IPv6 the low nibble of byte 0 (the traffic class's top
// nibble; the version is kept).
var icrcMask4, icrcMask6 = icrcMaskFor(masked4[:], 0), icrcMaskFor(masked6[:], 0x0F)

func icrcMaskFor(pos []int, first byte) *crc.Mask {
	var m crc.Mask
	copy(m[:8], ones[:])
	for _, o := range pos {
		m[8+o] = 0xFF
	}
	m[8] |= first
	return &m
}

func icrcMask(v6 bool) *crc.Mask {
	if v6 {
		return icrcMask6
	}
	return icrcMask4
}

func putICRC(f []byte, end int, v uint32) { binary.LittleEndian.PutUint32(f[end:end+4], v) }

// ComputeICRC returns the ICRC the packet's frame should carry, computed over the
// frame bytes last passed to Decode or written by Encode; 0 when the last Decode
// failed before the transport headers were complete.
func (p *Packet) ComputeICRC() uint32 {
	if p.frame == nil {
		return 0
	}
	return icrc(p.frame, p.L3Off, p.IsIPv6, p.ICRCOff)
}

// FinishFrame fills in the checksums of a RoCEv2 frame whose headers are otherwise
// complete: it computes and writes the ICRC, then sets the UDP checksum (0 for IPv4,
// computed for IPv6; it covers the ICRC, so it must come second). Use it after building a frame with gopacket.SerializeLayers, which cannot
// compute the ICRC because the BTH layer is serialized before the IP header exists.
// It returns the decoder's error if the frame's structure is not valid RoCEv2.
func FinishFrame(frame []byte) error {
	var p Packet
	if err := p.decode(frame, false); err != nil {
		return err
	}
	putICRC(frame, p.ICRCOff, p.ComputeICRC())
	p.setUDPChecksum()
	return nil
}
