package xsk

import "unsafe"

// CompletionRing returns transmitted chunks (UMEM addresses) from the kernel. The
// kernel produces, this side consumes. The order is the kernel's: chunks come back
// when their frame has been sent, which need not be the order they were submitted
// in, so callers free the addresses they read rather than counting.
type CompletionRing struct {
	ring
	cons uint32 // our consumer index
}

// Get appends the completed addresses to out, releases their slots and returns out.
func (r *CompletionRing) Get(out []uint64) []uint64 {
	n := r.producer.Load() - r.cons
	for i := range n {
		out = append(out, *(*uint64)(unsafe.Add(r.entries, uintptr((r.cons+i)&r.mask)*8)))
	}
	r.cons += n
	r.consumer.Store(r.cons)
	return out
}
