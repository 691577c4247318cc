package xdp

// The receive chunks' working set (docs/afxdp.md, Sizing).
//
// The kernel takes receive chunks from the fill ring in the order they were put
// there, so a fill ring holding all RxFrames chunks makes every frame land in the
// chunk that has waited longest: the link cycles through all 8 MiB of them. On the
// development VM (a nested guest) the first access to each page costs about 10 µs
// however it was populated (MAP_POPULATE leaves it to the first touch; measured:
// 8.5-9.5 µs a page), and both the kernel, through its own mapping of the UMEM, and
// the engine pay it: write_lat's half round trip was 30-60 µs for its first 1024
// iterations (2048 frames received) and 9-12 µs after them, and a raw ping-pong's
// round trip 2-3 times longer for its first 2048 frames. Touching every page when
// the link opens paid only the engine's share, for 35 ms.
//
// So in copy mode the fill ring starts with fillStart chunks and the others wait in
// rxSpare. A chunk Recv hands out goes back to the fill ring at the next Recv, so the
// kernel always holds fillStart: a ping-pong keeps landing in the same few chunks.
// The first time a Recv finds growAt frames or more waiting on the RX ring (a stream,
// or an engine that was descheduled), the fill ring gets every spare chunk, as it had
// before: a link that streams once buffers as much as ever. Until then a burst of
// more than fillStart frames that the engine does not read in time is dropped
// (counted in the socket's rx_fill_ring_empty_descs) and retransmitted. Zero-copy
// drivers fill their own descriptor rings (hundreds of entries) from the fill ring,
// so they get every chunk at once.
const (
	fillStart = 256
	growAt    = 16
)

// initFill gives the kernel the first receive chunks and keeps the rest in rxSpare.
func (q *queue) initFill() {
	n := RxFrames
	if !q.xsk.ZeroCopy() {
		n = fillStart
	}
	fill := make([]uint64, RxFrames)
	for i := range fill {
		fill[i] = uint64(i) * FrameSize
	}
	q.rxSpare = fill[n:]
	q.rxRefill = fill[:n:n]
	q.refill(0)
}

// refill gives back to the fill ring the chunks the last Recv handed out, and every
// spare chunk the first time avail frames wait on the RX ring (growAt or more).
func (q *queue) refill(avail int) {
	if avail >= growAt && len(q.rxSpare) > 0 {
		q.rxRefill = append(q.rxRefill, q.rxSpare...)
		q.rxSpare = nil
	}
	if len(q.rxRefill) > 0 {
		n := q.xsk.Fill.Put(q.rxRefill)
		m := copy(q.rxRefill, q.rxRefill[n:])
		q.rxRefill = q.rxRefill[:m]
	}
}

// RxWorkingSet returns how many receive chunks the kernel may fill, over all queues:
// fillStart per copy-mode queue until the link first streams, RxFrames per queue
// after it (and always in zero-copy mode).
func (l *Link) RxWorkingSet() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, q := range l.queues {
		n += RxFrames - len(q.rxSpare)
	}
	return n
}
