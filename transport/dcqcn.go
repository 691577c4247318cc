package transport

import "time"

// The DCQCN reaction point: a QP's sending rate (Zhu et al., "Congestion Control for
// Large-Scale RDMA Deployments", SIGCOMM 2015, §3.1 and Figure 7; parameters and
// their semantics as mlx5 names them, DCQCNParams).
//
//   - A QP sends at line rate, with no limiter, until its first CNP. The first CNP
//     sets the current rate Rc and the target rate Rt to MaxRate
//     (rate_to_set_on_first_cnp 0) and alpha to InitialAlpha.
//   - A cut: Rc ← max(Rc − Rc·α/2^Gd, Rc·MinDecFac/100, MinRate), the paper's
//     Rc(1 − α/2). Before it Rt ← Rc, but only if the rate-increase timer fired
//     since the last cut (mlx5's clamp_tgt_rate 0, clamp_tgt_rate_after_time_inc 1):
//     a burst of CNPs keeps the target the rate had before it. Cuts are at least
//     ReducePeriod apart; CNPs in between make one cut at the period's end. A cut
//     restarts the increase timer and the byte counter and zeroes their counts T
//     and BC.
//   - Alpha is updated every AlphaPeriod: α ← α·G/1024, plus (1024 − G) when a CNP
//     came in the period (dce_tcp_g, dce_tcp_rtt); α is in 1/1024.
//   - An increase event: the timer fires (every TimeReset, T++) or ByteReset bytes
//     have been sent (BC++). Then, with F = Threshold: fast recovery while
//     max(T, BC) ≤ F (the first F events), Rc ← (Rt + Rc)/2; hyper increase when
//     min(T, BC) > F, Rt ← Rt + (min(T, BC) − F)·HAIRate, Rc ← (Rt + Rc)/2;
//     additive increase otherwise, Rt ← Rt + AIRate, Rc ← (Rt + Rc)/2. Rt is at
//     most MaxRate; the halving rounds up, so Rc reaches Rt. When Rc reaches
//     MaxRate the limiter is released: the QP sends at line rate again.
//
// The pacer (pacer.go) spaces the QP's departures at Rc while the limiter is on.

// dcqcn is one QP's reaction point state.
type dcqcn struct {
	active     bool      // a limiter is on: a CNP came and the rate has not recovered
	rc, rt     int64     // current and target rate, bits/s
	alpha      int       // in 1/1024
	alphaAt    time.Time // start of the current alpha period
	cnpSeen    bool      // a CNP came in the current alpha period
	lastCut    time.Time // when the last cut was made
	cutPending bool      // a CNP came less than ReducePeriod after the last cut
	t, bc      int       // increase events of the timer and of the byte counter since the last cut
	timerIncs  int       // of them, the timer's (the target is clamped at a cut only after one)
	incAt      time.Time // the rate-increase timer's next expiry
	bytes      int       // bytes sent since the byte counter last expired
	pace       pacer
}

// cnp handles a CNP at now: the first activates the limiter, and the rate is cut
// now or at the end of the monitor period.
func (r *dcqcn) cnp(p *DCQCNParams, now time.Time) {
	if !r.active {
		*r = dcqcn{active: true, rc: p.MaxRate, rt: p.MaxRate, alpha: p.InitialAlpha, alphaAt: now}
		r.cut(p, now)
		r.cnpSeen = true
		return
	}
	r.updateAlpha(p, now)
	r.cnpSeen = true
	if now.Sub(r.lastCut) < p.ReducePeriod {
		r.cutPending = true
		return
	}
	r.cut(p, now)
}

// cut reduces the rate by alpha (see above) and restarts the increase counters.
func (r *dcqcn) cut(p *DCQCNParams, now time.Time) {
	if r.timerIncs > 0 {
		r.rt = r.rc
	}
	rc := r.rc - r.rc*int64(r.alpha)>>p.Gd
	rc = max(rc, r.rc*int64(p.MinDecFac)/100, p.MinRate)
	r.rc = rc
	r.lastCut, r.cutPending = now, false
	r.t, r.bc, r.timerIncs, r.bytes = 0, 0, 0, 0
	r.incAt = now.Add(p.TimeReset)
}

// updateAlpha applies the alpha updates of the periods that ended by now. After the
// first, a period with no CNP only decays alpha; once it is 0 the rest change
// nothing.
func (r *dcqcn) updateAlpha(p *DCQCNParams, now time.Time) {
	n := int64(now.Sub(r.alphaAt) / p.AlphaPeriod)
	if n <= 0 {
		return
	}
	r.alphaAt = r.alphaAt.Add(time.Duration(n) * p.AlphaPeriod)
	for i := int64(0); i < n && (r.alpha > 0 || r.cnpSeen); i++ {
		r.alpha = r.alpha * p.G / 1024
		if r.cnpSeen {
			r.alpha += 1024 - p.G
			r.cnpSeen = false
		}
	}
	r.cnpSeen = false
}

// sent counts bytes the QP sent: the byte counter's increase events.
func (r *dcqcn) sent(p *DCQCNParams, now time.Time, n int) {
	if !r.active {
		return
	}
	r.pace.charge(now, n, r.rc)
	r.bytes += n
	for r.active && r.bytes >= p.ByteReset {
		r.bytes -= p.ByteReset
		r.bc++
		r.increase(p)
	}
}

// timers runs the reaction point's timers due at now: a pending cut at the end of
// the monitor period, and the rate-increase timer.
func (r *dcqcn) timers(p *DCQCNParams, now time.Time) {
	if !r.active {
		return
	}
	if at := r.lastCut.Add(p.ReducePeriod); r.cutPending && !now.Before(at) {
		r.updateAlpha(p, at)
		r.cut(p, at)
	}
	for r.active && !now.Before(r.incAt) {
		r.incAt = r.incAt.Add(p.TimeReset)
		r.t++
		r.timerIncs++
		r.increase(p)
	}
}

// increase is one increase event: fast recovery, additive or hyper increase.
func (r *dcqcn) increase(p *DCQCNParams) {
	f := p.Threshold
	switch {
	case max(r.t, r.bc) <= f: // fast recovery
	case min(r.t, r.bc) > f:
		r.rt += int64(min(r.t, r.bc)-f) * p.HAIRate
	default:
		r.rt += p.AIRate
	}
	r.rt = min(r.rt, p.MaxRate)
	r.rc = (r.rt + r.rc + 1) / 2
	if r.rc >= p.MaxRate {
		*r = dcqcn{} // recovered: the limiter is released
	}
}

// deadline returns the earliest time the reaction point needs the engine: a pending
// cut, the increase timer, or the pacer's next departure; zero when inactive.
func (r *dcqcn) deadline(p *DCQCNParams) time.Time {
	if !r.active {
		return time.Time{}
	}
	t := earliest(r.incAt, r.pace.wakeAt)
	if r.cutPending {
		t = earliest(t, r.lastCut.Add(p.ReducePeriod))
	}
	return t
}
