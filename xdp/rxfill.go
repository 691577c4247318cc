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
// kernel always holds the working set: a ping-pong keeps landing in the same few
// chunks. The working set doubles (from rxSpare) whenever a Recv finds half of it or
// more waiting on the RX ring: the engine is that far behind, and a longer delay
// would leave the kernel no chunk to fill (a frame then is dropped, counted in the
// socket's rx_fill_ring_empty_descs, and retransmitted).
//
// It grows no further than that because a stream is faster in a small working set
// too: the engine reads every frame it receives (the ICRC, the payload it places),
// which takes the frame's cache lines from the CPU that wrote them (on veth, the
// sender's: its softirq runs the XDP program and copies into the UMEM), and that
// CPU's next write to the chunk must take them back. In a few hundred chunks that
// exchange stays within the caches. Alternating runs of WRITE 64 KiB at PMTU 1024
// gave 758-790 MiB/s this way against 678-690 with all 2048 chunks in the fill ring
// once the link streamed (docs/afxdp.md). Zero-copy
// drivers fill their own descriptor rings (hundreds of entries) from the fill ring,
// so they get every chunk at once.
const fillStart = 256

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

// refill gives back to the fill ring the chunks the last Recv handed out, and doubles
// the working set when avail frames wait on the RX ring, half of it or more.
func (q *queue) refill(avail int) {
	if set := RxFrames - len(q.rxSpare); avail >= set/2 && len(q.rxSpare) > 0 {
		n := min(set, len(q.rxSpare))
		q.rxRefill = append(q.rxRefill, q.rxSpare[:n]...)
		q.rxSpare = q.rxSpare[n:]
	}
	if len(q.rxRefill) > 0 {
		n := q.xsk.Fill.Put(q.rxRefill)
		m := copy(q.rxRefill, q.rxRefill[n:])
		q.rxRefill = q.rxRefill[:m]
	}
}

// RxWorkingSet returns how many receive chunks the kernel may fill, over all queues:
// per copy-mode queue fillStart, doubled each time the engine fell half of it behind,
// at most RxFrames; RxFrames per zero-copy queue.
func (l *Link) RxWorkingSet() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, q := range l.queues {
		n += RxFrames - len(q.rxSpare)
	}
	return n
}
