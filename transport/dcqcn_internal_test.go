package transport

import (
	"testing"
	"time"
)

// wantRate checks the reaction point's current and target rate and alpha.
func wantRate(t *testing.T, what string, r *dcqcn, rc, rt int64, alpha int) {
	t.Helper()
	if !r.active || r.rc != rc || r.rt != rt || r.alpha != alpha {
		t.Fatalf("%s: active %v Rc %d Rt %d alpha %d, want Rc %d Rt %d alpha %d", what, r.active, r.rc, r.rt, r.alpha, rc, rt, alpha)
	}
}

// TestDCQCNRateMachine drives one QP's reaction point with mlx5's default
// parameters through every rule of dcqcn.go, with the exact integer values the
// paper's formulas give (alpha in 1/1024, rates in bits/s):
//   - the first CNP: Rc = 10^10 − 10^10·1023/2^11 = 5004882813, Rt stays 10^10;
//   - a CNP 2 µs later waits for the 4 µs monitor period; alpha over periods 0-3
//     (CNP, none, CNP, none): 1023 → 1023 → 1018 → 1018 → 1013, and the cut at 4 µs
//     gives Rc = 2529323102;
//   - the increase timer 300 µs after the cut: fast recovery, Rc = ⌈(Rt + Rc)/2⌉;
//   - a CNP after a timer increase sets Rt = Rc before it cuts; alpha has decayed
//     over 301 quiet periods to 163;
//   - the byte counter (32767 bytes): fast recovery, then additive increase (+5 Mb/s);
//     the timer then: additive, then hyper increase (+50 Mb/s) once both T and BC
//     exceed F = 1;
//   - at the line rate the limiter is released.
func TestDCQCNRateMachine(t *testing.T) {
	p := DefaultDCQCN()
	t0 := time.Unix(1796000000, 0)
	at := func(us int) time.Time { return t0.Add(time.Duration(us) * time.Microsecond) }
	var r dcqcn
	r.cnp(&p, t0)
	wantRate(t, "first CNP", &r, 5004882813, 10000000000, 1023)
	if d := r.deadline(&p); !d.Equal(at(300)) {
		t.Fatalf("deadline %v after the first cut, want the increase timer at 300 µs", d.Sub(t0))
	}
	r.cnp(&p, at(2))
	wantRate(t, "a CNP within the monitor period: no cut yet", &r, 5004882813, 10000000000, 1018)
	if d := r.deadline(&p); !d.Equal(at(4)) {
		t.Fatalf("deadline %v with a cut pending, want 4 µs", d.Sub(t0))
	}
	r.timers(&p, at(4))
	wantRate(t, "the pending cut at 4 µs", &r, 2529323102, 10000000000, 1013)
	r.timers(&p, at(303))
	wantRate(t, "before the increase timer", &r, 2529323102, 10000000000, 1013)
	r.timers(&p, at(304))
	wantRate(t, "timer: fast recovery", &r, 6264661551, 10000000000, 1013)
	r.cnp(&p, at(305))
	wantRate(t, "a CNP after a timer increase clamps the target", &r, 5766058118, 6264661551, 163)
	r.sent(&p, at(306), 32766)
	wantRate(t, "one byte short of the byte counter", &r, 5766058118, 6264661551, 163)
	r.sent(&p, at(306), 1)
	wantRate(t, "byte counter: fast recovery", &r, 6015359835, 6264661551, 163)
	r.sent(&p, at(307), 32767)
	wantRate(t, "byte counter: additive increase", &r, 6142510693, 6269661551, 163)
	r.timers(&p, at(605))
	wantRate(t, "timer: additive increase", &r, 6208586122, 6274661551, 163)
	r.timers(&p, at(905))
	wantRate(t, "timer: hyper increase", &r, 6266623837, 6324661551, 163)
	for us := 1205; r.active; us += 300 {
		if us > 1_000_000 {
			t.Fatal("the rate never recovered")
		}
		r.timers(&p, at(us))
	}
	if !r.deadline(&p).IsZero() {
		t.Fatal("a released limiter keeps a deadline")
	}
}

// TestPacerSpacing: at 100 Mb/s a 1082-byte frame takes 86.56 µs; the bucket lets
// 16 KiB go at once after a quiet spell, then frames leave one frame time apart.
func TestPacerSpacing(t *testing.T) {
	t0 := time.Unix(1796000000, 0)
	var p pacer
	const rate, frame = 100_000_000, 1082
	n := 0
	for p.ready(t0) {
		p.charge(t0, frame, rate)
		n++
	}
	if n != 16 { // 15 frames leave the bucket short of 16 KiB of debt, the 16th puts it over
		t.Fatalf("%d frames at once, want 16", n)
	}
	if want := t0.Add(16*86560*time.Nanosecond - 1310720*time.Nanosecond); !p.wakeAt.Equal(want) {
		t.Fatalf("next departure at %v, want %v", p.wakeAt.Sub(t0), want.Sub(t0))
	}
	next := p.wakeAt
	if p.ready(next.Add(-time.Nanosecond)) || !p.ready(next) {
		t.Fatalf("the pacer does not release the next frame at exactly %v", next.Sub(t0))
	}
	p.charge(next, frame, rate)
	if p.ready(next.Add(86559*time.Nanosecond)) || !p.ready(next.Add(86560*time.Nanosecond)) {
		t.Fatal("frames do not leave one frame time (86.56 µs) apart")
	}
}

// FuzzDCQCN drives a reaction point with arbitrary sequences of CNPs, timer runs
// and bytes sent at arbitrary times. Whatever comes, an active limiter keeps
// MinRate ≤ Rc ≤ Rt ≤ MaxRate and 0 ≤ alpha ≤ 1023, a released one has no deadline,
// and an active one always has one (its increase timer) in the future of its last
// cut.
func FuzzDCQCN(f *testing.F) {
	f.Add([]byte{0, 0, 0, 2, 1, 200, 2, 9, 40, 1, 255, 0})
	f.Add([]byte{0, 1, 0, 1, 0, 1, 0, 1, 1, 255, 1, 255, 1, 255})
	f.Fuzz(func(t *testing.T, data []byte) {
		p := DefaultDCQCN()
		p.MaxRate = 100_000_000
		now := time.Unix(1796000000, 0)
		var r dcqcn
		for len(data) >= 2 {
			op, arg := data[0]%3, int(data[1])
			data = data[2:]
			now = now.Add(time.Duration(arg) * time.Microsecond)
			switch op {
			case 0:
				r.cnp(&p, now)
			case 1:
				r.timers(&p, now)
			case 2:
				r.sent(&p, now, arg*257)
			}
			if !r.active {
				if !r.deadline(&p).IsZero() || r != (dcqcn{}) {
					t.Fatalf("released limiter with state %+v", r)
				}
				continue
			}
			if r.rc < p.MinRate || r.rc > r.rt || r.rt > p.MaxRate || r.alpha < 0 || r.alpha > 1023 {
				t.Fatalf("Rc %d Rt %d alpha %d", r.rc, r.rt, r.alpha)
			}
			if d := r.deadline(&p); d.IsZero() || !d.After(r.lastCut) {
				t.Fatalf("deadline %v, last cut %v", d, r.lastCut)
			}
		}
	})
}
