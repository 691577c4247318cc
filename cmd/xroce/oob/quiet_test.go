package oob

import (
	"net"
	"testing"
	"time"
)

// TestQuietOncePerSilence: once the test has begun, a step that sees no sign of
// life for QuietAfter calls Quiet once with the silence and the step's timeout;
// life resets it, and the next silence that long is named again. Before Connect
// returns (the handshake: no frames are due yet), silence is not named.
func TestQuietOncePerSilence(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	s := NewSession(a, false, BW, time.Minute)
	var alive bool
	s.Alive = func() bool { return alive }
	type call struct{ silent, limit time.Duration }
	var calls []call
	s.Quiet = func(silent, limit time.Duration) { calls = append(calls, call{silent, limit}) }
	t0 := time.Now()
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	lv := &life{s: s, last: t0}
	lv.tick(at(10 * time.Second))
	if len(calls) != 0 {
		t.Fatalf("before Connect: Quiet called %v", calls)
	}
	s.begun = true
	lv = &life{s: s, last: t0}
	for _, d := range []time.Duration{time.Second, 4 * time.Second} {
		if lv.tick(at(d)) || len(calls) != 0 {
			t.Fatalf("silent %v: Quiet called %v", d, calls)
		}
	}
	lv.tick(at(5 * time.Second))
	lv.tick(at(6 * time.Second))
	if want := []call{{5 * time.Second, time.Minute}}; len(calls) != 1 || calls[0] != want[0] {
		t.Fatalf("after 5 s and 6 s of silence: calls %v, want %v", calls, want)
	}
	alive = true
	if !lv.tick(at(7 * time.Second)) {
		t.Fatal("Alive said yes, tick said no")
	}
	alive = false
	lv.tick(at(11 * time.Second))
	lv.tick(at(12 * time.Second))
	if want := (call{5 * time.Second, time.Minute}); len(calls) != 2 || calls[1] != want {
		t.Fatalf("a second silence of 5 s: calls %v, want a second %v", calls, want)
	}
}
