package xdp

import (
	"unsafe"

	"github.com/xroce/xroce/transport"
)

// runScan bounds how deep lend looks in a queue's free list for a run of adjacent
// chunks. Completions return a chained frame's chunks together and in order, so in a
// stream of such frames the run is on top; a small frame sent in between (an ACK)
// splits one run and the next is found a few entries down.
const runScan = 64

// LendTx implements transport.TxLender: n bytes at the start of free TX memory of
// the queue that transmits flow sport (txQueue's choice for a frame from that UDP
// source port), for the engine to encode a frame into, so that Send hands it to the
// kernel without copying it. A frame longer than a chunk (path MTU 4096) gets
// adjacent chunks, one slice across them, which Send chains with XDP_PKT_CONTD; this
// needs a multi-buffer link. It returns nil when the frame needs more chunks than the
// link chains (maxTxChunks, or 1 without multi-buffer) or the queue has no free
// chunk or run of them; the engine then builds the frame in its own memory and Send
// copies it.
func (l *Link) LendTx(n int, sport uint16) []byte {
	k := (n + FrameSize - 1) / FrameSize
	if n <= 0 || k > maxTxChunks || k > 1 && !l.multi {
		return nil
	}
	l.mu.Lock()
	var b []byte
	if !l.closed {
		q := 0
		if l.txq > 1 { // no division for the common single transmitting queue
			q = int(sport) % l.txq
		}
		b = l.queues[q].lend(n, k)
	}
	l.mu.Unlock() // not deferred: this runs for every frame sent
	return b
}

// lend takes k adjacent free TX chunks for a frame of n bytes, or returns nil;
// under l.mu.
func (q *queue) lend(n, k int) []byte {
	addr, ok := q.takeRun(k)
	if !ok {
		q.reclaim()
		if addr, ok = q.takeRun(k); !ok {
			return nil
		}
	}
	q.lent += k
	return q.xsk.UMEM()[addr : addr+uint64(n) : addr+uint64(k)*FrameSize]
}

// takeRun removes k chunks at adjacent addresses from q.txFree and returns the
// lowest, or reports false when the top runScan entries hold no such run. A run
// is k entries that fall by FrameSize from the top down, as returned chunks
// (ReturnTx, reclaim) and the initial list leave them.
func (q *queue) takeRun(k int) (uint64, bool) {
	top := len(q.txFree) - 1
	for i := top; i >= k-1 && i > top-runScan; i-- {
		j := 1
		for j < k && q.txFree[i-j] == q.txFree[i]-uint64(j)*FrameSize {
			j++
		}
		if j == k {
			base := q.txFree[i-k+1]
			q.txFree = append(q.txFree[:i-k+1], q.txFree[i+1:]...)
			return base, true
		}
	}
	return 0, false
}

// ReturnTx implements transport.TxLender: memory from LendTx that will not be sent
// is free again.
func (l *Link) ReturnTx(buf []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.returnTx(buf)
	}
}

// returnTx frees the chunks of buf if LendTx lent them; under l.mu.
func (l *Link) returnTx(buf []byte) {
	if q, addr, ok := l.lentChunk(buf); ok {
		q.free(addr, cap(buf)/FrameSize)
	}
}

// free puts the k chunks from addr back on q.txFree, lowest first, so that they
// form a run for the next lend; they were lent.
func (q *queue) free(addr uint64, k int) {
	for i := range k {
		q.txFree = append(q.txFree, addr+uint64(i)*FrameSize)
	}
	q.lent -= k
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
