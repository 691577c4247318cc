// Package testlink holds transport.Link doubles shared by the tests of several
// packages.
package testlink

import "github.com/xroce/xroce/transport"

// Reserving is a link that records the frames of every ReserveRx call
// (transport.RxReserver), as the AF_XDP link takes them, over any other link.
type Reserving struct {
	transport.Link
	Frames []int // each ReserveRx's argument, in order
}

// ReserveRx implements transport.RxReserver by recording frames.
func (l *Reserving) ReserveRx(frames int) { l.Frames = append(l.Frames, frames) }

var _ transport.RxReserver = (*Reserving)(nil)
