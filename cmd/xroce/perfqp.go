package main

import (
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/xroce/xroce/cmd/xroce/oob"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// setup creates the PD, buffer, MR, CQ and QPs (in INIT), and our key messages.
func (c *conn) setup() error {
	prov := c.env.prov
	q := c.o.qps
	c.half = max(c.maxSize(), 4096) // perftest's BUFF_SIZE with a 4096-byte cycle buffer
	if c.split() && c.writeOffs() {
		c.half *= 2 // the sizes' places of a verified write_bw -a (writeOff) in the landing half
	}
	if c.o.verifyAll {
		c.half = max(c.half, slotsHalf(c.o.iters, c.o.size)) // every message's slot
	}
	if err := c.checkMemory(q*2*c.half + 2*c.o.guard); err != nil {
		return err
	}
	var err error
	if c.buf, err = c.allocGuarded(q * 2 * c.half); err != nil {
		return err
	}
	if len(c.buf) >= bigBuffer {
		fmt.Fprintf(os.Stderr, "%s: writing the %.1f GiB test buffer once before the test, as perftest does (seconds on a VM)\n", name0(c.t.name), float64(len(c.buf))/(1<<30))
	}
	prefill(c.buf)
	c.mr, err = prov.RegMR(c.buf, c.t.mrAccess())
	if err != nil {
		return err
	}
	depth := c.o.txDepth
	cqe, err := perfCQE(q, depth, c.o.rxDepth)
	if err != nil {
		return err
	}
	if c.cq, err = prov.CreateCQ(cqe); err != nil {
		return err
	}
	outReads := 1
	if c.t.op == transport.WR_RDMA_READ || c.atomic() {
		outReads = 16
	}
	rkey := c.mr.RKey()
	if c.t.op == transport.WR_SEND {
		rkey = 0 // as perftest's send tests advertise
	}
	for i := 0; i < q; i++ {
		qp, err := prov.CreateQP(c.cq, c.cq, transport.QPCap{MaxSendWR: depth, MaxRecvWR: c.o.rxDepth, MaxSendSGE: 1, MaxRecvSGE: 1,
			MaxInlineData: c.o.inline})
		if err != nil {
			return err
		}
		if err := transport.BringUp(qp, transport.QPS_RESET, transport.QPS_INIT, transport.ConnectParams{Access: c.t.qpAccess()}); err != nil {
			return err
		}
		c.qps = append(c.qps, qp)
		vaddr := c.mr.Addr() + uint64(c.base(i))
		if c.split() {
			vaddr += uint64(c.half)
		}
		c.local = append(c.local, oob.Dest{OutReads: outReads, QPN: qp.QPN(), PSN: rand.Uint32() & 0xFFFFFF, RKey: rkey,
			VAddr: vaddr, GID: c.env.gid.GID, SRQN: c.keySRQN()})
	}
	if c.o.verify && !c.o.verifyAll && (!c.client || c.o.bidir) && c.t.op == transport.WR_RDMA_READ {
		for i := range c.qps { // what the client reads: the advertised area
			off := int(c.local[i].VAddr - c.mr.Addr())
			pattern(c.buf[off:off+c.maxSize()], c.readSeed())
		}
	}
	return c.startSize(c.sizes()[0])
}

// startSize gets the buffers ready for a size: with --verify a sender's send areas
// hold the size's pattern, and a READ client's landing areas are cleared; with
// --verify-all every message's slot is filled (fillSlots).
func (c *conn) startSize(size int) error {
	c.size = size
	if c.o.verifyAll {
		c.fillSlots()
		return nil
	}
	if !c.o.verify || c.atomic() || !c.client && !c.t.lat && !c.o.bidir {
		return nil // atomics count from 0; bw servers do not send (but with -b)
	}
	for i := range c.qps {
		b := c.base(i)
		if c.t.op == transport.WR_RDMA_READ {
			if c.client {
				land := b + c.half*boolInt(c.t.lat)
				clear(c.buf[land : land+size])
			}
			continue
		}
		pattern(c.buf[b:b+size], uint64(size))
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// connect moves the QPs to RTR and RTS towards the peer's (between the handshake
// and the barriers), after checking the GIDs are of one kind, and posts the first
// size's receives.
func (c *conn) connect(remote []oob.Dest, mtu roce.MTU) error {
	c.mtu = mtu
	for i, qp := range c.qps {
		if err := c.checkPeerTest(remote[i]); err != nil {
			return err
		}
		if err := c.checkPeerVerifyAll(remote[i]); err != nil {
			return err
		}
		if err := checkPeerGID(c.env.prov.GIDTable(), c.env.gid, remote[i].GID, c.gidOpt()); err != nil {
			return err
		}
		if c.o.rdmaCM {
			continue // the RDMA CM brought it to RTS with the REQ's and REP's values
		}
		timers := transport.DefaultTimers()
		timers.Timeout = uint8(c.o.qpTimeout)
		p := connectParams(remote[i], c.local[i], c.env.gid.Index, mtu, transport.MaxQPRdAtom, c.t.qpAccess())
		p.AH.TrafficClass, p.Timers = uint8(c.o.tclass), &timers
		if err := transport.BringUp(qp, transport.QPS_INIT, transport.QPS_RTS, p); err != nil {
			return err
		}
	}
	// Receivers post their receives before the barriers let the sender start. Each
	// completed receive is posted again, so there are as many for every later size
	// of a -a run, and those take the largest size.
	if c.t.op == transport.WR_SEND && (!c.client || c.t.lat || c.o.bidir) {
		for i := range c.qps {
			for n := 0; n < min(c.o.rxDepth, c.o.iters); n++ {
				if err := c.postRecv(i, uint64(n)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// wrID tags a work request with its QP's index.
func wrID(qp int, n uint64) uint64 { return uint64(qp)<<40 | n }

// wrQP is the QP index of a work request's ID.
func wrQP(id uint64) int { return int(id >> 40) }

// postRecv posts receive id on QP qp: at the QP's landing area, or with
// --verify-all at message id's slot.
func (c *conn) postRecv(qp int, id uint64) error {
	off := c.base(qp) + c.half*boolInt(c.split())
	if c.o.verifyAll {
		off += slotOff(int(id), c.size)
	}
	n := max(c.size, 1)
	if c.o.all {
		n = c.half
	}
	_, err := c.qps[qp].PostRecv(transport.RecvWR{WRID: wrID(qp, id), SGList: []transport.SGE{{Addr: c.mr.Addr() + uint64(off), Length: uint32(n), LKey: c.mr.LKey()}}})
	return err
}

// writeOff is where a WRITE lands in the peer's area: at 0, except in a verified
// write_bw -a run, where each size has its own place (size-2: the sizes before it
// end there) so that the server can check every size after the run.
func (c *conn) writeOff() uint64 {
	if c.writeOffs() {
		return uint64(c.size - 2)
	}
	return 0
}

// writeOffs says whether each size of the run writes to a place of its own.
func (c *conn) writeOffs() bool {
	return c.o.all && c.o.verify && c.t.op == transport.WR_RDMA_WRITE && !c.t.lat
}

// split says whether each QP's area is split in two: what this side sends from
// (and its READs land in) at base, and what it advertises to the peer -- where
// the peer's WRITEs and SENDs land and its READs read from -- half after it: in
// the latency tests, and with -b, where both sides send at once.
func (c *conn) split() bool { return c.t.lat || c.o.bidir }

// wr is the test's work request on QP qp.
func (c *conn) wr(qp int) transport.SendWR {
	w := transport.SendWR{Opcode: c.t.op, Flags: transport.SendSignaled, RemoteAddr: c.remote[qp].VAddr + c.writeOff(),
		RKey: c.remote[qp].RKey, CompareAdd: 1,
		SGList: []transport.SGE{{Addr: c.mr.Addr() + uint64(c.base(qp)), Length: uint32(c.size), LKey: c.mr.LKey()}}}
	if c.t.op == transport.WR_RDMA_READ && c.t.lat {
		w.SGList[0].Addr += uint64(c.half)
	}
	if c.size <= c.o.inline && c.t.op != transport.WR_RDMA_READ && !c.atomic() {
		w.Flags |= transport.SendInline
	}
	return w
}

// perfCQE is the depth of the CQ that q QPs of depth send WRs and rx receives
// (-q, -t, -r) share: room to spare, at most the device's max_cqe, and never less
// than every WR they may have outstanding, which an error would flush into it (a
// CQ that overruns fails the QPs). An error when even that exceeds max_cqe, naming
// the flags: perftest's own CQs hold tx_depth × num_qps, so -q 64 runs there.
func perfCQE(q, depth, rx int) (int, error) {
	need := q * (depth + rx)
	if need > transport.MaxCQE {
		return 0, fmt.Errorf("-q %d with -t %d and -r %d: the QPs may have %d work requests outstanding, more than a CQ holds (max_cqe %d): lower -q, -t or -r",
			q, depth, rx, need, transport.MaxCQE)
	}
	return max(need, min(max(4, 2*q)*(depth+max(512, rx)), transport.MaxCQE)), nil
}
