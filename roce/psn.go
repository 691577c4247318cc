package roce

// PSN arithmetic on 24-bit packet sequence numbers (IBTA Vol 1 §9.7.1.1 and
// §9.7.5.1.1: sequence numbers wrap at 2^24, and a PSN is "ahead" of another when it
// lies within the next 2^23 values).

// PSNMask keeps the low 24 bits.
const PSNMask = 0xFFFFFF

// PSNAdd returns psn+n modulo 2^24. n may be negative.
func PSNAdd(psn uint32, n int) uint32 { return uint32(int64(psn)+int64(n)) & PSNMask }

// PSNNext returns psn+1 modulo 2^24 (0xFFFFFF wraps to 0).
func PSNNext(psn uint32) uint32 { return (psn + 1) & PSNMask }

// PSNDiff returns the signed distance a−b within the 2^23 window: positive when a is
// ahead of b, negative when behind, in [−2^23, 2^23).
func PSNDiff(a, b uint32) int32 { return int32((a-b)<<8) >> 8 }

// PSNBefore reports whether a comes strictly before b in the 2^23 window.
func PSNBefore(a, b uint32) bool { return PSNDiff(a, b) < 0 }

// PSNAfter reports whether a comes strictly after b in the 2^23 window.
func PSNAfter(a, b uint32) bool { return PSNDiff(a, b) > 0 }
