package daemon

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/xroce/xroce/cmd/xroce/icmp"
)

// TestICMPRuns: ICMP port unreachable about one destination ends its connection
// attempts once the errors have come for unreachableFor (two REQs refused, 6.4 s
// apart), not at the first; an attempt 20 s after an earlier one begins a new run
// (it used to be ended at its first error, "for 20.2s"), and so does one made
// right after an ended one; each message counts from its own first error.
func TestICMPRuns(t *testing.T) {
	dst := netip.MustParseAddr("10.79.0.2")
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	var at time.Time
	var ended []string
	w := newICMPWatch(func(d netip.Addr, err error) int {
		ended = append(ended, err.Error())
		return 1
	}, func(string, ...any) {})
	w.now = func() time.Time { return at }
	report := func(after time.Duration) int {
		at = t0.Add(after)
		w.report(icmp.Report{Kind: icmp.PortUnreachable, From: dst, Dst: dst})
		return len(ended)
	}
	if n := report(0); n != 0 {
		t.Fatalf("ended at the first error: %v", ended)
	}
	if n := report(6400 * time.Millisecond); n != 1 || !strings.Contains(ended[0], "with ICMP port unreachable for 6.4s") {
		t.Fatalf("after two REQs refused 6.4 s apart: %v", ended)
	}
	if n := report(26400 * time.Millisecond); n != 1 {
		t.Fatalf("a new attempt 20 s later ended at its first error: %v", ended)
	}
	if n := report(32800 * time.Millisecond); n != 2 || !strings.Contains(ended[1], "for 6.4s") {
		t.Fatalf("the new attempt's second refused REQ: %v", ended)
	}
	// An attempt made right after the one just ended counts its own errors too.
	if n := report(33000 * time.Millisecond); n != 2 {
		t.Fatalf("an attempt 0.2 s after an ended one ended at its first error: %v", ended)
	}
	if n := report(39400 * time.Millisecond); n != 3 || !strings.Contains(ended[2], "for 6.4s") {
		t.Fatalf("its second refused REQ: %v", ended)
	}
}
