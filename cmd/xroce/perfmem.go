package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// memAvailable returns the kernel's estimate of the memory available for a new
// allocation without swapping, in bytes (MemAvailable in /proc/meminfo, Linux
// Documentation/filesystems/proc.rst), and false where it cannot be read.
func memAvailable() (int64, bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		rest, ok := strings.CutPrefix(s.Text(), "MemAvailable:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		return kb << 10, err == nil
	}
	return 0, false
}

// checkMemory refuses a test buffer of n bytes that the machine does not have:
// allocating it would end the program with the Go runtime's "out of memory" and a
// stack trace, or bring the OOM killer. The message names the sizes that made it.
func (c *conn) checkMemory(n int) error {
	avail, ok := memAvailable()
	if !ok {
		return nil
	}
	return memoryError(int64(n), avail, c.o.qps, c.half)
}

// memoryError is checkMemory's verdict on n bytes for qps QPs of 2 × half bytes each
// when avail bytes are available.
func memoryError(n, avail int64, qps, half int) error {
	if n <= avail {
		return nil
	}
	return fmt.Errorf("the test buffer would take %s (%d QPs × 2 × %s, as perftest sizes it) and this machine has %s available (MemAvailable): use a smaller -s or -q",
		bytesText(n), qps, bytesText(int64(half)), bytesText(avail))
}

// bytesText prints a size in bytes as GiB, MiB or KiB with one decimal, or bytes.
func bytesText(n int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{30, "GiB"}, {20, "MiB"}, {10, "KiB"}} {
		if n >= 1<<u.shift {
			return fmt.Sprintf("%.1f %s", float64(n)/float64(int64(1)<<u.shift), u.name)
		}
	}
	return fmt.Sprintf("%d bytes", n)
}
