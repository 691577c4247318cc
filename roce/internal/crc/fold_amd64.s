#include "textflag.h"

// FOLD moves the lanes of r (quadwords L, H) on by the constants' distance and adds
// d: r = L·k.lo ⊕ H·k.hi ⊕ d, with t as scratch.
#define FOLD(k, r, t, d) \
	VPCLMULQDQ $0x11, k, r, t; \
	VPCLMULQDQ $0x00, k, r, r; \
	VPTERNLOGD $0x96, d, t, r

// Folding constants (bit-reflected, shifted left one, as the CLMUL method needs):
// a 128-bit lane whose low and high quadwords are L and H, D bits before the lane
// it folds into, becomes L·k(D+32) ⊕ H·k(D-32), where k(e) is x^e mod P reflected.
// constants_test.go computes them from the polynomial.

// D = 2048: each of four registers folds over the other three's 192 bytes
// (broadcast to the four lanes).
DATA k2048<>+0(SB)/8, $0x11542778a
DATA k2048<>+8(SB)/8, $0x1322d1430
GLOBL k2048<>(SB), RODATA, $16

// D = 512: a register folds into the next 64 bytes (broadcast).
DATA k512<>+0(SB)/8, $0x154442bd4
DATA k512<>+8(SB)/8, $0x1c6e41596
GLOBL k512<>(SB), RODATA, $16

// Lanes 0, 1 and 2 of the last register fold into lane 3 (D = 384, 256, 128);
// lane 3 stays (zero constants).
DATA klanes<>+0(SB)/8, $0x03db1ecdc
DATA klanes<>+8(SB)/8, $0x174359406
DATA klanes<>+16(SB)/8, $0x0f1da05aa
DATA klanes<>+24(SB)/8, $0x15a546366
DATA klanes<>+32(SB)/8, $0x1751997d0
DATA klanes<>+40(SB)/8, $0x0ccaa009e
DATA klanes<>+48(SB)/8, $0
DATA klanes<>+56(SB)/8, $0
GLOBL klanes<>(SB), RODATA, $64

// D = 128: the last lane folds into each 16 bytes that follow.
DATA k128<>+0(SB)/8, $0x1751997d0
DATA k128<>+8(SB)/8, $0x0ccaa009e
GLOBL k128<>(SB), RODATA, $16

// STORE writes a block just read (r) to DX+off when R8 is not zero: foldCopy's
// copy of its source into p.
#define STORE(r, off) \
	TESTQ R8, R8; \
	JZ    2(PC); \
	VMOVDQU64 r, off(DX)

// Barrett reduction of the last 128-bit lane to the 32-bit register (Intel's
// paper, section 4.1), bit-reflected: K95 and K63 (x^95 and x^63 mod P) fold the
// lane to 64 bits, then mu (floor(x^64 / P)) and P itself, each times x^31, reduce
// those. constants_test.go computes them.
DATA kbarrett<>+0(SB)/8, $0xccaa009e00000000
DATA kbarrett<>+8(SB)/8, $0xb8bc676500000000
DATA kbarrett<>+16(SB)/8, $0x1f7011641
DATA kbarrett<>+24(SB)/8, $0x1db710641
GLOBL kbarrett<>(SB), RODATA, $32

// func foldCopy(reg uint32, p []byte, src []byte, m *Mask) uint32
//
// The first 256 bytes of the span are read from p; the rest from src (each block
// also stored at its place in p) when src is not empty, else from p (no store).
// A span under 256 bytes (src empty) starts with one register, one under 64 bytes
// (at least 16) with one lane. The mask (R9) is ORed into the first 64 bytes.
TEXT ·foldCopy(SB), NOSPLIT, $0-68
	MOVQ  p_base+8(FP), DX
	MOVQ  p_len+16(FP), CX
	MOVQ  src_base+32(FP), SI
	MOVQ  src_len+40(FP), R8
	MOVQ  m+56(FP), R9
	MOVL  reg+0(FP), AX
	VMOVD AX, X10 // zero-extended to Z10
	CMPQ  CX, $256
	JAE   four
	XORQ  R8, R8
	CMPQ  CX, $64
	JB    lane
	VMOVDQU64 0(DX), Z1
	VPORQ     0(R9), Z1, Z1
	VPXORQ    Z10, Z1, Z1
	ADDQ      $64, DX
	SUBQ      $64, CX
	MOVQ      DX, SI
	VBROADCASTI32X4 k512<>(SB), Z0
	JMP       loop64

lane:
	VMOVDQU   0(DX), X5
	VPOR      0(R9), X5, X5
	VPXOR     X10, X5, X5
	ADDQ      $16, DX
	SUBQ      $16, CX
	ADDQ      $16, R9
	VMOVDQU   k128<>(SB), X0

laneLoop:
	// Under 64 bytes: each block takes its part of the mask.
	CMPQ       CX, $16
	JB         reduce32
	VMOVDQU    0(DX), X9
	VPOR       0(R9), X9, X9
	FOLD(X0, X5, X6, X9)
	ADDQ       $16, DX
	ADDQ       $16, R9
	SUBQ       $16, CX
	JMP        laneLoop

four:
	VMOVDQU64 0(DX), Z1
	VPORQ     0(R9), Z1, Z1
	VMOVDQU64 64(DX), Z2
	VMOVDQU64 128(DX), Z3
	VMOVDQU64 192(DX), Z4
	VPXORQ    Z10, Z1, Z1
	ADDQ      $256, DX
	SUBQ      $256, CX
	TESTQ     R8, R8
	JNZ       from
	MOVQ      DX, SI // no source: read p itself

from:
	VBROADCASTI32X4 k2048<>(SB), Z0

loop256:
	CMPQ CX, $256
	JB   reduce
	VMOVDQU64  0(SI), Z9
	VMOVDQU64  64(SI), Z10
	VMOVDQU64  128(SI), Z11
	VMOVDQU64  192(SI), Z12
	STORE(Z9, 0)
	STORE(Z10, 64)
	STORE(Z11, 128)
	STORE(Z12, 192)
	FOLD(Z0, Z1, Z5, Z9)
	FOLD(Z0, Z2, Z6, Z10)
	FOLD(Z0, Z3, Z7, Z11)
	FOLD(Z0, Z4, Z8, Z12)
	ADDQ       $256, SI
	ADDQ       $256, DX
	SUBQ       $256, CX
	JMP        loop256

reduce:
	// Z1 lies 512 bits before Z2, Z2 before Z3, Z3 before Z4.
	VBROADCASTI32X4 k512<>(SB), Z0
	FOLD(Z0, Z1, Z5, Z2)
	FOLD(Z0, Z1, Z5, Z3)
	FOLD(Z0, Z1, Z5, Z4)

loop64:
	CMPQ CX, $64
	JB   done
	VMOVDQU64  0(SI), Z9
	STORE(Z9, 0)
	FOLD(Z0, Z1, Z5, Z9)
	ADDQ       $64, SI
	ADDQ       $64, DX
	SUBQ       $64, CX
	JMP        loop64

done:
	VMOVDQU64      klanes<>(SB), Z0
	VPCLMULQDQ     $0x11, Z0, Z1, Z5
	VPCLMULQDQ     $0x00, Z0, Z1, Z6
	VPXORQ         Z6, Z5, Z5
	VEXTRACTI32X4  $1, Z5, X7
	VEXTRACTI32X4  $2, Z5, X8
	VEXTRACTI32X4  $3, Z1, X9
	VPTERNLOGD     $0x96, X7, X8, X5
	VPXORQ         X9, X5, X5
	VMOVDQU        k128<>(SB), X0

loop16:
	CMPQ       CX, $16
	JB         reduce32
	VMOVDQU    0(SI), X9
	TESTQ      R8, R8
	JZ         2(PC)
	VMOVDQU    X9, 0(DX)
	FOLD(X0, X5, X6, X9)
	ADDQ       $16, SI
	ADDQ       $16, DX
	SUBQ       $16, CX
	JMP        loop16

reduce32:
	// X5 is the lane: quadwords q0 (the earlier bytes) and q1.
	VMOVDQU    kbarrett<>+0(SB), X0  // K95, K63
	VMOVDQU    kbarrett<>+16(SB), X1 // mu, P
	VPCLMULQDQ $0x00, X0, X5, X6     // q0·K95
	VPSRLDQ    $8, X5, X7
	VPSLLDQ    $4, X7, X7            // q1 moved on 32 bits
	VPXOR      X7, X6, X6            // 96 bits: v0 (its low half zero), v1
	VPCLMULQDQ $0x10, X0, X6, X7     // v0·K63
	VPXOR      X6, X7, X7
	VPSRLDQ    $8, X7, X7            // u, 64 bits
	VPSLLQ     $32, X7, X8
	VPSRLQ     $32, X8, X8           // u's first 32 bits
	VPCLMULQDQ $0x00, X1, X8, X9     // times mu
	VPSLLQ     $32, X9, X9
	VPSRLQ     $32, X9, X9           // the quotient
	VPCLMULQDQ $0x10, X1, X9, X10    // times P
	VPXOR      X10, X7, X7
	VPEXTRD    $1, X7, AX
	MOVL       AX, ret+64(FP)
	VZEROUPPER
	RET

// func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func xgetbv0() uint32
TEXT ·xgetbv0(SB), NOSPLIT, $0-4
	MOVL $0, CX
	XGETBV
	MOVL AX, ret+0(FP)
	RET
