package xdp

import (
	"unsafe"

	"github.com/xroce/xroce/transport"
)

// LendTx implements transport.TxLender: n bytes at the start of a free TX chunk of
// the queue that transmits flow sport (txQueue's choice for a frame from that UDP
// source port), for the engine to encode a frame into, so that Send hands the chunk
// to the kernel without copying it. It returns nil when n does not fit one chunk
// (a frame longer than a chunk is copied into chained chunks by Send) or the queue
// has no free chunk.
func (l *Link) LendTx(n int, sport uint16) []byte {
	if n <= 0 || n > FrameSize {
		return nil
	}
	l.mu.Lock()
	var b []byte
	if !l.closed {
		b = l.queues[int(sport)%len(l.queues)].lend(n)
	}
	l.mu.Unlock() // not deferred: this runs for every frame sent
	return b
}

// lend takes a free TX chunk for a frame of n bytes, or returns nil; under l.mu.
func (q *queue) lend(n int) []byte {
	if len(q.txFree) == 0 {
		q.reclaim()
		if len(q.txFree) == 0 {
			return nil
		}
	}
	k := len(q.txFree)
	addr := q.txFree[k-1]
	q.txFree = q.txFree[:k-1]
	q.lent++
	return q.xsk.UMEM()[addr : addr+uint64(n) : addr+FrameSize]
}

// ReturnTx implements transport.TxLender: a chunk from LendTx that will not be sent
// is free again.
func (l *Link) ReturnTx(buf []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return
	}
	if q, addr, ok := l.lentChunk(buf); ok {
		q.txFree = append(q.txFree, addr)
		q.lent--
	}
}

// lentChunk finds the queue whose UMEM holds f (a buffer from LendTx) and the
// chunk's address, or reports false for memory of another owner.
func (l *Link) lentChunk(f []byte) (*queue, uint64, bool) {
	if cap(f) == 0 {
		return nil, 0, false
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(f)))
	for _, q := range l.queues {
		umem := q.xsk.UMEM()
		base := uintptr(unsafe.Pointer(unsafe.SliceData(umem)))
		if p >= base && p < base+uintptr(len(umem)) {
			return q, uint64(p-base) &^ (FrameSize - 1), true
		}
	}
	return nil, 0, false
}

var _ transport.TxLender = (*Link)(nil)
