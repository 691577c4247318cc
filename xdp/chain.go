package xdp

import "golang.org/x/sys/unix"

// Receiving a frame that arrived as chained descriptors (multi-buffer, XDP_PKT_CONTD).
//
// In copy mode the kernel fills each receive chunk after XDP_PACKET_HEADROOM and
// takes the chunks of one frame from consecutive fill-ring entries, which the link
// gives back in the order it received them (rxfill.go): a PMTU-4096 frame lands in
// chunk c from offset 256 to its end and in chunk c+1 from offset 256. Moving the
// second part back over c+1's headroom makes the frame contiguous, at the cost of
// copying that part (about 330 bytes) instead of the whole 4.2 KB frame.

// chain returns the frame whose descriptors start at RX ring index i (of avail
// ready ones) and the index after its last descriptor, or nil when the ring does not
// yet hold the whole chain. The frame is joined in place when its chunks are
// adjacent (joinInPlace); otherwise it is copied into a buffer from asm, which
// returns one of the given length. The chunks go on q.rxRefill either way.
func (q *queue) chain(umem []byte, i, avail int, asm func(n int) []byte) ([]byte, int) {
	descs := q.rxChain[:0]
	for j := i; j < avail; j++ {
		e := q.xsk.Rx.Desc(j)
		descs = append(descs, e)
		if e.Options&unix.XDP_PKT_CONTD == 0 {
			break
		}
	}
	q.rxChain = descs
	if descs[len(descs)-1].Options&unix.XDP_PKT_CONTD != 0 {
		return nil, i
	}
	f := joinInPlace(umem, descs)
	if f == nil {
		f = joinCopy(umem, descs, asm)
	} else {
		q.joined++
	}
	for _, e := range descs {
		q.rxRefill = append(q.rxRefill, e.Addr&^(FrameSize-1))
	}
	q.chained++
	return f, i + len(descs)
}

// joinInPlace makes the chain descs contiguous in umem when each descriptor lies in
// the chunk after the previous one's: every part after the first moves back to
// follow the part before it, over the headroom between them (the link's memory). It
// returns the joined frame, or nil, having moved nothing, when the chunks are not
// adjacent (the kernel took them out of the fill ring's order, or a zero-copy
// driver filled its own ring).
func joinInPlace(umem []byte, descs []unix.XDPDesc) []byte {
	first := descs[0]
	chunk := first.Addr &^ (FrameSize - 1)
	for _, e := range descs[1:] {
		chunk += FrameSize
		if e.Addr&^(FrameSize-1) != chunk {
			return nil
		}
	}
	w := first.Addr + uint64(first.Len)
	for _, e := range descs[1:] {
		w += uint64(copy(umem[w:], umem[e.Addr:e.Addr+uint64(e.Len)]))
	}
	return umem[first.Addr:w:w]
}

// joinCopy copies the chain descs into one buffer from asm.
func joinCopy(umem []byte, descs []unix.XDPDesc, asm func(n int) []byte) []byte {
	total := 0
	for _, e := range descs {
		total += int(e.Len)
	}
	f := asm(total)
	off := 0
	for _, e := range descs {
		off += copy(f[off:], umem[e.Addr:e.Addr+uint64(e.Len)])
	}
	return f
}
