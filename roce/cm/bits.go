package cm

import "encoding/binary"

var be = binary.BigEndian

func get24(b []byte) uint32 {
	_ = b[2]
	return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2])
}

func put24(b []byte, v uint32) {
	_ = b[2]
	b[0] = byte(v >> 16)
	b[1] = byte(v >> 8)
	b[2] = byte(v)
}

func flag(v bool, mask byte) byte {
	if v {
		return mask
	}
	return 0
}

// data checks that b holds the DataLen bytes of a message and returns them.
func data(msg string, b []byte) ([]byte, error) {
	if len(b) < DataLen {
		return nil, shortError(msg, len(b), DataLen)
	}
	return b[:DataLen], nil
}

// out returns b[:DataLen] cleared, for a Put; it panics if b is shorter, as
// binary.BigEndian.PutUint32 does.
func out(b []byte) []byte {
	b = b[:DataLen]
	clear(b)
	return b
}
