package daemon

import (
	"bytes"
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The library's side of the rings, in Go, for the daemon's tests: it maps what
// OpCreateCQ and OpCreateQP return and reads and writes the slots as
// cmd/libxroce/rings.c does.

type testCQ struct {
	h    uint32
	mem  []byte
	n    uint32
	cons uint32
}

type testQP struct {
	r              CreateQPReply
	mem            []byte
	db             int
	sqTail, rqTail uint32
}

func mapFD(t *testing.T, fd int, size uint64) []byte {
	t.Helper()
	b, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	unix.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

func u32(b []byte, off uint64) *uint32 { return (*uint32)(unsafe.Pointer(&b[off])) }

func createTestCQ(t *testing.T, c *Client, req CreateCQReq) *testCQ {
	t.Helper()
	var r CreateCQReply
	fds, err := c.CallFDs(OpCreateCQ, &req, nil, &r)
	if err != nil {
		t.Fatal(err)
	}
	want := uint32(1) // the depth rxe gives: 2^k − 1, the least not below cqe
	for want-1 < req.CQE {
		want <<= 1
	}
	want--
	if len(fds) != 1 || r.CQE != want || r.Entries < want || r.RingSize < CQRingHeader+uint64(r.Entries)*cqeSize {
		t.Fatalf("create cq: %+v with %d descriptors", r, len(fds))
	}
	return &testCQ{h: r.Handle, mem: mapFD(t, fds[0], r.RingSize), n: r.Entries}
}

func createTestQP(t *testing.T, c *Client, req CreateQPReq) *testQP {
	t.Helper()
	q := &testQP{}
	fds, err := c.CallFDs(OpCreateQP, &req, nil, &q.r)
	if err != nil {
		t.Fatal(err)
	}
	if len(fds) != 2 {
		t.Fatalf("create qp: %d descriptors, want the ring and the doorbell", len(fds))
	}
	q.mem = mapFD(t, fds[0], q.r.RingSize)
	q.db = fds[1]
	t.Cleanup(func() { unix.Close(q.db) })
	return q
}

// publish stores a tail and rings the doorbell if the daemon sleeps.
func (q *testQP) publish(off uint64, tail uint32) {
	atomic.StoreUint32(u32(q.mem, off), tail)
	if atomic.LoadUint32(u32(q.mem, QPRingSleeping)) != 0 {
		var one [8]byte
		one[0] = 1
		_, _ = unix.Write(q.db, one[:])
	}
}

func le(parts ...any) []byte {
	var b bytes.Buffer
	for _, p := range parts {
		_ = binary.Write(&b, binary.LittleEndian, p)
	}
	return b.Bytes()
}

// postRecv writes slot bytes (RecvWRMsg and SGEs) at the receive tail.
func (q *testQP) postRecv(slot []byte) uint32 {
	return q.post(slot, q.r.RQOffset, q.r.RQEntries, q.r.RQStride, &q.rqTail, QPRingRQTail)
}

// postSend writes slot bytes (SendWRMsg and SGEs or inline data) at the send tail.
func (q *testQP) postSend(slot []byte) uint32 {
	return q.post(slot, q.r.SQOffset, q.r.SQEntries, q.r.SQStride, &q.sqTail, QPRingSQTail)
}

// post writes slot at *tail of the ring at base, then publishes the new tail.
func (q *testQP) post(slot []byte, base uint64, entries, stride uint32, tail *uint32, tailOff uint64) uint32 {
	off := base + uint64(*tail&(entries-1))*uint64(stride)
	copy(q.mem[off:off+uint64(stride)], slot)
	seq := *tail
	*tail++
	q.publish(tailOff, *tail)
	return seq
}

// poll waits up to 5 s for a CQE.
func (c *testCQ) poll(t *testing.T) CQE {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if atomic.LoadUint32(u32(c.mem, CQRingProd)) == c.cons {
			continue
		}
		off := CQRingHeader + uint64(c.cons&(c.n-1))*cqeSize
		var e CQE
		_ = binary.Read(bytes.NewReader(c.mem[off:off+cqeSize]), binary.LittleEndian, &e)
		c.cons++
		atomic.StoreUint32(u32(c.mem, CQRingCons), c.cons)
		return e
	}
	t.Fatal("no completion in 5 s")
	return CQE{}
}
