package crc

import "testing"

// TestWithoutFold runs the checks of IEEE, CopyIEEE and the masked forms with the
// fold switched off, as on a CPU without AVX-512 VPCLMULQDQ (hash/crc32 and the
// slicing tables alone).
func TestWithoutFold(t *testing.T) {
	if !hasFold {
		t.Skip("no AVX-512 VPCLMULQDQ: the other tests already ran without the fold")
	}
	hasFold = false
	defer func() { hasFold = true }()
	t.Run("IEEE", TestIEEE)
	t.Run("CopyIEEE", TestCopyIEEE)
	t.Run("IEEEMasked", TestIEEEMasked)
}
