package transport

// ring is a FIFO of T that reuses its storage: push at the back, pop at the front,
// index from the front. Its storage is always a power of two long (16, doubled when
// full), so an index wraps with a mask: the engine indexes its rings for every
// frame, and a division costs tens of cycles.
type ring[T any] struct {
	buf        []T
	head, size int
}

func (r *ring[T]) len() int { return r.size }

func (r *ring[T]) at(i int) *T { return &r.buf[(r.head+i)&(len(r.buf)-1)] }

func (r *ring[T]) push(v T) {
	if r.size == len(r.buf) {
		n := make([]T, max(16, 2*len(r.buf)))
		for i := 0; i < r.size; i++ {
			n[i] = *r.at(i)
		}
		r.buf, r.head = n, 0
	}
	r.buf[(r.head+r.size)&(len(r.buf)-1)] = v
	r.size++
}

func (r *ring[T]) popFront() {
	var zero T
	r.buf[r.head] = zero
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.size--
}

func (r *ring[T]) clear() {
	for r.size > 0 {
		r.popFront()
	}
}
