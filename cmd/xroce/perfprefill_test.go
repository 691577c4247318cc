package main

import (
	"bytes"
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestPrefill: after prefill every page of a fresh 16 MiB buffer is resident
// (mincore), so a test's first pass over it faults nothing, and every byte is
// zero, also over a buffer that held something else and is no multiple of 8 long.
func TestPrefill(t *testing.T) {
	buf := make([]byte, 16<<20)
	prefill(buf)
	page := os.Getpagesize()
	// The whole pages inside buf (mincore takes a page-aligned address).
	off := (page - int(uintptr(unsafe.Pointer(&buf[0])))%page) % page
	region := buf[off : off+(len(buf)-off)/page*page]
	vec := make([]byte, len(region)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&region[0])), uintptr(len(region)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	for i, v := range vec {
		if v&1 == 0 {
			t.Fatalf("page %d of %d is not resident after prefill", i, len(vec))
		}
	}
	a := bytes.Repeat([]byte{0xAB}, 4099)
	prefill(a)
	if !bytes.Equal(a, make([]byte, len(a))) {
		t.Fatal("prefill left bytes that are not zero")
	}
}
