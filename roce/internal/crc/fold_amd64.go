package crc

// hasFold: the CPU has the AVX-512 instructions fold uses (AVX512F: VMOVDQU64,
// VPXORQ, VPTERNLOGD, VEXTRACTI32X4; VPCLMULQDQ on 512-bit registers) and the OS
// saves the registers they use (XCR0: SSE, AVX, opmask, ZMM upper halves and
// ZMM16-31). Read with CPUID and XGETBV (Intel SDM Vol 1 §15.2 and Vol 2 CPUID;
// AMD APM Vol 3 CPUID Fn0000_0007) so that package roce needs no module outside the
// standard library.
var hasFold = detect()

func detect() bool {
	_, _, ecx1, _ := cpuid(1, 0)
	const osxsave = 1 << 27
	if ecx1&osxsave == 0 {
		return false
	}
	const zmmState = 1<<1 | 1<<2 | 1<<5 | 1<<6 | 1<<7 // XMM, YMM, opmask, ZMM_Hi256, Hi16_ZMM
	if xgetbv0()&zmmState != zmmState {
		return false
	}
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	_, ebx7, ecx7, _ := cpuid(7, 0)
	const avx512f, vpclmulqdq = 1 << 16, 1 << 10
	return ebx7&avx512f != 0 && ecx7&vpclmulqdq != 0
}

// cpuid executes CPUID with EAX = leaf and ECX = sub.
func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)

// xgetbv0 returns the low half of XCR0 (XGETBV with ECX = 0).
func xgetbv0() uint32

// foldCopy returns the CRC register (not inverted) after p (at least 16 bytes, a
// multiple of 16) from the register reg (the inverse of a hash/crc32 crc). Four
// 512-bit registers take 256 bytes a step (from 256 bytes on; a shorter span
// starts with one, or under 64 bytes with one lane), then one takes 64, then its four lanes
// fold into one, which takes the last 16-byte blocks, and a Barrett reduction
// turns that lane into the register (no table: slicing's tables are out of the
// cache after a frame's copies).
//
// With src not empty (len(p)-256 bytes) it copies as it reads: p's bytes from 256
// on come from src and are stored in p as each block is read, so the span's bytes
// are read once (a frame's payload copied in and checked in one pass). p's first
// 256 bytes are read where they are.
//
// m is ORed into p's first 64 bytes (or its first len(p), if fewer) as the fold
// loads them (IEEEMasked); p itself is only read there.
//
//go:noescape
func foldCopy(reg uint32, p []byte, src []byte, m *Mask) uint32
