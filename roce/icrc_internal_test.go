package roce

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestICRCInPlace: the one-pass ICRC equals the gathered one on IPv4 and IPv6
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
			if got := icrcInPlace(f, l3, v6, end); got != want {
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
		if got := icrcInPlace(frame, l3, v6, end); got != want || !bytes.Equal(frame, before) {
			t.Fatalf("in place %#08x, gathered %#08x, frame unchanged %v", got, want, bytes.Equal(frame, before))
		}
	})
}
