package crc

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestIEEE: IEEE equals hash/crc32's Update for every length from 0 to 4400 bytes
// (the ICRC span of a path-MTU-4096 frame is about 4.2 KB), for lengths around
// every fold boundary up to 9 KB (a 9000-byte frame), at every alignment of the
// first byte within 64, from zero and from random registers.
func TestIEEE(t *testing.T) {
	if !hasFold {
		t.Log("no AVX-512 VPCLMULQDQ: IEEE is hash/crc32 here")
	}
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 9216+64+64)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	var lengths []int
	for n := 0; n <= 4400; n++ {
		lengths = append(lengths, n)
	}
	for n := 4400; n <= 9216; n += 64 {
		lengths = append(lengths, n-1, n, n+1, n+63)
	}
	for _, n := range lengths {
		off := n % 64
		p := buf[off : off+n]
		for _, c := range []uint32{0, 0xFFFFFFFF, r.Uint32()} {
			if got, want := IEEE(c, p), crc32.Update(c, crc32.IEEETable, p); got != want {
				t.Fatalf("IEEE(%#x, %d bytes at offset %d) = %#x, hash/crc32 %#x", c, n, off, got, want)
			}
		}
	}
}

// TestIEEEChained: a CRC continued over the second half of a span equals the CRC
// of the whole, as crc32.Update's is.
func TestIEEEChained(t *testing.T) {
	p := make([]byte, 8192)
	for i := range p {
		p[i] = byte(i*31 + i>>8)
	}
	want := crc32.ChecksumIEEE(p)
	for _, cut := range []int{0, 1, 300, 511, 512, 4096, 8000, 8192} {
		if got := IEEE(IEEE(0, p[:cut]), p[cut:]); got != want {
			t.Errorf("cut at %d: %#x, want %#x", cut, got, want)
		}
	}
}

// FuzzIEEE: any bytes and starting register give hash/crc32's result.
func FuzzIEEE(f *testing.F) {
	f.Add(uint32(0), make([]byte, 4160))
	f.Add(uint32(0x12345678), []byte("short"))
	f.Fuzz(func(t *testing.T, c uint32, p []byte) {
		if got, want := IEEE(c, p), crc32.Update(c, crc32.IEEETable, p); got != want {
			t.Fatalf("IEEE(%#x, %d bytes) = %#x, hash/crc32 %#x", c, len(p), got, want)
		}
	})
}

func benchmarkCRC(b *testing.B, n int, f func(uint32, []byte) uint32) {
	p := make([]byte, n)
	b.SetBytes(int64(n))
	for b.Loop() {
		f(0, p)
	}
}

func hashCRC32(c uint32, p []byte) uint32 { return crc32.Update(c, crc32.IEEETable, p) }

// BenchmarkIEEE against hash/crc32 at the ICRC spans of 64-byte, 1 KiB, 2 KiB and
// 4 KiB WRITEs (headers add 64 bytes) and around foldMin.
func BenchmarkIEEE(b *testing.B) {
	for _, n := range []int{128, 256, 384, 512, 1088, 2112, 4160, 8192} {
		b.Run("fold/"+itoa(n), func(b *testing.B) { benchmarkCRC(b, n, IEEE) })
		b.Run("hashcrc32/"+itoa(n), func(b *testing.B) { benchmarkCRC(b, n, hashCRC32) })
	}
}

func itoa(n int) string {
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

// TestUpdate: the slicing-by-8 update equals hash/crc32 for every length to 200
// and any starting register.
func TestUpdate(t *testing.T) {
	p := make([]byte, 200)
	for i := range p {
		p[i] = byte(i*97 + 13)
	}
	for n := range len(p) + 1 {
		for _, c := range []uint32{0, 0xFFFFFFFF, 0xDEADBEEF} {
			if got, want := update(c, p[:n]), crc32.Update(c, crc32.IEEETable, p[:n]); got != want {
				t.Fatalf("update(%#x, %d bytes) = %#x, want %#x", c, n, got, want)
			}
		}
	}
}
