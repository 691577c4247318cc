package roce

import (
	"math/rand/v2"
	"testing"
)

// TestIPv4HeaderChecksum checks the word-wise header checksum against the worked
// example of RFC 1071's method on a real header (192.168.0.1 → 192.168.0.199,
// checksum 0xb861) and against the 16-bit sum on random headers, the all-ones one
// (the largest sum) included.
func TestIPv4HeaderChecksum(t *testing.T) {
	h := []byte{0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61,
		0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7}
	if got := ipv4HeaderChecksum(h); got != 0xb861 {
		t.Fatalf("checksum %#04x, want 0xb861", got)
	}
	by16 := func(h []byte) uint16 { return fold(sum16(h[12:20], sum16(h[0:10], 0))) }
	ones := make([]byte, 20)
	for i := range ones {
		ones[i] = 0xFF
	}
	if got, want := ipv4HeaderChecksum(ones), by16(ones); got != want {
		t.Fatalf("all-ones header: %#04x, want %#04x", got, want)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 100000; i++ {
		for j := range h {
			h[j] = byte(r.Uint32())
		}
		if got, want := ipv4HeaderChecksum(h), by16(h); got != want {
			t.Fatalf("header % x: %#04x, want %#04x", h, got, want)
		}
	}
}
