package xdp

import "github.com/xroce/xroce/transport"

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
// chunks. The set grows two ways. The engine reserves MaxUnackedPSN frames for each
// QP it creates (ReserveRx, two chunks a frame), so one QP streams in 256 chunks and
// eight in all 2048. And on demand (refill): what the kernel holds is the working set
// less the frames waiting on the RX ring and the chunks the last Recv handed out,
// known without a system call; below half the set, the set doubles, and below a
// quarter, close to running dry, the kernel gets every chunk. A frame that finds no
// chunk is dropped (counted in the socket's rx_fill_ring_empty_descs) and RC
// retransmits it.
//
// It grows no sooner because a stream is faster in a small working set too: the
// engine reads every frame it receives (the ICRC, the payload it places), which takes
// the frame's cache lines from the CPU that wrote them (on veth, the sender's: its
// softirq runs the XDP program and copies into the UMEM), and that CPU's next write
// to the chunk must take them back. In a few hundred chunks that exchange stays
// within the caches. Alternating runs of WRITE 64 KiB at PMTU 1024 gave 777-803
// MiB/s so against 684-699 when the first 16 frames found waiting gave the kernel
// all 2048 chunks (docs/afxdp.md). Zero-copy drivers fill their own descriptor rings
// (hundreds of entries) from the fill ring, so they get every chunk at once.
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
	q.putFill()
}

// refill gives back to the fill ring the chunks the last Recv handed out, after
// growing the working set when avail frames waiting on the RX ring leave the kernel
// less than half of it.
func (q *queue) refill(avail int) {
	set := RxFrames - len(q.rxSpare)
	if held := set - avail - len(q.rxRefill); held < set/4 {
		q.rxRefill = append(q.rxRefill, q.grow(len(q.rxSpare))...)
	} else if held < set/2 {
		q.rxRefill = append(q.rxRefill, q.grow(set)...)
	}
	q.putFill()
}

// putFill moves the chunks in rxRefill to the fill ring.
func (q *queue) putFill() {
	if len(q.rxRefill) > 0 {
		n := q.xsk.Fill.Put(q.rxRefill)
		m := copy(q.rxRefill, q.rxRefill[n:])
		q.rxRefill = q.rxRefill[:m]
	}
}

// ReserveRx implements transport.RxReserver: every queue's working set becomes at
// least twice frames chunks (a PMTU-4096 frame takes two; at most RxFrames), so that
// the QPs the engine has can all stream at once without the working set growing
// behind them. Without it, eight QPs streaming WRITE 64 KiB outgrew 256 chunks faster
// than the Recvs saw it in most runs on this VM, lost frames and sent their QPs into
// adaptive retransmissions (docs/afxdp.md).
func (l *Link) ReserveRx(frames int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	for _, q := range l.queues {
		// Only the new chunks go to the fill ring now: those on rxRefill hold the
		// frames the last Recv returned, valid until the next Recv (transport.Link).
		more := q.grow(2*frames - (RxFrames - len(q.rxSpare)))
		if n := q.xsk.Fill.Put(more); n < len(more) { // not expected: the ring holds every chunk
			q.rxRefill = append(q.rxRefill, more[n:]...)
		}
	}
}

// grow takes up to n chunks out of rxSpare into the working set and returns them,
// for the fill ring; n ≤ 0 takes none.
func (q *queue) grow(n int) []uint64 {
	n = min(max(n, 0), len(q.rxSpare))
	more := q.rxSpare[:n:n]
	q.rxSpare = q.rxSpare[n:]
	return more
}

// RxWorkingSet returns how many receive chunks the kernel may fill, over all queues:
// per copy-mode queue fillStart, or twice the frames the engine reserved
// (ReserveRx), grown further (doubled, or to RxFrames) as the engine fell behind
// (refill); RxFrames per zero-copy queue.
func (l *Link) RxWorkingSet() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, q := range l.queues {
		n += RxFrames - len(q.rxSpare)
	}
	return n
}

var _ transport.RxReserver = (*Link)(nil)
