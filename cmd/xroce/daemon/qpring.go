package daemon

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/xroce/xroce/transport"
)

// qpRing is the daemon's side of a QP's send and receive rings: it takes the WRs
// the library wrote and posts them to the engine. Only the poller touches it
// (with the poller's lock held) once it is registered.
type qpRing struct {
	qp       *transport.QueuePair
	m        *shm
	lay      CreateQPReply
	sqCons   uint32 // WRs taken from the send ring
	rqCons   uint32
	blocked  bool     // the engine's queue was full: wait for the engine, not the library
	broken   string   // why the daemon stopped reading a ring the client corrupted
	db       *os.File // the doorbell eventfd: the library writes it to wake a sleeping engine
	bounce   []byte   // inline data, copied out of the slot for the engine to copy at post time
	bounceMR *transport.MemoryRegion
	slot     []byte // one slot, copied out before it is checked
	sges     [maxSGE]transport.SGE
	ahs      *ahTable // the session's address handles, for UD sends
	logf     func(format string, a ...any)
}

// newQPRing creates the rings of qp, whose capabilities and layout c holds, and
// its doorbell; the inline buffer is registered in pd.
func newQPRing(qp *transport.QueuePair, pd *transport.ProtectionDomain, c *CreateQPReply, ahs *ahTable, logf func(string, ...any)) (*qpRing, error) {
	m, err := newShm("xroce-qp", c.RingSize)
	if err != nil {
		return nil, err
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		m.close()
		return nil, fail(unix.EMFILE, "doorbell eventfd: %v", err)
	}
	r := &qpRing{qp: qp, m: m, lay: *c, db: os.NewFile(uintptr(efd), "xroce-doorbell"), ahs: ahs, logf: logf,
		slot: make([]byte, max(c.SQStride, c.RQStride))}
	if c.MaxInline > 0 {
		r.bounce = make([]byte, c.MaxInline)
		if r.bounceMR, err = pd.RegMR(r.bounce, 0); err != nil {
			r.close()
			return nil, fail(unix.ENOMEM, "inline buffer: %v", err)
		}
	}
	return r, nil
}

// ring serves the doorbell until the ring is closed: each write wakes dev.
func (r *qpRing) ring(dev *transport.Device) {
	var b [8]byte
	for {
		if _, err := r.db.Read(b[:]); err != nil {
			return
		}
		dev.Wake()
	}
}

func (r *qpRing) close() {
	_ = r.db.Close()
	if r.bounceMR != nil {
		_ = r.bounceMR.Dereg()
	}
	r.m.close()
}

func (r *qpRing) tail(off uint64) uint32 { return atomic.LoadUint32(r.m.word(off)) }

// pending reports whether the library wrote WRs the daemon can take now.
func (r *qpRing) pending() bool {
	return r.broken == "" && !r.blocked && (r.tail(QPRingSQTail) != r.sqCons || r.tail(QPRingRQTail) != r.rqCons)
}

func (r *qpRing) setSleeping(v uint32) { atomic.StoreUint32(r.m.word(QPRingSleeping), v) }

// discard drops what the rings hold: a QP moved to RESET has empty work queues.
func (r *qpRing) discard() {
	r.sqCons, r.rqCons = r.tail(QPRingSQTail), r.tail(QPRingRQTail)
	r.blocked = false
}

// poll posts the WRs the library wrote since the last call and reports whether
// there were any.
func (r *qpRing) poll() bool {
	if r.broken != "" {
		return false
	}
	r.blocked = false
	did := r.take("receive", QPRingRQTail, &r.rqCons, r.lay.RQEntries, r.lay.RQStride, r.lay.RQOffset, r.postRecv)
	return r.take("send", QPRingSQTail, &r.sqCons, r.lay.SQEntries, r.lay.SQStride, r.lay.SQOffset, r.postSend) || did
}

// take posts the slots between *cons and the ring's tail with post, in order.
func (r *qpRing) take(what string, tailOff uint64, cons *uint32, entries, stride uint32, base uint64,
	post func(seq uint32, s []byte) error) bool {
	tail := r.tail(tailOff)
	did := false
	for *cons != tail {
		if tail-*cons > entries {
			r.stop("its %s ring's tail %d runs %d slots ahead of the daemon (%d slots)", what, tail, tail-*cons, entries)
			return did
		}
		off := base + uint64(*cons&(entries-1))*uint64(stride)
		s := r.slot[:stride]
		copy(s, r.m.mem[off:off+uint64(stride)])
		if err := post(*cons, s); err != nil {
			if errors.Is(err, transport.ErrQueueFull) {
				r.blocked = true
				return did
			}
			r.stop("%s WR %d: %v", what, *cons, err)
			return did
		}
		*cons++
		did = true
	}
	return did
}

// stop gives up on a client that broke its rings: the QP goes to ERR (its WRs
// flush) and the daemon reads its rings no more.
func (r *qpRing) stop(format string, a ...any) {
	r.broken = fmt.Sprintf(format, a...)
	r.logf("QP %d: %s; the QP goes to the error state", r.qp.QPN(), r.broken)
	_ = r.qp.Modify(transport.QPAttr{State: transport.QPS_ERR}, transport.QP_STATE)
}

// sges decodes n SGEMsg at the start of b.
func (r *qpRing) sgList(b []byte, n uint32) ([]transport.SGE, error) {
	if n > maxSGE || uint64(n)*sgeSize > uint64(len(b)) {
		return nil, fmt.Errorf("%d SGEs do not fit the slot", n)
	}
	le := binary.LittleEndian
	for i := range n {
		e := b[i*sgeSize:]
		r.sges[i] = transport.SGE{Addr: le.Uint64(e), Length: le.Uint32(e[8:]), LKey: le.Uint32(e[12:])}
	}
	return r.sges[:n], nil
}

// postRecv posts the receive WR in slot s (RecvWRMsg, then its SGEs).
func (r *qpRing) postRecv(seq uint32, s []byte) error {
	sg, err := r.sgList(s[recvWRSize:], binary.LittleEndian.Uint32(s[8:]))
	if err != nil {
		return err
	}
	_, err = r.qp.PostRecv(transport.RecvWR{WRID: uint64(seq) | recvBit, SGList: sg})
	return err
}

// postSend posts the send WR in slot s (SendWRMsg, then its SGEs or inline data).
func (r *qpRing) postSend(seq uint32, s []byte) error {
	le := binary.LittleEndian
	wr := transport.SendWR{WRID: uint64(seq), RemoteAddr: le.Uint64(s[8:]), CompareAdd: le.Uint64(s[16:]),
		Swap: le.Uint64(s[24:]), RKey: le.Uint32(s[32:]), ImmData: le.Uint32(s[36:]),
		Opcode: transport.WROpcode(min(le.Uint32(s[40:]), 255)), Flags: transport.SendFlags(le.Uint32(s[44:]) & 0xf)}
	nsge, inl := le.Uint32(s[48:]), le.Uint32(s[52:])
	if r.qp.Type() == transport.QPT_UD {
		h := le.Uint32(s[56:])
		if wr.AH = r.ahs.get(h); wr.AH == nil {
			return fmt.Errorf("UD send to address handle %d, which the session does not have", h)
		}
		wr.RemoteQPN, wr.RemoteQKey = le.Uint32(s[60:]), le.Uint32(s[64:])
	}
	body := s[sendWRSize:]
	if inl == 0 {
		sg, err := r.sgList(body, nsge)
		if err != nil {
			return err
		}
		if wr.Flags&transport.SendInline != 0 && nsge > 0 {
			return fmt.Errorf("IBV_SEND_INLINE with SGEs: inline data comes in the slot")
		}
		wr.SGList = sg
	} else {
		if nsge != 0 || uint64(inl) > uint64(len(r.bounce)) || uint64(inl) > uint64(len(body)) || wr.Flags&transport.SendInline == 0 {
			return fmt.Errorf("%d bytes of inline data (max_inline_data %d) with %d SGEs", inl, len(r.bounce), nsge)
		}
		copy(r.bounce, body[:inl])
		r.sges[0] = transport.SGE{Addr: r.bounceMR.Addr(), Length: inl, LKey: r.bounceMR.LKey()}
		wr.SGList = r.sges[:1]
	}
	_, err := r.qp.PostSend(wr)
	return err
}
