package daemon

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/xroce/xroce/transport"
)

// Shared-memory rings: how work requests and completions cross between the
// library and the daemon without a system call (docs/verbs-library.md §6). The
// daemon creates each ring as a sealed memfd, maps it, and hands the library the
// descriptor; both sides then read and write the same pages. Every index is a
// free-running uint32 (slot = index mod entries, entries a power of two) written
// by one side only, on its own cache line; the other side only reads it.
//
// A QP's memfd holds its send and receive rings. The library writes a WR into the
// slot at its tail and then advances the tail; the daemon's poller (poller.go)
// copies the slot out, checks it and posts it to the engine with the slot's
// sequence number as the engine's wr_id. A CQ's memfd holds its completion ring:
// the daemon writes CQEs and advances the producer index, the library reads them
// and advances the consumer index. The library frees send and receive slots when
// it polls the CQE that names their sequence number, so a slot is never rewritten
// while the daemon may still read it (mlx5's provider frees its WQEs the same way).
const (
	QPRingHeader   = 4096 // bytes before the send ring
	QPRingSQTail   = 0    // uint32, library: send WRs written
	QPRingRQTail   = 64   // uint32, library: receive WRs written
	QPRingSleeping = 128  // uint32, daemon: 1 while the engine may sleep: ring the doorbell after posting

	CQRingHeader  = 4096 // bytes before the CQE slots
	CQRingProd    = 0    // uint32, daemon: CQEs written
	CQRingCons    = 64   // uint32, library: CQEs consumed
	CQRingOverrun = 128  // uint32, daemon: 1 once the CQ overran (IBV_EVENT_CQ_ERR; a completion lost, polls go on)

	sendWRSize = 72 // binary.Size(SendWRMsg{})
	recvWRSize = 16 // binary.Size(RecvWRMsg{})
	sgeSize    = 16 // binary.Size(SGEMsg{})
	cqeSize    = 32 // binary.Size(CQE{})
	pageSize   = 4096
	// recvBit marks a receive WR's engine wr_id, which is otherwise the slot's
	// sequence number.
	recvBit = 1 << 32
)

// ringEntries is the number of slots for n WRs or CQEs: a power of two ≥ n.
func ringEntries(n uint32) uint32 {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len32(n-1)
}

func align(n, a uint64) uint64 { return (n + a - 1) &^ (a - 1) }

// qpLayout fills the ring fields of a CreateQPReply from its capabilities.
func qpLayout(c *CreateQPReply) {
	c.SQEntries, c.RQEntries = ringEntries(c.MaxSendWR), ringEntries(c.MaxRecvWR)
	c.SQStride = uint32(align(sendWRSize+uint64(max(c.MaxSendSGE*sgeSize, c.MaxInline)), 64))
	c.RQStride = uint32(align(recvWRSize+uint64(c.MaxRecvSGE)*sgeSize, 64))
	c.SQOffset = QPRingHeader
	c.RQOffset = align(c.SQOffset+uint64(c.SQEntries)*uint64(c.SQStride), pageSize)
	c.RingSize = align(c.RQOffset+uint64(c.RQEntries)*uint64(c.RQStride), pageSize)
}

// shm is a sealed memfd of the daemon's and its mapping.
type shm struct {
	fd  int
	mem []byte
}

// newShm creates a memfd of size bytes, sealed so the client it is sent to can
// neither shrink it (a fault in the daemon) nor grow it, and maps it.
func newShm(name string, size uint64) (*shm, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fail(unix.ENOMEM, "memfd for %s: %v", name, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		unix.Close(fd)
		return nil, fail(unix.ENOMEM, "memfd for %s of %d bytes: %v", name, size, err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		unix.Close(fd)
		return nil, fail(unix.ENOMEM, "sealing the memfd for %s: %v", name, err)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Close(fd)
		return nil, fail(unix.ENOMEM, "mapping the memfd for %s: %v", name, err)
	}
	return &shm{fd, mem}, nil
}

// closeFD closes the daemon's descriptor once the library has its own.
func (m *shm) closeFD() {
	if m.fd >= 0 {
		unix.Close(m.fd)
		m.fd = -1
	}
}

func (m *shm) close() {
	m.closeFD()
	if m.mem != nil {
		_ = unix.Munmap(m.mem)
		m.mem = nil
	}
}

// word returns the uint32 at off, for atomic access.
func (m *shm) word(off uint64) *uint32 { return (*uint32)(unsafe.Pointer(&m.mem[off])) }

// cqRing is a CQ's completion ring: the engine's transport.CQSink for that CQ.
// Push runs with the engine lock held; Len from any goroutine.
type cqRing struct {
	m       *shm
	entries uint32
	depth   uint32 // the CQ's cqe: more unconsumed CQEs than this overrun it
	prod    uint32 // the daemon's own copy: the shared one is only written
}

func newCQRing(cqe uint32) (*cqRing, *CreateCQReply, error) {
	r := &CreateCQReply{CQE: cqe, Entries: ringEntries(cqe)}
	r.RingSize = align(CQRingHeader+uint64(r.Entries)*cqeSize, pageSize)
	m, err := newShm("xroce-cq", r.RingSize)
	if err != nil {
		return nil, nil, err
	}
	return &cqRing{m: m, entries: r.Entries, depth: cqe}, r, nil
}

// Push implements transport.CQSink: it writes wc into the next slot unless the
// library has left depth CQEs unconsumed (or reports a consumer index the
// producer never passed), which overruns the CQ.
func (c *cqRing) Push(wc transport.WorkCompletion) bool {
	if used := c.prod - atomic.LoadUint32(c.m.word(CQRingCons)); used >= c.depth {
		atomic.StoreUint32(c.m.word(CQRingOverrun), 1)
		return false
	}
	e := CQE{Seq: uint32(wc.WRID), Status: uint32(wc.Status), Opcode: uint32(wc.Opcode), ByteLen: wc.ByteLen, QPNum: wc.QPN, SrcQP: wc.SrcQP}
	if wc.WRID&recvBit != 0 {
		e.Flags |= CQERecv
	}
	if wc.WRID&srqBit != 0 {
		e.Flags |= CQESRQ
	}
	if wc.GRH {
		e.Flags |= CQEGRH
	}
	if wc.HasImm {
		e.Flags |= CQEWithImm
		e.ImmData = wc.ImmData
	}
	off := CQRingHeader + uint64(c.prod&(c.entries-1))*cqeSize
	s := c.m.mem[off : off+cqeSize]
	le := binary.LittleEndian
	le.PutUint32(s[0:], e.Seq)
	le.PutUint32(s[4:], e.Flags)
	le.PutUint32(s[8:], e.Status)
	le.PutUint32(s[12:], e.Opcode)
	le.PutUint32(s[16:], e.ByteLen)
	le.PutUint32(s[20:], e.ImmData)
	le.PutUint32(s[24:], e.QPNum)
	le.PutUint32(s[28:], e.SrcQP)
	c.prod++
	atomic.StoreUint32(c.m.word(CQRingProd), c.prod) // publishes the slot
	return true
}

// Len implements transport.CQSink: CQEs the library has not consumed.
// The transport calls it with the CQ's lock held, as it calls Push, so prod is
// stable.
func (c *cqRing) Len() int {
	used := c.prod - atomic.LoadUint32(c.m.word(CQRingCons))
	return int(min(used, c.entries))
}

// String describes the ring for error messages.
func (c *cqRing) String() string { return fmt.Sprintf("CQ ring of %d entries", c.entries) }
