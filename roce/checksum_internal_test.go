package roce

import (
	"math/rand/v2"
	"testing"
)

// TestIPv4HeaderChecksum checks the header checksum computed from the fields
// against the worked example of RFC 1071's method on a real header (192.168.0.1 →
// 192.168.0.199, checksum 0xb861) and against the 16-bit sum of the header Encode
// writes, on random fields and on the all-ones ones (the largest sum).
func TestIPv4HeaderChecksum(t *testing.T) {
	h := IPv4{TOS: 0, ID: 0, FlagsFrag: 0x4000, TTL: 0x40, Src: [4]byte{192, 168, 0, 1}, Dst: [4]byte{192, 168, 0, 199}}
	if got := h.checksum(0x73); got != 0xb861 {
		t.Fatalf("checksum %#04x, want 0xb861", got)
	}
	by16 := func(h *IPv4, totalLen uint16) uint16 {
		b := []byte{0x45, h.TOS, byte(totalLen >> 8), byte(totalLen), byte(h.ID >> 8), byte(h.ID),
			byte(h.FlagsFrag >> 8), byte(h.FlagsFrag), h.TTL, 17, 0, 0}
		b = append(append(b, h.Src[:]...), h.Dst[:]...)
		return fold(sum16(b, 0))
	}
	ones := IPv4{TOS: 0xFF, ID: 0xFFFF, FlagsFrag: 0xFFFF, TTL: 0xFF, Src: [4]byte{0xFF, 0xFF, 0xFF, 0xFF}, Dst: [4]byte{0xFF, 0xFF, 0xFF, 0xFF}}
	if got, want := ones.checksum(0xFFFF), by16(&ones, 0xFFFF); got != want {
		t.Fatalf("all-ones header: %#04x, want %#04x", got, want)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 100000; i++ {
		h := IPv4{TOS: uint8(r.Uint32()), ID: uint16(r.Uint32()), FlagsFrag: uint16(r.Uint32()), TTL: uint8(r.Uint32())}
		for j := range 4 {
			h.Src[j], h.Dst[j] = byte(r.Uint32()), byte(r.Uint32())
		}
		n := uint16(r.Uint32())
		if got, want := h.checksum(n), by16(&h, n); got != want {
			t.Fatalf("header %+v, length %d: %#04x, want %#04x", h, n, got, want)
		}
	}
}
