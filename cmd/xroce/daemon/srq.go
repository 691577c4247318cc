package daemon

import (
	"encoding/binary"
	"errors"

	"golang.org/x/sys/unix"

	"github.com/xroce/xroce/transport"
)

// A session's shared receive queues (srqproto.go's ops; transport/srq.go).

// srqBit marks an SRQ receive WR's engine wr_id (with recvBit): its low 32 bits
// are the library's slot, not a QP ring's sequence number.
const srqBit = 1 << 33

type srqObj struct {
	srq  *transport.SharedReceiveQueue
	pd   *pdObj
	refs int // QPs created with it
}

// handleSRQ answers the SRQ ops.
func (s *session) handleSRQ(op uint16, p []byte) (any, error) {
	switch op {
	case OpCreateSRQ:
		var r CreateSRQReq
		if err := decode(p, &r); err != nil {
			return nil, err
		}
		return s.createSRQ(&r)
	case OpModifySRQ:
		var r SRQAttrMsg
		if err := decode(p, &r); err != nil {
			return nil, err
		}
		return nil, s.modifySRQ(&r)
	case OpQuerySRQ, OpDestroySRQ:
		var h Handle
		if err := decode(p, &h); err != nil {
			return nil, err
		}
		o := s.srqs[h.Handle]
		if o == nil {
			return nil, fail(unix.EINVAL, "no SRQ %d in this session", h.Handle)
		}
		if op == OpDestroySRQ {
			return nil, s.destroySRQ(h.Handle, o)
		}
		a := o.srq.Query()
		return &SRQAttrMsg{SRQ: h.Handle, MaxWR: uint32(a.MaxWR), MaxSGE: uint32(a.MaxSGE), Limit: uint32(a.Limit)}, nil
	case OpPostSRQRecv:
		return s.postSRQRecv(p)
	}
	return nil, fail(unix.EOPNOTSUPP, "unknown op %d", op)
}

// rxeSRQSlots is the max_wr rdma_rxe gives an SRQ asked for n (1..MaxSRQWR): 2^k − 1
// (rxe_queue_init; rxe_srq_from_init writes it back, ibv_query_srq reports it),
// at most MaxSRQWR.
func rxeSRQSlots(n uint32) int { return int(min(rxeSlots(n), transport.MaxSRQWR)) }

func (s *session) createSRQ(r *CreateSRQReq) (*CreateSRQReply, error) {
	pd := s.pds[r.PD]
	if pd == nil {
		return nil, fail(unix.EINVAL, "no PD %d in this session", r.PD)
	}
	if r.MaxWR == 0 || r.MaxWR > transport.MaxSRQWR {
		return nil, fail(unix.EINVAL, "SRQ max_wr %d: 1 to %d (rdma_rxe's rxe_srq_chk_init refuses 0)", r.MaxWR, transport.MaxSRQWR)
	}
	srq, err := pd.pd.CreateSRQ(transport.SRQAttr{MaxWR: rxeSRQSlots(r.MaxWR), MaxSGE: int(r.MaxSGE), Limit: int(r.Limit)})
	if err != nil {
		return nil, fail(unix.EINVAL, "%v", err)
	}
	h := s.handleID()
	s.srqs[h] = &srqObj{srq: srq, pd: pd}
	pd.refs++
	s.counts.srqs.Add(1)
	s.poller.events.setSRQ(srq, &asyncDest{&s.async, r.Cookie})
	a := srq.Query()
	return &CreateSRQReply{Handle: h, MaxWR: uint32(a.MaxWR), MaxSGE: uint32(a.MaxSGE)}, nil
}

func (s *session) modifySRQ(r *SRQAttrMsg) error {
	o := s.srqs[r.SRQ]
	if o == nil {
		return fail(unix.EINVAL, "no SRQ %d in this session", r.SRQ)
	}
	if r.Mask&^uint32(transport.SRQ_MAX_WR|transport.SRQ_LIMIT) != 0 {
		return fail(unix.EINVAL, "ibv_modify_srq mask %#x: only IBV_SRQ_MAX_WR and IBV_SRQ_LIMIT", r.Mask)
	}
	wr := int(r.MaxWR)
	if r.Mask&uint32(transport.SRQ_MAX_WR) != 0 && r.MaxWR > 0 && r.MaxWR <= transport.MaxSRQWR {
		wr = rxeSRQSlots(r.MaxWR) // out of range: Modify's error names the request
	}
	if err := o.srq.Modify(transport.SRQAttr{MaxWR: wr, Limit: int(r.Limit)}, transport.SRQAttrMask(r.Mask)); err != nil {
		return fail(unix.EINVAL, "%v", err)
	}
	return nil
}

func (s *session) destroySRQ(h uint32, o *srqObj) error {
	if o.refs > 0 {
		return fail(unix.EBUSY, "SRQ %d still has %d QPs: destroy them first", h, o.refs)
	}
	if err := o.srq.Destroy(); err != nil {
		return fail(unix.EBUSY, "%v", err)
	}
	s.poller.events.setSRQ(o.srq, nil)
	o.pd.refs--
	delete(s.srqs, h)
	s.counts.srqs.Add(-1)
	s.sweep()
	return nil
}

// postSRQRecv posts the request's receive WRs in order until one is refused; the
// reply says how many went and the errno of the first that did not.
func (s *session) postSRQRecv(p []byte) (*PostSRQRecvReply, error) {
	var r PostSRQRecvReq
	if len(p) < 8 {
		return nil, fail(unix.EBADMSG, "post srq recv: %d bytes", len(p))
	}
	if err := decode(p[:8], &r); err != nil {
		return nil, err
	}
	o := s.srqs[r.SRQ]
	if o == nil {
		return nil, fail(unix.EINVAL, "no SRQ %d in this session", r.SRQ)
	}
	le := binary.LittleEndian
	b := p[8:]
	var sges [maxSGE]transport.SGE
	out := &PostSRQRecvReply{}
	for range r.Count {
		if len(b) < recvWRSize {
			return nil, fail(unix.EBADMSG, "post srq recv: WR %d is cut short", out.Posted)
		}
		slot, n := le.Uint64(b), le.Uint32(b[8:])
		if slot > 0xFFFFFFFF || n > maxSGE || uint64(len(b)-recvWRSize) < uint64(n)*sgeSize {
			return nil, fail(unix.EBADMSG, "post srq recv: WR %d: slot %d, %d SGEs in %d bytes", out.Posted, slot, n, len(b))
		}
		e := b[recvWRSize:]
		for i := range n {
			g := e[i*sgeSize:]
			sges[i] = transport.SGE{Addr: le.Uint64(g), Length: le.Uint32(g[8:]), LKey: le.Uint32(g[12:])}
		}
		b = e[n*sgeSize:]
		if _, err := o.srq.PostRecv(transport.RecvWR{WRID: slot | recvBit | srqBit, SGList: sges[:n]}); err != nil {
			out.Errno = int32(unix.EINVAL)
			if errors.Is(err, transport.ErrQueueFull) {
				out.Errno = int32(unix.ENOMEM) // as a full ring on an HCA
			}
			return out, nil
		}
		out.Posted++
	}
	return out, nil
}
