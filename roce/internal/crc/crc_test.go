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

// FuzzCopyIEEE: any header, source and trailer leave dst as a copy would and give
// hash/crc32's result over it.
func FuzzCopyIEEE(f *testing.F) {
	f.Add(uint32(0), make([]byte, 60), make([]byte, 4096), uint8(3))
	f.Add(uint32(0xFFFFFFFF), []byte("head"), []byte("payload"), uint8(0))
	f.Fuzz(func(t *testing.T, c uint32, head, src []byte, tail uint8) {
		dst := make([]byte, len(head)+len(src)+int(tail))
		copy(dst, head)
		want := append(append(append([]byte(nil), head...), src...), make([]byte, tail)...)
		if got, wantCRC := CopyIEEE(c, dst, len(head), src), crc32.Update(c, crc32.IEEETable, want); got != wantCRC || string(dst) != string(want) {
			t.Fatalf("CopyIEEE(%#x, %d+%d+%d bytes) = %#x, hash/crc32 %#x (bytes equal: %v)", c, len(head), len(src), tail, got, wantCRC, string(dst) == string(want))
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

// BenchmarkIEEE against hash/crc32 at the ICRC spans of an ACK (52 bytes), 64-byte,
// 1 KiB, 2 KiB and 4 KiB WRITEs (headers add 64 bytes) and around foldMin and
// copyMin.
func BenchmarkIEEE(b *testing.B) {
	for _, n := range []int{52, 64, 80, 128, 192, 256, 384, 512, 1088, 2112, 4160, 8192} {
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

// TestCopyIEEE: CopyIEEE leaves dst as a copy would, and returns what IEEE of the
// copied span does, for headers of 0 to 300 bytes, sources of 0 to 4400 bytes, 0 to
// 20 trailing bytes, every alignment within 64 of either side, from zero and from a
// random register; and for a source inside dst (moved, as copy moves).
func TestCopyIEEE(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	src := make([]byte, 4400+64)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	dst := make([]byte, 300+4400+20+64)
	want := make([]byte, len(dst))
	for range 20000 {
		h, m, tail := r.IntN(301), r.IntN(4401), r.IntN(21)
		if r.IntN(2) == 0 {
			m = 240 + r.IntN(40) - h // around the first fold block's end
			if m < 0 {
				m = 0
			}
		}
		so, do := r.IntN(64), r.IntN(64)
		for i := range dst {
			dst[i] = byte(r.Uint32())
		}
		d := dst[do : do+h+m+tail]
		s := src[so : so+m]
		w := want[:len(d)]
		copy(w, d)
		copy(w[h:], s)
		c := r.Uint32() * uint32(r.IntN(2))
		got := CopyIEEE(c, d, h, s)
		if wantCRC := crc32.Update(c, crc32.IEEETable, w); got != wantCRC || string(d) != string(w) {
			t.Fatalf("CopyIEEE(%#x, %d bytes, h %d, %d-byte source at %d/%d): crc %#x want %#x, bytes equal %v", c, len(d), h, m, so, do, got, wantCRC, string(d) == string(w))
		}
	}
	// A source inside dst: the bytes move as copy moves them.
	buf := make([]byte, 5000)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	w := append([]byte(nil), buf...)
	copy(w[64:], w[100:4200])
	if got, wantCRC := CopyIEEE(0, buf, 64, buf[100:4200]), crc32.ChecksumIEEE(w); got != wantCRC || string(buf) != string(w) {
		t.Fatalf("overlapping: crc %#x want %#x", got, wantCRC)
	}
}

// BenchmarkCopyIEEE: the ICRC span of a PMTU-4096 frame (60 header bytes, 4096 of
// payload, no pad) copied and checked in one pass, against a copy and then IEEE.
func BenchmarkCopyIEEE(b *testing.B) {
	src := make([]byte, 4096)
	dst := make([]byte, 60+4096)
	b.Run("fused", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			CopyIEEE(0, dst, 60, src)
		}
	})
	b.Run("copy-then-IEEE", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			copy(dst[60:], src)
			IEEE(0, dst)
		}
	})
}

// TestIEEEMasked: IEEEMasked and CopyIEEEMasked give hash/crc32's CRC of the span
// with the mask ORed into its first 64 bytes and leave the span's bytes as they
// were (as copied), for every length to 300 bytes and a few to 4400, each at an
// alignment within 64 that moves with the length, with a random mask and one with
// few bytes set (the ICRC's).
func TestIEEEMasked(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	buf := make([]byte, 4400+64)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	var dense, sparse Mask
	for i := range dense {
		dense[i] = byte(r.Uint32())
	}
	for _, i := range []int{0, 1, 7, 9, 16, 18, 19, 34, 35, 40, 60, 63} {
		sparse[i] = 0xFF
	}
	lengths := []int{1000, 1088, 2112, 4160, 4400}
	for n := 0; n <= 300; n++ {
		lengths = append(lengths, n)
	}
	for _, m := range []*Mask{&dense, &sparse} {
		for _, n := range lengths {
			off := n % 64
			p := buf[off : off+n]
			before := string(p)
			w := []byte(before)
			for i := range min(n, len(m)) {
				w[i] |= m[i]
			}
			c := r.Uint32()
			want := crc32.Update(c, crc32.IEEETable, w)
			if got := IEEEMasked(c, p, m); got != want || string(p) != before {
				t.Fatalf("IEEEMasked(%d bytes at %d) = %#x, want %#x (span unchanged: %v)", n, off, got, want, string(p) == before)
			}
			if n < 64 {
				continue
			}
			h := r.IntN(64)
			dst := make([]byte, n)
			copy(dst, p[:h])
			if got := CopyIEEEMasked(c, dst, h, p[h:], m); got != want || string(dst) != before {
				t.Fatalf("CopyIEEEMasked(%d bytes, h %d) = %#x, want %#x (copied: %v)", n, h, got, want, string(dst) == before)
			}
		}
	}
}
