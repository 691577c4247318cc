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

// replayConn emulates one connection: it works out the memory the peer's requests
// use and what the capture shows of it, starts an engine that stands in for the
// endpoint, feeds it the peer's requests and compares its responses with the
// captured ones.
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
	r := &connReplay{as: as, c: c, pmtu: c.MTU.Bytes(), rep: &rep, out: make([][]byte, 64),
		nextPSN: c.PSN & roce.PSNMask}
	macUs, macPeer, maxMsg := r.survey(evs)
	spans, notes, err := regions(&c, evs, as)
	rep.Notes = append(rep.Notes, notes...)
	if err != nil {
		rep.Err = err
		return rep
	}
	fillMemory(spans, evs, as, r.pmtu)
	if err := r.open(spans, macUs, macPeer, maxMsg); err != nil {
		rep.Err = err
		return rep
	}
	defer r.dev.Close()
	r.topUp()
	r.feed(evs)
	r.finish()
	return rep
}

// connReplay is one connection's replay in progress: the engine that stands in for
// the emulated endpoint, the link end that stands for the peer, the responses not
// compared yet, and the PSN gaps of the requests fed so far.
type connReplay struct {
	as   netip.Addr
	c    Conn
	pmtu int         // path MTU in bytes
	rep  *ConnReport // what it found so far

	// The engine.
	clock  *transport.FakeClock
	dev    *transport.Device
	peer   *transport.PipeEnd // the link's far end: what is sent on it comes from the peer
	cq     *transport.CompletionQueue
	qp     *transport.QueuePair
	rbuf   []byte // the receive buffer every receive WR points at
	rmr    *transport.MemoryRegion
	posted int // receives posted and not completed

	// Feeding.
	batch     [][]byte  // requests to send together
	last      *packet   // the last request fed
	recorder  Direction // how the requests fed were recorded: DirRX by the endpoint, DirTX by the peer, else DirUnknown
	out       [][]byte  // the far end's receive scratch
	t0, start time.Time // the first request's capture time, and the clock's time then

	// The PSNs of the requests fed: the gaps, how many of them a difference has
	// explained, the PSN expected next, and the last request's PSN and frame.
	gaps             []gap
	usedGap          int
	nextPSN, prevPSN uint32
	prevFrame        int

	// Comparing.
	got      []sent    // the engine's responses not compared yet
	want     []*packet // the captured responses not compared yet
	parted   bool      // a structural difference: no more comparing
	msnDelta int32     // MSN offset of the last pair (diffPackets)
}

// replayRecvs is how many receive WRs the emulated side keeps posted.
const replayRecvs = 256

// survey counts the captured responses and the endpoint's own requests, and returns
// the endpoint's and the peer's MAC addresses (the last frames' ones) and the longest
// message the peer sends, in bytes (at least 1).
func (r *connReplay) survey(evs []*packet) (macUs, macPeer [6]byte, maxMsg int) {
	var requests int
	maxMsg, msg := 1, 0
	for _, q := range evs {
		p := &q.p
		if p.SrcAddr() == r.as {
			macUs, macPeer = p.Eth.Src, p.Eth.Dst
			if isResponse(p) {
				r.rep.Captured++
			} else {
				r.rep.OwnRequests++
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
		r.rep.Notes = append(r.rep.Notes, "the peer sent no requests on this connection")
	}
	return macUs, macPeer, maxMsg
}

// open starts the engine on a Pipe whose far end stands for the peer, registers
// spans under their captured rkeys and addresses, and brings a QP with the captured
// QPN up to RTR (the emulated side only answers) with a receive buffer of maxMsg
// bytes. On error the engine is closed.
func (r *connReplay) open(spans []*span, macUs, macPeer [6]byte, maxMsg int) (err error) {
	c := &r.c
	ep, eq := transport.NewPipe(
		transport.PipeConfig{MAC: macUs, Addrs: []netip.Addr{r.as}, MTU: 9000},
		transport.PipeConfig{MAC: macPeer, Addrs: []netip.Addr{c.Peer}, MTU: 9000})
	r.peer, r.clock = eq, transport.NewFakeClock()
	r.start = r.clock.Now()
	if r.dev, err = transport.Open(ep, transport.Options{Clock: r.clock}); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			r.dev.Close()
		}
	}()
	pd := r.dev.AllocPD()
	all := transport.AccessLocalWrite | transport.AccessRemoteWrite | transport.AccessRemoteRead | transport.AccessRemoteAtomic
	for _, s := range spans {
		if s.rkey>>8 == 0 {
			return fmt.Errorf("rkey 0x%08x: the engine keeps a region's table index in the key's upper 24 bits and index 0 is reserved, so it cannot register this key", s.rkey)
		}
		if _, err := pd.RegMRWith(s.buf, all, transport.MROptions{IOVA: s.lo, HasIOVA: true, Key: s.rkey}); err != nil {
			return fmt.Errorf("registering rkey 0x%08x at 0x%x (%d bytes): %w", s.rkey, s.lo, len(s.buf), err)
		}
	}
	r.cq = r.dev.CreateCQ(4 * replayRecvs)
	if c.QPN < 2 || c.QPN > 0xFFFFFF {
		return fmt.Errorf("QPN 0x%x cannot be an RC QP (0 and 1 are the special QPs)", c.QPN)
	}
	r.qp, err = pd.CreateQP(transport.QPInitAttr{SendCQ: r.cq, RecvCQ: r.cq, Cap: transport.QPCap{MaxRecvWR: 2 * replayRecvs, MaxRecvSGE: 1}, QPN: c.QPN})
	if err != nil {
		return err
	}
	sgid, ok := r.dev.GIDTable().Find(roce.GIDFromAddr(r.as))
	if !ok {
		return fmt.Errorf("no GID for %s", r.as)
	}
	rd := c.MaxDestRdAtomic
	if rd <= 0 {
		rd = transport.MaxQPRdAtom
	}
	// The emulated side only answers: its QP stops at RTR.
	err = transport.BringUp(r.qp, transport.QPS_RESET, transport.QPS_RTR, transport.ConnectParams{
		Access: transport.AccessRemoteWrite | transport.AccessRemoteRead | transport.AccessRemoteAtomic,
		AH:     transport.AddressHandle{DGID: roce.GIDFromAddr(c.Peer), SGIDIndex: sgid}, PathMTU: c.MTU,
		DestQPN: c.PeerQPN, RQPSN: c.PSN & roce.PSNMask, MaxDestRdAtomic: uint8(min(rd, transport.MaxQPRdAtom))})
	if err != nil {
		return err
	}
	// Receives: every WR points at one buffer that holds the longest message; they
	// are topped up after each batch, so the emulated side never runs out.
	r.rbuf = make([]byte, maxMsg)
	r.rmr, err = pd.RegMR(r.rbuf, transport.AccessLocalWrite)
	return err
}

// topUp reaps the completions and posts receives until replayRecvs are posted.
func (r *connReplay) topUp() {
	var wcs [64]transport.WorkCompletion
	for {
		n := r.cq.Poll(wcs[:])
		if n == 0 {
			break
		}
		for _, wc := range wcs[:n] {
			if wc.Opcode&transport.WC_RECV != 0 { // RECV and RECV_RDMA_WITH_IMM
				r.posted--
			}
		}
	}
	for ; r.posted < replayRecvs; r.posted++ {
		if _, err := r.qp.PostRecv(transport.RecvWR{WRID: uint64(r.posted), SGList: []transport.SGE{{Addr: r.rmr.Addr(), Length: uint32(len(r.rbuf)), LKey: r.rmr.LKey()}}}); err != nil {
			break
		}
	}
}

// feed feeds the peer's requests to the engine in batches, collecting the engine's
// and the captured responses and comparing them as they come, until the engine and
// the capture part.
func (r *connReplay) feed(evs []*packet) {
	for _, q := range evs {
		p := &q.p
		if p.SrcAddr() == r.as {
			if !isResponse(p) {
				continue
			}
			r.flush()
			if r.parted {
				r.rep.NotCompared++
				continue
			}
			r.want = append(r.want, q)
			r.compare()
			continue
		}
		if isResponse(p) || r.parted {
			continue // the peer's responses to the endpoint's own requests are not fed
		}
		// A batch: the consecutive "rx" frames of a Tap capture stamped alike.
		if r.last != nil && !(q.f.Dir == DirRX && r.last.f.Dir == DirRX && q.f.Time.Equal(r.last.f.Time)) {
			r.flush()
		}
		if r.t0.IsZero() {
			r.t0 = q.f.Time
		}
		if d := q.f.Time.Sub(r.t0); d > 0 {
			r.clock.Set(r.start.Add(d))
		}
		if !q.bad {
			r.trackPSN(q)
		} else {
			r.rep.BadICRC++
		}
		r.batch = append(r.batch, q.f.Data)
		r.last, r.recorder = q, q.f.Dir
		r.rep.Fed++
	}
	r.flush()
	r.compare()
}

// trackPSN notes a gap when request q skips PSNs, and advances the PSN expected
// next past it (a READ request takes a PSN per response packet).
func (r *connReplay) trackPSN(q *packet) {
	p := &q.p
	psn := p.BTH.PSN
	if roce.PSNDiff(psn, r.nextPSN) > 0 {
		r.gaps = append(r.gaps, gap{psn: r.nextPSN, got: psn, prevPSN: r.prevPSN, frame: q.f.Index, prevFrm: r.prevFrame})
	}
	n := 1
	if p.BTH.Opcode == roce.RC_RDMA_READ_REQUEST {
		n = max(1, int((uint64(p.RETH.DMALen)+uint64(r.pmtu)-1)/uint64(r.pmtu)))
	}
	if e := roce.PSNAdd(psn, n); roce.PSNDiff(e, r.nextPSN) > 0 {
		r.nextPSN = e
	}
	r.prevPSN, r.prevFrame = psn, q.f.Index
}

// flush sends the batch to the engine, runs the engine until it settles, collects
// what it sent, tops up the receives and compares.
func (r *connReplay) flush() {
	if len(r.batch) == 0 {
		return
	}
	if n, err := r.peer.Send(r.batch); n != len(r.batch) || err != nil {
		r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("the in-memory link refused frames at frame %d: %v", r.last.f.Index, err))
	}
	r.batch = r.batch[:0]
	for i := 0; ; i++ {
		busy, err := r.dev.Progress()
		if err != nil {
			r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("the engine's link failed after frame %d: %v", r.last.f.Index, err))
			break
		}
		if !busy {
			break
		}
		r.clock.Advance(time.Microsecond)
		if i > 1_000_000 {
			r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("the engine did not settle after frame %d", r.last.f.Index))
			break
		}
	}
	for {
		n, err := r.peer.Recv(r.out)
		if err != nil || n == 0 {
			break
		}
		for _, fr := range r.out[:n] {
			var s sent
			s.after = r.last.f.Index
			if err := s.p.Decode(append([]byte(nil), fr...)); err != nil {
				r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("the engine sent an undecodable frame after frame %d: %v", r.last.f.Index, err))
				continue
			}
			r.rep.Sent++
			r.got = append(r.got, s)
		}
	}
	r.topUp()
	r.compare()
}

// compare compares the sent and captured responses pairwise while both have one and
// the two have not parted.
func (r *connReplay) compare() {
	for !r.parted && len(r.got) > 0 && len(r.want) > 0 {
		g, w := &r.got[0], r.want[0]
		r.rep.Compared++
		fields, structural := diffPackets(&g.p, &w.p, &r.msnDelta)
		if len(fields) > 0 {
			d := Diff{Response: r.rep.Compared, Frame: w.f.Index, After: g.after, Sent: Describe(&g.p), Captured: Describe(&w.p), Fields: fields}
			if w.bad {
				d.Note = "the captured response's ICRC is bad"
			} else if r.recorder != DirRX && coalesced(&g.p, &w.p) {
				d.Note = r.unbatched()
			}
			r.addDiff(d, structural)
		}
		r.got, r.want = r.got[1:], r.want[1:]
	}
}

// coalesced says whether the captured ACK w covers more than the engine's ACK g:
// the endpoint acknowledged several requests with one.
func coalesced(g, w *roce.Packet) bool {
	ack := func(p *roce.Packet) bool {
		return p.BTH.Opcode == roce.RC_ACKNOWLEDGE && p.AETH.Syndrome.Kind() == roce.KindACK
	}
	return ack(g) && ack(w) && roce.PSNDiff(w.BTH.PSN, g.BTH.PSN) > 0
}

// unbatched explains an ACK the endpoint coalesced over a receive batch and the
// engine did not: the capture does not say which requests arrived together.
func (r *connReplay) unbatched() string {
	who := "this capture does not say which requests arrived together (classic pcap, or another recorder than xroce's --pcap)"
	if r.recorder == DirTX {
		who = "this capture is the peer's recording (the requests are its tx frames), which cannot say which of them arrived together at the endpoint"
	}
	return "the endpoint acknowledged several requests with one ACK (coalesced over a receive batch); " + who + ", so replay feeds them one at a time: replay the endpoint's own recording, made with --pcap FILE.pcapng"
}

// addDiff records d. A structural difference parts the engine and the capture, and
// its note names the PSN gaps of the requests fed up to it that no earlier
// difference named.
func (r *connReplay) addDiff(d Diff, structural bool) {
	if structural {
		r.parted = true
		// The PSN gaps of the requests fed so far explain most partings.
		for r.usedGap < len(r.gaps) && d.After > 0 && r.gaps[r.usedGap].frame <= d.After {
			g := r.gaps[r.usedGap]
			r.usedGap++
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
	r.rep.Diffs = append(r.rep.Diffs, d)
}

// finish reports what is left when the capture ends: the first response only one
// side has (unless they parted before), the captured responses not compared, the
// frames the engine dropped, and a QP in the error state.
func (r *connReplay) finish() {
	rep := r.rep
	if !r.parted {
		switch {
		case len(r.got) > 0:
			g := r.got[0]
			r.addDiff(Diff{Response: rep.Compared + 1, After: g.after, Sent: Describe(&g.p), Note: "the capture has no response here"}, true)
		case len(r.want) > 0:
			w := r.want[0]
			d := Diff{Response: rep.Compared + 1, Frame: w.f.Index, Captured: Describe(&w.p), Note: "the engine sent no response here"}
			if r.last != nil {
				d.After = r.last.f.Index
			}
			r.addDiff(d, true)
			r.want = r.want[1:]
		}
	}
	rep.NotCompared += len(r.want)
	cnt := r.dev.Counters()
	rep.DroppedICRC = int(cnt.Get(transport.CntRcvdICRCErr))
	rep.DroppedOther = int(cnt.Get(transport.CntRcvdMalformed) + cnt.Get(transport.CntRcvdUnknownQP))
	if r.qp.State() == transport.QPS_ERR {
		rep.Notes = append(rep.Notes, "the emulated QP went to the error state")
	}
}
