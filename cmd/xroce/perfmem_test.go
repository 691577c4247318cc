package main

import "testing"

// TestMemoryError: a test buffer larger than the memory available is refused with
// the sizes that made it (a fresh user's -s 1073741824 -q 64 ended in the Go
// runtime's "out of memory" and a stack trace); one that fits is not.
func TestMemoryError(t *testing.T) {
	err := memoryError(64*2<<30, 23<<30+1<<29, 64, 1<<30)
	want := "the test buffer would take 128.0 GiB (64 QPs × 2 × 1.0 GiB, as perftest sizes it) and this machine has 23.5 GiB available (MemAvailable): use a smaller -s or -q"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
	if err := memoryError(2*65536, 1<<30, 1, 65536); err != nil {
		t.Errorf("128 KiB of 1 GiB: %v", err)
	}
	if avail, ok := memAvailable(); !ok || avail <= 0 {
		t.Errorf("memAvailable: %d, %v", avail, ok)
	}
	for n, want := range map[int64]string{100: "100 bytes", 1536: "1.5 KiB", 3 << 20: "3.0 MiB"} {
		if got := bytesText(n); got != want {
			t.Errorf("bytesText(%d) = %q, want %q", n, got, want)
		}
	}
}
