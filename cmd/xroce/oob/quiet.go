package oob

import "time"

// QuietAfter is how long a step may wait, once the test has begun, with no sign of
// life from the peer (Alive) before the session calls Quiet: the tools say on
// stderr that the peer went silent instead of waiting out the step's timeout
// without a word (a peer stopped with SIGSTOP, hung or cut off).
const QuietAfter = 5 * time.Second

// life follows one step's signs of life from the peer.
type life struct {
	s    *Session
	last time.Time // the step's start, or the last tick at which Alive said yes
	told bool      // Quiet was called for the current silence
}

func (s *Session) watchLife() *life { return &life{s: s, last: time.Now()} }

// tick asks Alive whether the peer showed life since the last tick. When it did
// not for QuietAfter after the test began (Connect returned), it calls Quiet
// once, with the silence so far and the step's timeout (0: none).
func (l *life) tick(now time.Time) bool {
	s := l.s
	if s.Alive == nil {
		return false
	}
	if s.Alive() {
		l.last, l.told = now, false
		return true
	}
	if silent := now.Sub(l.last); s.begun && s.Quiet != nil && !l.told && silent >= QuietAfter {
		l.told = true
		s.Quiet(silent, s.timeout)
	}
	return false
}
