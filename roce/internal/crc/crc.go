// Package crc computes the IEEE CRC-32 that the RoCEv2 ICRC is made of (IBTA Vol 1
// Annex A17.3.3), faster than hash/crc32 from 16 bytes on where the CPU has AVX-512
// VPCLMULQDQ, with the ICRC's masks applied as it reads (IEEEMasked) and a
// frame's payload copied in as it is read (CopyIEEEMasked).
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

// foldMin is the shortest span IEEE folds itself (one 16-byte lane); shorter
// ones go to hash/crc32. copyMin is the shortest CopyIEEE copies as it folds (the
// copy starts after the first four registers' 256 bytes). BenchmarkIEEE on the
// development VM, against hash/crc32: see docs/bench.md ("The payload copied as its
// ICRC is folded").
const (
	foldMin = 16
	copyMin = 256
)

// Mask holds bytes ORed into the first 64 bytes of a span before its CRC is taken,
// leaving the span itself as it is: the ICRC's fields that count as all ones
// (roce's icrc). Where it is nil, none are.
type Mask [64]byte

// noMask is the Mask that changes nothing.
var noMask Mask

// IEEE returns crc32.Update(crc, crc32.IEEETable, p): the reflected CRC-32 of p
// with the IEEE polynomial, continuing from crc (0 to start; the register is
// inverted before and after, as hash/crc32 does).
//
// On amd64 with AVX-512 VPCLMULQDQ and at least foldMin bytes, it folds p's
// 16-byte blocks into the register (foldCopy) and takes the last 0-15 bytes by
// slicing-by-8 (update); elsewhere it is hash/crc32.
func IEEE(crc uint32, p []byte) uint32 { return IEEEMasked(crc, p, nil) }

// IEEEMasked is IEEE of p with m ORed into its first 64 bytes, p unchanged: the
// fold ORs m into the registers it loads, so no byte of p is written (a write just
// before the fold's wide loads of the same bytes stalls them).
func IEEEMasked(crc uint32, p []byte, m *Mask) uint32 {
	if !hasFold || len(p) < foldMin {
		if m != nil {
			k := min(len(p), len(m))
			crc, p = updateMasked(crc, p[:k], m[:k]), p[k:]
		}
		return crc32.Update(crc, crc32.IEEETable, p)
	}
	if m == nil {
		m = &noMask
	}
	n := len(p) &^ 15
	reg := foldCopy(^crc, p[:n], nil, m)
	return updateMasked(^reg, p[n:], m[min(n, len(m)):]) // the mask's rest, if p is under 64 bytes
}

// CopyIEEE copies src into dst[h:] and returns IEEE(crc, dst) as dst is after the
// copy: the CRC of dst's first h bytes, src, and dst's bytes after it (a frame's
// headers, its payload and its pad). Where IEEE folds, most of src is read once,
// for the copy and the CRC both (foldCopy); below copyMin bytes, with h above it,
// or where src overlaps dst it copies and then runs IEEE. It panics if dst is
// shorter than h+len(src), as copy into a slice expression would.
func CopyIEEE(crc uint32, dst []byte, h int, src []byte) uint32 {
	return CopyIEEEMasked(crc, dst, h, src, nil)
}

// CopyIEEEMasked is CopyIEEE with m ORed into dst's first 64 bytes for the CRC
// (IEEEMasked), dst's own bytes left as they are.
func CopyIEEEMasked(crc uint32, dst []byte, h int, src []byte, m *Mask) uint32 {
	e := h + len(src)
	_ = dst[h:e] // the bounds check
	n := e &^ 15
	if !hasFold || n < copyMin || h > copyMin || Overlap(dst, src) {
		copy(dst[h:e], src)
		return IEEEMasked(crc, dst, m)
	}
	if m == nil {
		m = &noMask
	}
	copy(dst[h:copyMin], src)
	reg := foldCopy(^crc, dst[:n], src[copyMin-h:n-h], m)
	copy(dst[n:e], src[n-h:])
	return update(^reg, dst[n:]) // src's last 0-15 bytes and what follows, past the mask
}

// updateMasked is update of p (at most 64 bytes) with mask ORed into its first
// len(mask) bytes, p unchanged.
func updateMasked(crc uint32, p, mask []byte) uint32 {
	if len(mask) == 0 {
		return update(crc, p)
	}
	var b [len(Mask{})]byte
	k := copy(b[:], p)
	for i := range min(k, len(mask)) {
		b[i] |= mask[i]
	}
	return update(crc, b[:k])
}

// Overlap reports whether a and b share a byte.
func Overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}
