// Package crc computes the IEEE CRC-32 that the RoCEv2 ICRC is made of (IBTA Vol 1
// Annex A17.3.3), faster than hash/crc32 on long spans where the CPU has AVX-512
// VPCLMULQDQ.
//
// hash/crc32 (Go 1.26) folds 64 bytes at a time through one 512-bit register, so
// each step waits for the previous one's carry-less multiply: on the development
// VM's AMD EPYC it runs at about 30 GB/s on 4 KiB, and the ICRC of a path-MTU-4096
// frame (about 4.2 KB) cost about 0.2 µs of a frame's 2.5 µs on the sender. Folding
// four registers at once (256 bytes a step, each register over 2048 bits) keeps four
// multiplies in flight. The method is Intel's "Fast CRC Computation for Generic
// Polynomials Using PCLMULQDQ Instruction" (2009), for the bit-reflected CRC, with
// the folding constants computed from the polynomial in constants_test.go.
package crc

import (
	"hash/crc32"
	"unsafe"
)

// foldMin is the shortest span IEEE folds itself (fold starts from four 64-byte
// registers); shorter ones go to hash/crc32. BenchmarkIEEE on the development VM:
// 10 against 26 ns at 256 bytes, 16 against 47 at 512, 83 against 130 at 4160.
const foldMin = 256

// IEEE returns crc32.Update(crc, crc32.IEEETable, p): the reflected CRC-32 of p
// with the IEEE polynomial, continuing from crc (0 to start; the register is
// inverted before and after, as hash/crc32 does).
//
// On amd64 with AVX-512 VPCLMULQDQ and at least foldMin bytes, it folds p's
// 16-byte blocks into the register (foldCopy) and takes the last 0-15 bytes by
// slicing-by-8 (update); elsewhere it is hash/crc32.
func IEEE(crc uint32, p []byte) uint32 {
	if !hasFold || len(p) < foldMin {
		return crc32.Update(crc, crc32.IEEETable, p)
	}
	n := len(p) &^ 15
	return update(^foldCopy(^crc, p[:n], nil), p[n:])
}

// CopyIEEE copies src into dst[h:] and returns IEEE(crc, dst) as dst is after the
// copy: the CRC of dst's first h bytes, src, and dst's bytes after it (a frame's
// headers, its payload and its pad). Where IEEE folds, most of src is read once,
// for the copy and the CRC both (foldCopy); below foldMin bytes, with h above it,
// or where src overlaps dst it copies and then runs IEEE. It panics if dst is
// shorter than h+len(src), as copy into a slice expression would.
func CopyIEEE(crc uint32, dst []byte, h int, src []byte) uint32 {
	e := h + len(src)
	_ = dst[h:e] // the bounds check
	n := e &^ 15
	if !hasFold || n < foldMin || h > foldMin || Overlap(dst, src) {
		copy(dst[h:e], src)
		return IEEE(crc, dst)
	}
	copy(dst[h:foldMin], src)
	reg := foldCopy(^crc, dst[:n], src[foldMin-h:n-h])
	copy(dst[n:e], src[n-h:])
	return update(^reg, dst[n:]) // src's last 0-15 bytes and what follows

}

// Overlap reports whether a and b share a byte.
func Overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}
