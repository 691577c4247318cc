package main

import (
	"strings"
	"testing"
	"time"
)

// TestRNRWatch: RNR NAKs at every look for rnrSpell with no SEND completing are
// logged once, naming the spell and the count; RNR NAKs while SENDs complete (a
// receiver only slower than its sender: RC's flow control) are not, however long.
func TestRNRWatch(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	var slow rnrWatch
	for i := 1; i <= 20; i++ { // 20 s of RNR NAKs, SENDs completing between them
		if line := slow.look(uint64(100*i), uint64(50*i), t0.Add(time.Duration(i)*time.Second)); line != "" {
			t.Fatalf("look %d, SENDs completing: %q", i, line)
		}
	}
	stuck := rnrWatch{rnr: 7, sends: 3}
	var lines []string
	for i := 1; i <= 8; i++ {
		if line := stuck.look(uint64(7+10*i), 3, t0.Add(time.Duration(i)*time.Second)); line != "" {
			lines = append(lines, line)
		}
	}
	// The spell starts at the first look that saw the counter move (1 s) and is
	// logged when it has lasted rnrSpell (6 s), counting from the spell's start.
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "RNR NAKs for 5s without a pause and no SEND completed (rcvd_rnr_err +60)") {
		t.Fatalf("stuck peer: %q", lines)
	}
}
