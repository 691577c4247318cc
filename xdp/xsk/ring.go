package xsk

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ring is what the four AF_XDP rings share: an area mmapped from the socket holding
// the producer and consumer indices, a flags word and the entries. The indices are
// free-running uint32 counters; an entry lives at index&mask. The kernel reads and
// writes the indices with acquire/release ordering (smp_load_acquire and
// smp_store_release in net/xdp/xsk_queue.h), so this side uses sync/atomic: an
// atomic load of the other side's index happens before reading the entries it
// published, and entries are written before the atomic store that publishes them.
type ring struct {
	mem      []byte
	producer *atomic.Uint32
	consumer *atomic.Uint32
	flags    *atomic.Uint32
	entries  unsafe.Pointer
	mask     uint32
}

// mapRing mmaps the ring of n entries of entrySize bytes at page offset pgoff.
func mapRing(fd int, name string, pgoff int64, off unix.XDPRingOffset, n uint32, entrySize uintptr) (ring, error) {
	size := int(off.Desc) + int(n)*int(entrySize)
	mem, err := unix.Mmap(fd, pgoff, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return ring{}, fmt.Errorf("mmap of the %s ring (%d bytes): %w", name, size, err)
	}
	base := unsafe.Pointer(&mem[0])
	return ring{
		mem:      mem,
		producer: (*atomic.Uint32)(unsafe.Add(base, off.Producer)),
		consumer: (*atomic.Uint32)(unsafe.Add(base, off.Consumer)),
		flags:    (*atomic.Uint32)(unsafe.Add(base, off.Flags)),
		entries:  unsafe.Add(base, off.Desc),
		mask:     n - 1,
	}, nil
}

// needWakeup reports whether the kernel asks to be woken (sendto for TX, poll or
// recvfrom for fill) before it looks at the ring again; the flag is only maintained
// when the socket was bound with XDP_USE_NEED_WAKEUP.
func (r *ring) needWakeup() bool { return r.flags.Load()&unix.XDP_RING_NEED_WAKEUP != 0 }

func (r *ring) unmap() error {
	if r.mem == nil {
		return nil
	}
	err := unix.Munmap(r.mem)
	r.mem = nil
	return err
}
