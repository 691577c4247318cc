package pcap

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// sent is a response the engine sent.
type sent struct {
	p     roce.Packet
	after int // the last request frame fed before it
}

// gap is a PSN the captured requests skip: the first missing PSN, the PSN of the
// frame that jumps over it, and the request before.
type gap struct {
	psn, got, prevPSN uint32
	frame, prevFrm    int
}

// replayConn emulates one connection.
func replayConn(as netip.Addr, c Conn, evs []*packet) (rep ConnReport) {
	rep.Conn = c
	if c.MTU == 0 {
		m, why := inferMTU(evs)
		rep.Conn.MTU, c.MTU = m, m
		rep.Notes = append(rep.Notes, why)
	}
	if !c.MTU.Valid() {
		rep.Err = fmt.Errorf("path MTU %d is not an IB MTU", c.MTU)
		return rep
	}
	pmtu := c.MTU.Bytes()
	var requests int
	var macUs, macPeer [6]byte
	maxMsg, msg := 1, 0
	for _, q := range evs {
		p := &q.p
		if p.SrcAddr() == as {
			macUs, macPeer = p.Eth.Src, p.Eth.Dst
			if isResponse(p) {
				rep.Captured++
			} else {
				rep.OwnRequests++
			}
			continue
		}
		macPeer, macUs = p.Eth.Src, p.Eth.Dst
		if isResponse(p) {
			continue
		}
		requests++
		switch pos := p.BTH.Opcode.Info().Position; pos {
		case roce.PosFirst, roce.PosOnly:
			msg = len(p.Payload)
		default:
			msg += len(p.Payload)
		}
		maxMsg = max(maxMsg, msg)
	}
	if requests == 0 {
		rep.Notes = append(rep.Notes, "the peer sent no requests on this connection")
	}
	spans, notes, err := regions(&c, evs, as)
	rep.Notes = append(rep.Notes, notes...)
	if err != nil {
		rep.Err = err
		return rep
	}
	fillMemory(spans, evs, as, pmtu)

	// The engine: a Pipe whose far end stands for the peer.
	ep, eq := transport.NewPipe(
		transport.PipeConfig{MAC: macUs, Addrs: []netip.Addr{as}, MTU: 9000},
		transport.PipeConfig{MAC: macPeer, Addrs: []netip.Addr{c.Peer}, MTU: 9000})
	clock := transport.NewFakeClock()
	dev, err := transport.Open(ep, transport.Options{Clock: clock})
	if err != nil {
		rep.Err = err
		return rep
	}
	defer dev.Close()
	pd := dev.AllocPD()
	all := transport.AccessLocalWrite | transport.AccessRemoteWrite | transport.AccessRemoteRead | transport.AccessRemoteAtomic
	for _, s := range spans {
		if s.rkey>>8 == 0 {
			rep.Err = fmt.Errorf("rkey 0x%08x: the engine keeps a region's table index in the key's upper 24 bits and index 0 is reserved, so it cannot register this key", s.rkey)
			return rep
		}
		if _, err := pd.RegMRWith(s.buf, all, transport.MROptions{IOVA: s.lo, HasIOVA: true, Key: s.rkey}); err != nil {
			rep.Err = fmt.Errorf("registering rkey 0x%08x at 0x%x (%d bytes): %w", s.rkey, s.lo, len(s.buf), err)
			return rep
		}
	}
	const nrecv = 256
	cq := dev.CreateCQ(4 * nrecv)
	if c.QPN < 2 || c.QPN > 0xFFFFFF {
		rep.Err = fmt.Errorf("QPN 0x%x cannot be an RC QP (0 and 1 are the special QPs)", c.QPN)
		return rep
	}
	qp, err := pd.CreateQP(transport.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: transport.QPCap{MaxRecvWR: 2 * nrecv, MaxRecvSGE: 1}, QPN: c.QPN})
	if err != nil {
		rep.Err = err
		return rep
	}
	sgid, ok := dev.GIDTable().Find(roce.GIDFromAddr(as))
	if !ok {
		rep.Err = fmt.Errorf("no GID for %s", as)
		return rep
	}
	rd := c.MaxDestRdAtomic
	if rd <= 0 {
		rd = transport.MaxQPRdAtom
	}
	// The emulated side only answers: its QP stops at RTR.
	err = transport.BringUp(qp, transport.QPS_RESET, transport.QPS_RTR, transport.ConnectParams{
		Access: transport.AccessRemoteWrite | transport.AccessRemoteRead | transport.AccessRemoteAtomic,
		AH:     transport.AddressHandle{DGID: roce.GIDFromAddr(c.Peer), SGIDIndex: sgid}, PathMTU: c.MTU,
		DestQPN: c.PeerQPN, RQPSN: c.PSN & roce.PSNMask, MaxDestRdAtomic: uint8(min(rd, transport.MaxQPRdAtom))})
	if err != nil {
		rep.Err = err
		return rep
	}
	// Receives: every WR points at one buffer that holds the longest message; they
	// are topped up after each batch, so the emulated side never runs out.
	rbuf := make([]byte, maxMsg)
	rmr, err := pd.RegMR(rbuf, transport.AccessLocalWrite)
	if err != nil {
		rep.Err = err
		return rep
	}
	posted := 0
	topUp := func() {
		var wcs [64]transport.WorkCompletion
		for {
			n := cq.Poll(wcs[:])
			if n == 0 {
				break
			}
			for _, wc := range wcs[:n] {
				if wc.Opcode&transport.WC_RECV != 0 { // RECV and RECV_RDMA_WITH_IMM

					posted--
				}
			}
		}
		for ; posted < nrecv; posted++ {
			if _, err := qp.PostRecv(transport.RecvWR{WRID: uint64(posted), SGList: []transport.SGE{{Addr: rmr.Addr(), Length: uint32(len(rbuf)), LKey: rmr.LKey()}}}); err != nil {
				break
			}
		}
	}
	topUp()

	var got []sent
	var want []*packet
	var batch [][]byte
	var last *packet // the last request fed
	parted := false
	var gaps []gap
	nextPSN, prevPSN, prevFrame := c.PSN&roce.PSNMask, uint32(0), 0
	usedGap := 0
	var t0 time.Time
	start := clock.Now()
	out := make([][]byte, 64)
	addDiff := func(d Diff, structural bool) {
		if structural {
			parted = true
			// The PSN gaps of the requests fed so far explain most partings.
			for usedGap < len(gaps) && d.After > 0 && gaps[usedGap].frame <= d.After {
				g := gaps[usedGap]
				usedGap++
				note := fmt.Sprintf("the captured requests skip PSN %d: frame %d carries PSN %d", g.psn, g.frame, g.got)
				if g.prevFrm > 0 {
					note += fmt.Sprintf(", after frame %d with PSN %d", g.prevFrm, g.prevPSN)
				}
				if d.Note != "" {
					d.Note += "; "
				}
				d.Note += note
			}
		}
		rep.Diffs = append(rep.Diffs, d)
	}
	msnDelta := int32(0)
	compare := func() {
		for !parted && len(got) > 0 && len(want) > 0 {
			g, w := &got[0], want[0]
			rep.Compared++
			fields, structural := diffPackets(&g.p, &w.p, &msnDelta)
			if len(fields) > 0 {
				d := Diff{Response: rep.Compared, Frame: w.f.Index, After: g.after, Sent: Describe(&g.p), Captured: Describe(&w.p), Fields: fields}
				if w.bad {
					d.Note = "the captured response's ICRC is bad"
				}
				addDiff(d, structural)
			}
			got, want = got[1:], want[1:]
		}
	}
	flush := func() {
		if len(batch) == 0 {
			return
		}
		if n, err := eq.Send(batch); n != len(batch) || err != nil {
			rep.Notes = append(rep.Notes, fmt.Sprintf("the in-memory link refused frames at frame %d: %v", last.f.Index, err))
		}
		batch = batch[:0]
		for i := 0; dev.Progress(); i++ {
			clock.Advance(time.Microsecond)
			if i > 1_000_000 {
				rep.Notes = append(rep.Notes, fmt.Sprintf("the engine did not settle after frame %d", last.f.Index))
				break
			}
		}
		for {
			n, err := eq.Recv(out)
			if err != nil || n == 0 {
				break
			}
			for _, fr := range out[:n] {
				var s sent
				s.after = last.f.Index
				if err := s.p.Decode(append([]byte(nil), fr...)); err != nil {
					rep.Notes = append(rep.Notes, fmt.Sprintf("the engine sent an undecodable frame after frame %d: %v", last.f.Index, err))
					continue
				}
				rep.Sent++
				got = append(got, s)
			}
		}
		topUp()
		compare()
	}
	for _, q := range evs {
		p := &q.p
		if p.SrcAddr() == as {
			if !isResponse(p) {
				continue
			}
			flush()
			if parted {
				rep.NotCompared++
				continue
			}
			want = append(want, q)
			compare()
			continue
		}
		if isResponse(p) || parted {
			continue // the peer's responses to the endpoint's own requests are not fed
		}
		// A batch: the consecutive "rx" frames of a Tap capture stamped alike.
		if last != nil && !(q.f.Dir == DirRX && last.f.Dir == DirRX && q.f.Time.Equal(last.f.Time)) {
			flush()
		}
		if t0.IsZero() {
			t0 = q.f.Time
		}
		if d := q.f.Time.Sub(t0); d > 0 {
			clock.Set(start.Add(d))
		}
		if !q.bad {
			psn := p.BTH.PSN
			if roce.PSNDiff(psn, nextPSN) > 0 {
				gaps = append(gaps, gap{psn: nextPSN, got: psn, prevPSN: prevPSN, frame: q.f.Index, prevFrm: prevFrame})
			}
			n := 1
			if p.BTH.Opcode == roce.RC_RDMA_READ_REQUEST {
				n = max(1, int((uint64(p.RETH.DMALen)+uint64(pmtu)-1)/uint64(pmtu)))
			}
			if e := roce.PSNAdd(psn, n); roce.PSNDiff(e, nextPSN) > 0 {
				nextPSN = e
			}
			prevPSN, prevFrame = psn, q.f.Index
		} else {
			rep.BadICRC++
		}
		batch = append(batch, q.f.Data)
		last = q
		rep.Fed++
	}
	flush()
	compare()
	if !parted {
		switch {
		case len(got) > 0:
			g := got[0]
			addDiff(Diff{Response: rep.Compared + 1, After: g.after, Sent: Describe(&g.p), Note: "the capture has no response here"}, true)
		case len(want) > 0:
			w := want[0]
			d := Diff{Response: rep.Compared + 1, Frame: w.f.Index, Captured: Describe(&w.p), Note: "the engine sent no response here"}
			if last != nil {
				d.After = last.f.Index
			}
			addDiff(d, true)
			want = want[1:]
		}
	}
	rep.NotCompared += len(want)
	cnt := dev.Counters()
	rep.DroppedICRC = int(cnt.Get(transport.CntRcvdICRCErr))
	rep.DroppedOther = int(cnt.Get(transport.CntRcvdMalformed) + cnt.Get(transport.CntRcvdUnknownQP))
	if qp.State() == transport.QPS_ERR {
		rep.Notes = append(rep.Notes, "the emulated QP went to the error state")
	}
	return rep
}
