package xsk

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// RxRing delivers received descriptors. The kernel produces, this side consumes.
// With XDP_USE_SG a frame longer than a chunk arrives as several descriptors, every
// one but the last with XDP_PKT_CONTD in Options; the kernel publishes all of a
// frame's descriptors together.
type RxRing struct {
	ring
	cons uint32 // our consumer index
}

// Available returns how many descriptors the kernel has published and this side has
// not released.
func (r *RxRing) Available() int { return int(r.producer.Load() - r.cons) }

// Desc returns the i-th unreleased descriptor, i < Available().
func (r *RxRing) Desc(i int) unix.XDPDesc {
	return *(*unix.XDPDesc)(unsafe.Add(r.entries, uintptr((r.cons+uint32(i))&r.mask)*unsafe.Sizeof(unix.XDPDesc{})))
}

// Release gives the first n unreleased slots back to the kernel. The chunks the
// descriptors point to stay the caller's until it puts them on the fill ring.
func (r *RxRing) Release(n int) {
	r.cons += uint32(n)
	r.consumer.Store(r.cons)
}
