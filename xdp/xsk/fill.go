package xsk

import "unsafe"

// FillRing hands receive chunks (UMEM addresses) to the kernel. This side produces,
// the kernel consumes.
type FillRing struct {
	ring
	prod uint32 // our producer index (only this side writes it)
}

func (r *FillRing) slot(i uint32) *uint64 {
	return (*uint64)(unsafe.Add(r.entries, uintptr(i&r.mask)*8))
}

// Free returns how many addresses Put can take now.
func (r *FillRing) Free() int { return int(r.mask + 1 - (r.prod - r.consumer.Load())) }

// Put gives the kernel as many of addrs as the ring has room for and returns how
// many it took, from the start.
func (r *FillRing) Put(addrs []uint64) int {
	n := min(len(addrs), r.Free())
	for i := range n {
		*r.slot(r.prod + uint32(i)) = addrs[i]
	}
	r.prod += uint32(n)
	r.producer.Store(r.prod)
	return n
}

// NeedWakeup reports whether the kernel wants a poll or recvfrom before it takes
// more chunks (zero-copy drivers only; see ring.needWakeup).
func (r *FillRing) NeedWakeup() bool { return r.needWakeup() }
