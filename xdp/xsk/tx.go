package xsk

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// TxRing takes descriptors to transmit. This side produces, the kernel consumes. A
// frame over several chunks is several descriptors, XDP_PKT_CONTD on all but the
// last (the socket must be bound with XDP_USE_SG).
type TxRing struct {
	ring
	prod uint32 // our producer index
}

// Free returns how many descriptors Put can take now.
func (r *TxRing) Free() int { return int(r.mask + 1 - (r.prod - r.consumer.Load())) }

// Pending returns how many submitted descriptors the kernel has not taken yet.
func (r *TxRing) Pending() int { return int(r.prod - r.consumer.Load()) }

// Put submits as many of descs as the ring has room for and returns how many, from
// the start. Callers that chain descriptors check Free first so that a frame is
// submitted whole.
func (r *TxRing) Put(descs []unix.XDPDesc) int {
	n := min(len(descs), r.Free())
	for i := range n {
		*(*unix.XDPDesc)(unsafe.Add(r.entries, uintptr((r.prod+uint32(i))&r.mask)*unsafe.Sizeof(unix.XDPDesc{}))) = descs[i]
	}
	r.prod += uint32(n)
	r.producer.Store(r.prod)
	return n
}

// NeedWakeup reports whether the kernel wants a sendto before it transmits what is
// on the ring. Copy mode always wants one; without XDP_USE_NEED_WAKEUP at bind the
// flag is never set and callers kick unconditionally.
func (r *TxRing) NeedWakeup() bool { return r.needWakeup() }
