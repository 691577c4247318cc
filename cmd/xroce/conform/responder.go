package conform

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// Request is one request packet the client sent to the suite's QP, as received.
type Request struct {
	At     time.Duration `json:"at"` // since the test began (the exchange's end)
	Opcode roce.Opcode   `json:"opcode"`
	PSN    int           `json:"psn"` // offset from the client's first PSN
	// PSNs is how many PSNs the request takes: 1, or a READ's response packets
	// (its DMA length over the path MTU, at least 1).
	PSNs   int    `json:"psns"`
	Pass   int    `json:"pass"` // from 1 (observedPass)
	AckReq bool   `json:"ackreq"`
	Reply  string `json:"reply"` // what the suite did with it
}

// responder is the suite's RC responder for one responder-role scenario: it
// answers each request packet of the client as the first matching Rule says,
// and records it. Its "normal" behaviour is a correct responder's (IBTA Vol 1
// §9.7.5.1) over a buffer of its own.
type responder struct {
	c     *Conn // addressing; Peer.QPN is the client's QPN, EPSN its first PSN
	link  transport.Link
	rules []Rule
	mem   []byte // the advertised region: base .. base+len(mem)
	base  uint64
	rkey  uint32
	start time.Time

	ep         int    // the PSN offset expected next
	msn        uint32 // messages completed
	nakPending bool   // a NAK sequence error or RNR NAK names ep: drop what lies beyond until it comes
	writeVA    uint64 // the next byte of the multi-packet WRITE in progress
	atomics    map[int]uint64
	lastACK    *Frame // the last ACK or NAK sent (duplicate_ack resends it)
	mute       bool   // ack_lost: execute, send nothing
	pass       int    // the current pass of the client's requests
	passNext   int    // the PSN offset after the last request's: below it starts a pass
	reqs       []Request
}

// rule returns the rule for request packet n (from 1) of pass k: the first
// whose Packets holds n and Passes k, or normal.
func (r *responder) rule(n, k int) *Rule {
	for i := range r.rules {
		if r.rules[i].Packets.Has(n) && r.rules[i].Passes.Has(k) {
			return &r.rules[i]
		}
	}
	return &Rule{Reply: replies["normal"]}
}

// handle answers one packet from the client. Packets that are not requests
// (a stray ACK) are left alone. An error means the link failed.
func (r *responder) handle(p *roce.Packet, now time.Time) error {
	op := p.BTH.Opcode
	if !requestOp(op) {
		return nil
	}
	off := r.c.Offset(p.BTH.PSN)
	psns := 1
	if op == roce.RC_RDMA_READ_REQUEST {
		mtu := r.c.MTU.Bytes()
		psns = max(1, int((uint64(p.RETH.DMALen)+uint64(mtu)-1)/uint64(mtu)))
	}
	if len(r.reqs) == 0 || off < r.passNext {
		r.pass++ // as passes() groups them
	}
	r.passNext = off + psns
	rule := r.rule(len(r.reqs)+1, r.pass)
	r.reqs = append(r.reqs, Request{At: now.Sub(r.start), Opcode: op, PSN: off, PSNs: psns, Pass: r.pass, AckReq: p.BTH.AckReq, Reply: rule.Reply.Name})
	switch rule.Reply.Kind {
	case replySilence:
		return nil
	case replyNAK:
		at := off
		if rule.PSN != nil {
			at = *rule.PSN
		}
		if rule.Reply.NAK == roce.NAKPSNSequenceError {
			r.ep, r.nakPending = at, true
		}
		return r.ack(at, roce.NAKSyndrome(rule.Reply.NAK), r.msn)
	case replyRNR:
		if off != r.ep {
			return r.normal(p, off, nil)
		}
		timer := uint8(1)
		if rule.Timer != nil {
			timer = *rule.Timer
		}
		r.nakPending = true
		return r.ack(off, roce.RNRNAKSyndrome(timer), r.msn)
	case replyGhost:
		msn := (r.msn + 1) & 0xFFFFFF
		if rule.MSN != nil {
			msn = *rule.MSN
		}
		return r.ack(*rule.PSN, roce.ACKSyndrome(0x1F), msn)
	case replyDuplicate:
		stale := r.lastACK
		if err := r.normal(p, off, nil); err != nil {
			return err
		}
		for _, f := range []*Frame{stale, r.lastACK} {
			if f != nil {
				if err := r.send(f); err != nil {
					return err
				}
			}
		}
		return nil
	case replyReadPartial:
		return r.normal(p, off, rule.Respond)
	case replyAckLost:
		r.mute = true
		defer func() { r.mute = false }()
	}
	return r.normal(p, off, nil)
}

// normal answers as a correct responder does. respond, when not nil, limits a
// READ's response packets to those numbers (from 0).
func (r *responder) normal(p *roce.Packet, off int, respond []int) error {
	op := p.BTH.Opcode
	info := op.Info()
	switch {
	case off < r.ep: // a duplicate (IBTA Vol 1 §9.7.5.1.2; rxe_resp.c duplicate_request)
		switch {
		case op == roce.RC_RDMA_READ_REQUEST:
			return r.read(p, off, respond)
		case info.Headers&roce.HdrAtomicETH != 0:
			if orig, ok := r.atomics[off]; ok {
				return r.sendFrame(&Frame{Opcode: Opcode{roce.RC_ATOMIC_ACKNOWLEDGE}, PSN: off,
					AETH: &FrameAETH{Syndrome: uint8(roce.ACKSyndrome(0x1F)), MSN: r.msn}, orig: orig})
			}
			return nil
		}
		return r.ack(r.ep-1, roce.ACKSyndrome(0x1F), r.msn) // C9-105: the latest PSN
	case off > r.ep: // beyond a gap: one NAK, then silence until ep comes (§9.7.5.1.1)
		if r.nakPending {
			return nil
		}
		r.nakPending = true
		return r.ack(r.ep, roce.NAKSyndrome(roce.NAKPSNSequenceError), r.msn)
	}
	r.nakPending = false
	switch {
	case op == roce.RC_RDMA_READ_REQUEST:
		r.msn = (r.msn + 1) & 0xFFFFFF
		return r.read(p, off, respond)
	case info.Headers&roce.HdrAtomicETH != 0:
		return r.atomic(p, off)
	}
	if info.Headers&roce.HdrRETH != 0 {
		r.writeVA = p.RETH.VA
	}
	if info.Headers&roce.HdrRETH != 0 || op.Is(roce.ClassWrite) {
		if i, ok := r.span(r.writeVA, len(p.Payload)); ok {
			copy(r.mem[i:], p.Payload)
		}
		r.writeVA += uint64(len(p.Payload))
	}
	r.ep++
	if pos := info.Position; pos == roce.PosLast || pos == roce.PosOnly {
		r.msn = (r.msn + 1) & 0xFFFFFF
	}
	if !p.BTH.AckReq {
		return nil
	}
	return r.ack(off, roce.ACKSyndrome(0x1F), r.msn)
}

// span returns where [va, va+n) lies in the buffer, if it does.
func (r *responder) span(va uint64, n int) (int, bool) {
	if va < r.base || va-r.base > uint64(len(r.mem)) || uint64(n) > uint64(len(r.mem))-(va-r.base) {
		return 0, false
	}
	return int(va - r.base), true
}

// read answers a READ request at PSN offset off with the buffer's data, one
// response packet per path MTU (FIRST, MIDDLE..., LAST, or ONLY), each
// numbered from 0 and sent if respond (nil: all) lists it. A READ outside the
// buffer gets NAK remote access error.
func (r *responder) read(p *roce.Packet, off int, respond []int) error {
	i, ok := r.span(p.RETH.VA, int(p.RETH.DMALen))
	if !ok || p.RETH.RKey != r.rkey {
		return r.ack(off, roce.NAKSyndrome(roce.NAKRemoteAccessError), r.msn)
	}
	mtu := r.c.MTU.Bytes()
	data := r.mem[i : i+int(p.RETH.DMALen)]
	n := max(1, (len(data)+mtu-1)/mtu)
	if off+n > r.ep {
		r.ep = off + n
	}
	want := map[int]bool{}
	for _, k := range respond {
		want[k] = true
	}
	for k := 0; k < n; k++ {
		if respond != nil && !want[k] {
			continue
		}
		op := roce.RC_RDMA_READ_RESPONSE_MIDDLE
		switch {
		case n == 1:
			op = roce.RC_RDMA_READ_RESPONSE_ONLY
		case k == 0:
			op = roce.RC_RDMA_READ_RESPONSE_FIRST
		case k == n-1:
			op = roce.RC_RDMA_READ_RESPONSE_LAST
		}
		chunk := data[min(k*mtu, len(data)):min((k+1)*mtu, len(data))]
		f := &Frame{Opcode: Opcode{op}, PSN: off + k, payload: chunk}
		if op != roce.RC_RDMA_READ_RESPONSE_MIDDLE {
			f.AETH = &FrameAETH{Syndrome: uint8(roce.ACKSyndrome(0x1F)), MSN: r.msn}
		}
		if err := r.sendFrame(f); err != nil {
			return err
		}
	}
	return nil
}

// atomic executes a FETCH_ADD or COMPARE_SWAP in sequence on the buffer's
// 8 bytes (little-endian) and answers with the original value, which it keeps
// for a duplicate (IBTA Vol 1 §9.7.5.1.2, C9-...: a duplicate atomic is
// answered from the saved result, not executed again).
func (r *responder) atomic(p *roce.Packet, off int) error {
	a := p.AtomicETH
	i, ok := r.span(a.VA, 8)
	if !ok || a.RKey != r.rkey {
		return r.ack(off, roce.NAKSyndrome(roce.NAKRemoteAccessError), r.msn)
	}
	if a.VA%8 != 0 {
		return r.ack(off, roce.NAKSyndrome(roce.NAKInvalidRequest), r.msn)
	}
	orig := binary.LittleEndian.Uint64(r.mem[i:])
	v := orig + a.SwapAdd
	if p.BTH.Opcode == roce.RC_COMPARE_SWAP {
		v = orig
		if orig == a.Compare {
			v = a.SwapAdd
		}
	}
	binary.LittleEndian.PutUint64(r.mem[i:], v)
	r.atomics[off] = orig
	r.ep++
	r.msn = (r.msn + 1) & 0xFFFFFF
	return r.sendFrame(&Frame{Opcode: Opcode{roce.RC_ATOMIC_ACKNOWLEDGE}, PSN: off,
		AETH: &FrameAETH{Syndrome: uint8(roce.ACKSyndrome(0x1F)), MSN: r.msn}, orig: orig})
}

// ack sends an ACKNOWLEDGE with PSN offset off, the syndrome and the MSN, and
// keeps it as the last one sent.
func (r *responder) ack(off int, syn roce.Syndrome, msn uint32) error {
	f := &Frame{Opcode: Opcode{roce.RC_ACKNOWLEDGE}, PSN: off, AETH: &FrameAETH{Syndrome: uint8(syn), MSN: msn}}
	r.lastACK = f
	return r.send(f)
}

// sendFrame builds and sends a response frame.
func (r *responder) sendFrame(f *Frame) error { return r.send(f) }

// send builds and sends f.
func (r *responder) send(f *Frame) error {
	if r.mute {
		return nil
	}
	b, err := r.c.Build(f)
	if err != nil {
		return fmt.Errorf("building %v: %w", f.Opcode.Opcode, err)
	}
	x := exchange{c: r.c, link: r.link}
	return x.send(b)
}
