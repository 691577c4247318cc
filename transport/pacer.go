package transport

import "time"

// pacer spaces a QP's departures at its DCQCN rate (dcqcn.go): a token bucket of
// paceBurst bytes filled at the rate. A packet may leave when the bucket is not in
// debt; leaving costs its frame's bytes. The burst lets the engine, which sends in
// passes and wakes on timers with some delay, keep the rate on average.
type pacer struct {
	next   time.Time // when the bucket is out of debt: the next packet may leave
	wakeAt time.Time // set while a packet waits for next: the QP's timer
}

// paceBurst is the bucket's depth in bytes: 16 frames of path MTU 1024.
const paceBurst = 16 * 1024

// txTime returns how long n bytes take at rate bits/s.
func txTime(n int, rate int64) time.Duration {
	return time.Duration(int64(n) * 8 * int64(time.Second) / rate)
}

// ready reports whether a packet may leave at now; if not, it sets wakeAt.
func (p *pacer) ready(now time.Time) bool {
	if now.Before(p.next) {
		p.wakeAt = p.next
		return false
	}
	p.wakeAt = time.Time{}
	return true
}

// charge takes n bytes leaving at now out of the bucket, which holds at most
// paceBurst bytes' worth of credit.
func (p *pacer) charge(now time.Time, n int, rate int64) {
	start := now.Add(-txTime(paceBurst, rate))
	if p.next.After(start) {
		start = p.next
	}
	p.next = start.Add(txTime(n, rate))
}
