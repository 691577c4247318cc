package transport

import (
	"fmt"

	"github.com/xroce/xroce/roce"
)

// WROpcode is a send work request's operation (enum ibv_wr_opcode).
type WROpcode uint8

// Send work request opcodes, with ibv_wr_opcode's names and values.
const (
	WR_RDMA_WRITE           WROpcode = 0
	WR_RDMA_WRITE_WITH_IMM  WROpcode = 1
	WR_SEND                 WROpcode = 2
	WR_SEND_WITH_IMM        WROpcode = 3
	WR_RDMA_READ            WROpcode = 4
	WR_ATOMIC_CMP_AND_SWP   WROpcode = 5
	WR_ATOMIC_FETCH_AND_ADD WROpcode = 6
)

func (o WROpcode) String() string {
	switch o {
	case WR_RDMA_WRITE:
		return "IBV_WR_RDMA_WRITE"
	case WR_RDMA_WRITE_WITH_IMM:
		return "IBV_WR_RDMA_WRITE_WITH_IMM"
	case WR_SEND:
		return "IBV_WR_SEND"
	case WR_SEND_WITH_IMM:
		return "IBV_WR_SEND_WITH_IMM"
	case WR_RDMA_READ:
		return "IBV_WR_RDMA_READ"
	case WR_ATOMIC_CMP_AND_SWP:
		return "IBV_WR_ATOMIC_CMP_AND_SWP"
	case WR_ATOMIC_FETCH_AND_ADD:
		return "IBV_WR_ATOMIC_FETCH_AND_ADD"
	}
	return fmt.Sprintf("IBV_WR_OPCODE(%d)", uint8(o))
}

func (o WROpcode) wcOpcode() WCOpcode {
	switch o {
	case WR_RDMA_WRITE, WR_RDMA_WRITE_WITH_IMM:
		return WC_RDMA_WRITE
	case WR_RDMA_READ:
		return WC_RDMA_READ
	case WR_ATOMIC_CMP_AND_SWP:
		return WC_COMP_SWAP
	case WR_ATOMIC_FETCH_AND_ADD:
		return WC_FETCH_ADD
	}
	return WC_SEND
}

// operation returns the wire operation of o (0 for an unknown WROpcode).
func (o WROpcode) operation() roce.Operation {
	switch o {
	case WR_RDMA_WRITE:
		return roce.OpRDMAWrite
	case WR_RDMA_WRITE_WITH_IMM:
		return roce.OpRDMAWriteWithImm
	case WR_SEND:
		return roce.OpSend
	case WR_SEND_WITH_IMM:
		return roce.OpSendWithImm
	case WR_RDMA_READ:
		return roce.OpRDMARead
	case WR_ATOMIC_CMP_AND_SWP:
		return roce.OpCompareSwap
	case WR_ATOMIC_FETCH_AND_ADD:
		return roce.OpFetchAdd
	}
	return 0
}

func (o WROpcode) isReadOrAtomic() bool {
	return o == WR_RDMA_READ || o == WR_ATOMIC_CMP_AND_SWP || o == WR_ATOMIC_FETCH_AND_ADD
}

func (o WROpcode) isAtomic() bool { return o == WR_ATOMIC_CMP_AND_SWP || o == WR_ATOMIC_FETCH_AND_ADD }

// SendFlags modify a send work request (enum ibv_send_flags).
type SendFlags uint8

// Send flags.
const (
	SendFence     SendFlags = 1 << 0 // IBV_SEND_FENCE (accepted; requests are already executed in order)
	SendSignaled  SendFlags = 1 << 1 // IBV_SEND_SIGNALED: generate a completion
	SendSolicited SendFlags = 1 << 2 // IBV_SEND_SOLICITED: set the BTH SE bit on the last packet
	SendInline    SendFlags = 1 << 3 // IBV_SEND_INLINE: copy the data at post time
)

// SGE is a scatter/gather element (struct ibv_sge): Length bytes at virtual address
// Addr of the region with local key LKey.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// SendWR is a send work request (struct ibv_send_wr).
type SendWR struct {
	WRID    uint64
	Opcode  WROpcode
	SGList  []SGE
	Flags   SendFlags
	ImmData uint32 // for *_WITH_IMM, as the peer's wc.imm_data reads it (host order)
	// RemoteAddr and RKey name the peer's memory for RDMA and atomic operations.
	RemoteAddr uint64
	RKey       uint32
	// CompareAdd is the compare value of CMP_AND_SWP or the addend of FETCH_AND_ADD;
	// Swap is CMP_AND_SWP's swap value.
	CompareAdd, Swap uint64
	// AH, RemoteQPN and RemoteQKey address a UD send (wr.ud of struct ibv_send_wr):
	// the path to the destination (ProtectionDomain.CreateAH), its QP number and the
	// Q_Key to put in the DETH; a RemoteQKey with the high bit set sends the QP's own
	// Q_Key instead (QPAttr.QKey). Other QP types ignore them.
	AH         *AH
	RemoteQPN  uint32
	RemoteQKey uint32
}

// RecvWR is a receive work request (struct ibv_recv_wr).
type RecvWR struct {
	WRID   uint64
	SGList []SGE
}

// sgList is a resolved scatter/gather list: the bytes of each element.
type sgList struct {
	segs  [][]byte
	total int
}

// copyOut copies len(dst) bytes starting at offset off of the list into dst.
func (s *sgList) copyOut(dst []byte, off int) {
	for _, seg := range s.segs {
		if off >= len(seg) {
			off -= len(seg)
			continue
		}
		n := copy(dst, seg[off:])
		dst = dst[n:]
		off = 0
		if len(dst) == 0 {
			return
		}
	}
}

// copyIn copies src into the list at offset off. The caller checks bounds.
func (s *sgList) copyIn(src []byte, off int) {
	for _, seg := range s.segs {
		if off >= len(seg) {
			off -= len(seg)
			continue
		}
		n := copy(seg[off:], src)
		src = src[n:]
		off = 0
		if len(src) == 0 {
			return
		}
	}
}

// contiguous returns the list's bytes [off, off+n) without copying when they lie in
// one element.
func (s *sgList) contiguous(off, n int) ([]byte, bool) {
	for _, seg := range s.segs {
		if off >= len(seg) {
			off -= len(seg)
			continue
		}
		if off+n <= len(seg) {
			return seg[off : off+n], true
		}
		return nil, false
	}
	return nil, n == 0
}

// resolve turns SGEs into byte slices of the PD's regions, requiring access need
// (AccessLocalWrite where the engine writes into them). ok is false if any element
// names an unknown key, another PD's region, lacks the access, or lies outside its
// region.
func (d *Device) resolve(sges []SGE, pd *ProtectionDomain, need Access, into *sgList) bool {
	into.segs = into.segs[:0]
	into.total = 0
	d.mrs.mu.RLock()
	ok := d.mrs.gather(sges, pd, need, into)
	d.mrs.mu.RUnlock() // not deferred: this runs for every WQE posted
	return ok
}

// mrCache is a poster's memory of the region its last one-element resolve found:
// still good while no region has been deregistered since (mrTable.gen), so the
// next work request on the same region skips the table's lock (two atomic
// read-modify-writes, about 25 ns a work request on the development VM). Its
// owner's lock (a QP's postMu) guards it.
type mrCache struct {
	mr  *MemoryRegion
	gen uint64
}

// resolveCached is resolve through c: a one-element list on the region c holds
// is checked against it without the table's lock; any other list, or another
// region, goes through resolve, and a one-element list's region is kept.
func (d *Device) resolveCached(sges []SGE, pd *ProtectionDomain, need Access, into *sgList, c *mrCache) bool {
	if len(sges) != 1 || sges[0].Length == 0 {
		return d.resolve(sges, pd, need, into)
	}
	e := &sges[0]
	gen := d.mrs.gen.Load() // before the lookup: a Dereg after it changes gen
	mr := c.mr
	if mr == nil || gen != c.gen || mr.lkey != e.LKey || mr.pd != pd {
		d.mrs.mu.RLock()
		mr = d.mrs.lookup(e.LKey, pd)
		d.mrs.mu.RUnlock()
		if mr == nil {
			return false
		}
		c.mr, c.gen = mr, gen
	}
	into.segs = into.segs[:0]
	into.total = 0
	if mr.access&need != need {
		return false
	}
	b, ok := mr.slice(e.Addr, uint64(e.Length))
	if ok {
		into.segs = append(into.segs, b)
		into.total = len(b)
	}
	return ok
}

// sourceFault is the status of a SEND's or WRITE's WR whose SGEs do not resolve,
// as rdma_rxe's requester finds it (rxe_req.c finish_packet, rxe_mr.c copy_data):
// the first SGE with bytes whose key names no region of the PD is
// IBV_WC_LOC_QP_OP_ERR (copy_data's -EINVAL), one outside its region
// IBV_WC_LOC_PROT_ERR (mr_check_range's -EFAULT, Linux 6.1).
func (d *Device) sourceFault(sges []SGE, pd *ProtectionDomain) WCStatus {
	d.mrs.mu.RLock()
	defer d.mrs.mu.RUnlock()
	for _, e := range sges {
		if e.Length == 0 {
			continue
		}
		mr := d.mrs.lookup(e.LKey, pd)
		if mr == nil {
			return WC_LOC_QP_OP_ERR
		}
		if _, ok := mr.slice(e.Addr, uint64(e.Length)); !ok {
			return WC_LOC_PROT_ERR
		}
	}
	return WC_LOC_PROT_ERR
}

// gather is resolve's lookup, under t.mu.
func (t *mrTable) gather(sges []SGE, pd *ProtectionDomain, need Access, into *sgList) bool {
	for _, e := range sges {
		if e.Length == 0 {
			continue
		}
		mr := t.lookup(e.LKey, pd)
		if mr == nil || mr.access&need != need {
			return false
		}
		b, ok := mr.slice(e.Addr, uint64(e.Length))
		if !ok {
			return false
		}
		into.segs = append(into.segs, b)
		into.total += len(b)
	}
	return true
}
