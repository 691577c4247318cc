package roce

import (
	"bytes"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// icrcGathered is the ICRC as the engine computed it before icrc ran in place, and
// the reference the tests hold icrc to: the masked headers copied apart into h, the
// CRC over them, then over the rest of the frame, which is only read.
func icrcGathered(h *icrcHeaders, f []byte, l3 int, v6 bool, end int) uint32 {
	copy(h[:8], ones[:])
	n := 8
	if !v6 {
		n += copy(h[n:], f[l3:l3+28]) // IPv4 header and UDP header
		h[8+1] = 0xFF                 // TOS
		h[8+8] = 0xFF                 // TTL
		h[8+10], h[8+11] = 0xFF, 0xFF // header checksum
	} else {
		n += copy(h[n:], f[l3:l3+48])             // IPv6 header and UDP header
		h[8] = ipv6First[f[l3]>>4]                // version; traffic class
		h[8+1], h[8+2], h[8+3] = 0xFF, 0xFF, 0xFF // traffic class, flow label
		h[8+7] = 0xFF                             // hop limit
	}
	h[n-2], h[n-1] = 0xFF, 0xFF // UDP checksum
	bth := l3 + n - 8
	n += copy(h[n:], f[bth:bth+12])
	h[n-12+4] = 0xFF // BTH byte 4: FECN, BECN, reserved
	c := crc32.Update(0, crc32.IEEETable, h[:n])
	return crc32.Update(c, crc32.IEEETable, f[bth+12:end]) // ext headers, payload, pad
}

// icrcHeaders holds the masked headers the ICRC covers: the LRH's stand-in, an IPv6
// (or IPv4) header, the UDP header and the BTH.
type icrcHeaders [8 + 40 + 8 + 12]byte

// ipv6First[v] is an IPv6 header's first byte with version v and the traffic class's
// top nibble masked to ones.
var ipv6First = [16]byte{0x0F, 0x1F, 0x2F, 0x3F, 0x4F, 0x5F, 0x6F, 0x7F, 0x8F, 0x9F, 0xAF, 0xBF, 0xCF, 0xDF, 0xEF, 0xFF}

// TestICRCInPlace: the one-pass ICRC (icrc) equals the gathered one on IPv4 and IPv6
// frames of every length from the bare headers to a PMTU-4096 payload and beyond,
// and leaves the frame as it found it.
func TestICRCInPlace(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, v6 := range []bool{false, true} {
		l3 := 14
		hdr := 20 + 8 + 12
		if v6 {
			hdr = 40 + 8 + 12
		}
		for _, n := range []int{0, 1, 4, 15, 16, 17, 63, 64, 65, 100, 1024, 2048, 4096, 4100} {
			f := make([]byte, l3+hdr+n+4)
			for i := range f {
				f[i] = byte(r.Uint32())
			}
			before := bytes.Clone(f)
			end := len(f) - 4
			var h icrcHeaders
			want := icrcGathered(&h, f, l3, v6, end)
			if got := icrc(f, l3, v6, end); got != want {
				t.Errorf("v6 %v, %d bytes after the BTH: %#08x, want %#08x", v6, n, got, want)
			}
			if !bytes.Equal(f, before) {
				t.Errorf("v6 %v, %d bytes after the BTH: the frame changed", v6, n)
			}
		}
	}
}

// FuzzICRCInPlace: for any frame bytes and layout the two ways agree and the frame
// is left unchanged.
func FuzzICRCInPlace(f *testing.F) {
	f.Add(make([]byte, 100), false)
	f.Add(make([]byte, 200), true)
	f.Fuzz(func(t *testing.T, frame []byte, v6 bool) {
		hdr := 20 + 8 + 12
		if v6 {
			hdr = 40 + 8 + 12
		}
		const l3 = 14
		if len(frame) < l3+hdr+4 {
			return
		}
		before := bytes.Clone(frame)
		end := len(frame) - 4
		var h icrcHeaders
		want := icrcGathered(&h, frame, l3, v6, end)
		if got := icrc(frame, l3, v6, end); got != want || !bytes.Equal(frame, before) {
			t.Fatalf("in place %#08x, gathered %#08x, frame unchanged %v", got, want, bytes.Equal(frame, before))
		}
	})
}

// TestICRCNoAlloc: the ICRC allocates nothing, on an ACK's IPv4 span (52 bytes,
// under one 64-byte register: the mask's rest goes with the last bytes) and on a
// PMTU-1024 frame's.
func TestICRCNoAlloc(t *testing.T) {
	for _, payload := range []int{4, 1024} { // the AETH's 4 bytes; a full payload
		f := make([]byte, 14+20+8+12+payload+4)
		end := len(f) - 4
		if n := testing.AllocsPerRun(100, func() { icrc(f, 14, false, end) }); n != 0 {
			t.Errorf("%d bytes after the BTH: %v allocations per ICRC, want 0", payload, n)
		}
	}
}
