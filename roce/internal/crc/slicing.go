package crc

import (
	"encoding/binary"
	"hash/crc32"
)

// slicing8 holds the tables of the slicing-by-8 method (Intel's "A Systematic
// Approach to Building High Performance, Software-based, CRC Generators", 2005):
// slicing8[k][b] is the register after byte b followed by k zero bytes.
var slicing8 = func() (t [8][256]uint32) {
	t[0] = *crc32.MakeTable(crc32.IEEE)
	for b := range 256 {
		c := t[0][b]
		for k := 1; k < 8; k++ {
			c = t[0][c&0xFF] ^ c>>8
			t[k][b] = c
		}
	}
	return t
}()

// update is crc32.Update(crc, crc32.IEEETable, p) by slicing-by-8, for the 0-15
// bytes foldCopy leaves: calling hash/crc32 makes p escape (its IEEE
// implementation is a function variable).
func update(crc uint32, p []byte) uint32 {
	crc = ^crc
	for ; len(p) >= 8; p = p[8:] {
		lo := binary.LittleEndian.Uint32(p) ^ crc
		hi := binary.LittleEndian.Uint32(p[4:])
		crc = slicing8[7][lo&0xFF] ^ slicing8[6][lo>>8&0xFF] ^ slicing8[5][lo>>16&0xFF] ^ slicing8[4][lo>>24] ^
			slicing8[3][hi&0xFF] ^ slicing8[2][hi>>8&0xFF] ^ slicing8[1][hi>>16&0xFF] ^ slicing8[0][hi>>24]
	}
	for _, b := range p {
		crc = slicing8[0][byte(crc)^b] ^ crc>>8
	}
	return ^crc
}
