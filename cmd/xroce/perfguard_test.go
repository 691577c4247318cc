package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestGuard: --guard's bytes sit right outside the region, a write to the first
// byte after it or the last byte before it is reported with its place, and an
// untouched guard is said to be unchanged.
func TestGuard(t *testing.T) {
	for _, c := range []struct {
		name string
		hit  func(full []byte, region int)
		want string
	}{
		{"untouched", func([]byte, int) {}, ""},
		{"after the end", func(f []byte, n int) { f[4096+n] ^= 1 }, "at the region's end + 0"},
		{"before the start", func(f []byte, n int) { f[4095] = 0 }, "at the region's start - 1"},
		{"far after", func(f []byte, n int) { f[len(f)-1]++ }, "at the region's end + 4095"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			cn := &conn{o: &perfOptions{guard: 4096, out: &out}, env: &env{prov: &engine{}}}
			buf, err := cn.allocGuarded(8192)
			if err != nil || len(buf) != 8192 || cap(buf) != 8192 {
				t.Fatalf("region of %d (cap %d): %v", len(buf), cap(buf), err)
			}
			full := cn.guard[0][:4096+8192+4096] // the one allocation
			if &full[4096] != &buf[0] {
				t.Fatal("the region does not start right after the guard")
			}
			for i := range buf {
				buf[i] = 0xFF // the region itself may change
			}
			c.hit(full, len(buf))
			err = cn.checkGuard()
			if c.want == "" {
				if err != nil || out.String() != " Guard: the 4096 bytes on each side of the registered region are unchanged\n" {
					t.Fatalf("%v, %q", err, out.String())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}
