package crc

import (
	"math/bits"
	"os"
	"regexp"
	"strconv"
	"testing"
)

// polyIEEE is the CRC-32 polynomial x^32 + x^26 + ... + 1 with its x^32 term, in
// normal (not reflected) bit order.
const polyIEEE = 0x104C11DB7

// xPowMod returns x^e mod polyIEEE.
func xPowMod(e int) uint64 {
	r := uint64(1)
	for range e {
		r <<= 1
		if r&(1<<32) != 0 {
			r ^= polyIEEE
		}
	}
	return r
}

// foldConst is the constant a quadword is multiplied by to move it e bits on in
// the bit-reflected CLMUL method: x^e mod P, reflected, shifted left one.
func foldConst(e int) uint64 { return uint64(bits.Reverse32(uint32(xPowMod(e)))) << 1 }

// xDivMu returns floor(x^64 / polyIEEE) (degree 32), normal bit order: the
// Barrett constant.
func xDivMu() uint64 {
	var q uint64
	r := [2]uint64{0, 1} // x^64, as bits 0-127
	for d := 64; d >= 32; d-- {
		if r[d/64]>>(d%64)&1 == 0 {
			continue
		}
		q |= 1 << (d - 32)
		sh := d - 32
		r[0] ^= polyIEEE << sh
		if sh > 0 {
			r[1] ^= polyIEEE >> (64 - sh)
		}
	}
	return q
}

// TestFoldConstants: every DATA word of fold_amd64.s is the constant its table
// needs: a lane folded over D bits takes k(D+32) for its low quadword and k(D-32)
// for its high one; k2048 for four registers and k512 for one (each broadcast to
// the four lanes), klanes for lanes 0-2 of the last register into lane 3 (D = 384,
// 256, 128; lane 3 zero), k128 for the lane over the last 16-byte blocks,
// kbarrett for the reduction of that lane to 32 bits (x^95 and x^63 mod P, mu and P
// times x^31, each bit-reversed as a quadword: a carry-less product of reversed
// quadwords is the reversed product times x, which the exponents take in). The
// known values of hash/crc32 and Linux's crc32-pclmul for D = 512 and 128 hold
// too.
func TestFoldConstants(t *testing.T) {
	if foldConst(512+32) != 0x154442bd4 || foldConst(512-32) != 0x1c6e41596 || foldConst(128+32) != 0x1751997d0 || foldConst(128-32) != 0xccaa009e {
		t.Fatal("foldConst does not give the published D = 512 and 128 constants")
	}
	pair := func(d int) []uint64 { return []uint64{foldConst(d + 32), foldConst(d - 32)} }
	var want = map[string][]uint64{
		"k2048":  pair(2048),
		"k512":   pair(512),
		"klanes": append(append(append(pair(384), pair(256)...), pair(128)...), 0, 0),
		"k128":   pair(128),
		"kbarrett": {bits.Reverse64(xPowMod(95)), bits.Reverse64(xPowMod(63)),
			bits.Reverse64(xDivMu() << 31), bits.Reverse64(polyIEEE << 31)},
	}
	src, err := os.ReadFile("fold_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]uint64{}
	re := regexp.MustCompile(`(?m)^DATA (\w+)<>\+(\d+)\(SB\)/8, \$(0x[0-9a-f]+|0)$`)
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		off, _ := strconv.Atoi(m[2])
		v, err := strconv.ParseUint(m[3], 0, 64)
		if err != nil || off != 8*len(got[m[1]]) {
			t.Fatalf("DATA %s+%s: %v, or out of order", m[1], m[2], err)
		}
		got[m[1]] = append(got[m[1]], v)
	}
	for name, w := range want {
		g := got[name]
		if len(g) != len(w) {
			t.Fatalf("%s: %d words, want %d", name, len(g), len(w))
		}
		for i := range w {
			if g[i] != w[i] {
				t.Errorf("%s+%d = %#x, want %#x", name, 8*i, g[i], w[i])
			}
		}
	}
}
