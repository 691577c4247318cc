package pcap

import "encoding/binary"

// fixPcap makes a classic pcap file (b, read whole) readable by pcapgo where
// Wireshark reads it, changing b in place: a header snapshot length of 0 (some
// writers leave it unset) or above MaxSnaplen (0xFFFFFFFF: "unlimited") becomes
// MaxSnaplen, which still bounds every record, and a record whose captured length
// exceeds its original length (a writer's mistake) gets an original length equal
// to its captured one. It stops at the first record it cannot walk, which pcapgo
// then reports. The format: the pcap draft (draft-ietf-opsawg-pcap, §4, §5).
func fixPcap(b []byte) {
	if len(b) < 24 {
		return
	}
	var order binary.ByteOrder = binary.LittleEndian
	if m := binary.BigEndian.Uint32(b[0:4]); m == 0xa1b2c3d4 || m == 0xa1b23c4d {
		order = binary.BigEndian
	}
	if s := order.Uint32(b[16:20]); s == 0 || s > MaxSnaplen {
		order.PutUint32(b[16:20], MaxSnaplen)
	}
	for off := 24; off+16 <= len(b); {
		rec := b[off : off+16]
		capLen, origLen := order.Uint32(rec[8:12]), order.Uint32(rec[12:16])
		if capLen > MaxSnaplen || uint64(off)+16+uint64(capLen) > uint64(len(b)) {
			return
		}
		if capLen > origLen {
			order.PutUint32(rec[12:16], capLen)
		}
		off += 16 + int(capLen)
	}
}
