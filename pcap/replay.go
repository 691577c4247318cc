package pcap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// Conn is what Replay needs to emulate one RC connection of the endpoint.
type Conn struct {
	Peer    netip.Addr // the other endpoint's IP address
	QPN     uint32     // the emulated QP: the BTH DestQP of the peer's requests
	PeerQPN uint32     // the peer's QP: the BTH DestQP of the emulated side's responses
	// PSN is the first request PSN the emulated responder expects: the peer's
	// initial send PSN, as its connection message announced it.
	PSN uint32
	// MTU is the path MTU; 0 infers it from the capture (the payload of FIRST and
	// MIDDLE packets; else 1024, or the smallest MTU that holds the largest payload).
	MTU roce.MTU
	// MaxDestRdAtomic is how many READ and atomic requests the responder takes at
	// once (max_dest_rd_atomic); 0 means transport.MaxQPRdAtom.
	MaxDestRdAtomic int
	// Regions are the memory regions the emulated side advertised. Requests with
	// other rkeys get a region inferred from the addresses they name.
	Regions []Region
	// From is the frame index (1-based) where the connection starts, its TCP
	// exchange; frames before it belong to an earlier connection with the same QPNs.
	// 0 means the capture's start.
	From int
	// Source says where the parameters came from, for the report.
	Source string
}

// Region is a memory region of the emulated side.
type Region struct {
	RKey uint32
	VA   uint64 // the address the peer uses for its first byte
	// Len is its size in bytes; 0 means "from VA as far as the captured requests
	// reach" (the real size is not in the exchanges), and requests below VA then
	// extend it down.
	Len uint64
}

// MaxRegion is the most memory, in bytes, Replay emulates for one connection.
const MaxRegion = 64 << 20

// ReplayConfig says which endpoint to emulate and with what parameters.
type ReplayConfig struct {
	As    netip.Addr // the emulated endpoint's IP address
	Conns []Conn     // nil: InferConns
}

// Report is what Replay found, connection by connection.
type Report struct {
	As    netip.Addr
	Conns []ConnReport
}

// ConnReport is the outcome of one connection.
type ConnReport struct {
	Conn    Conn // as replayed: with the inferred MTU
	Fed     int  // peer request frames fed to the engine
	BadICRC int  // of which the capture carries with a bad ICRC
	// DroppedICRC and DroppedOther count the frames the engine dropped: for a bad
	// ICRC (as rdma_rxe drops them, silently), and as malformed or not for its QP.
	DroppedICRC, DroppedOther int
	Sent                      int // responses the engine sent
	Captured                  int // responses the emulated endpoint sent in the capture
	Compared                  int // response pairs compared
	// OwnRequests counts the requests the emulated endpoint sent (it was a requester
	// too, as in rc_pingpong); they are not compared.
	OwnRequests int
	Diffs       []Diff
	// NotCompared counts the captured responses after the point where the engine
	// and the capture parted (an opcode, PSN or syndrome kind differed, or a
	// response was missing or extra): the engine's state differs from there on, so
	// comparing further would only repeat the first difference.
	NotCompared int
	Notes       []string
	Err         error // the connection could not be set up
}

// Diff is one difference: a response pair whose fields differ, a response the
// engine sent that the capture lacks, or a captured response the engine did not send.
type Diff struct {
	Response int    // 1-based position among the connection's responses
	Frame    int    // the captured response's frame; 0 when the capture has none here
	After    int    // the request frame the engine had just been fed when it sent its response; 0 when it sent none
	Sent     string // the engine's response (Describe); "" when it sent none
	Captured string // the captured response (Describe); "" when the capture has none
	Fields   []FieldDiff
	Note     string
}

// FieldDiff is one field that differs.
type FieldDiff struct {
	Field, Sent, Captured string
}

// Differences counts the differences and the connections that failed to set up.
func (r *Report) Differences() int {
	n := 0
	for _, c := range r.Conns {
		n += len(c.Diffs)
		if c.Err != nil {
			n++
		}
	}
	return n
}

// Write prints the report: per connection its parameters, what was fed and
// compared, and every difference with both packets and the fields that differ.
func (r *Report) Write(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "replaying %s: %d connection%s\n", r.As, len(r.Conns), plural(len(r.Conns)))
	for i := range r.Conns {
		c := &r.Conns[i]
		k := &c.Conn
		fmt.Fprintf(&b, "connection %d: QPN 0x%06x at %s ← QPN 0x%06x at %s, first PSN %d, path MTU %d", i+1, k.QPN, r.As, k.PeerQPN, k.Peer, k.PSN, k.MTU.Bytes())
		if k.Source != "" {
			fmt.Fprintf(&b, " (%s)", k.Source)
		}
		b.WriteString("\n")
		if c.Err != nil {
			fmt.Fprintf(&b, "  error: %v\n", c.Err)
			continue
		}
		for _, n := range c.Notes {
			fmt.Fprintf(&b, "  note: %s\n", n)
		}
		fmt.Fprintf(&b, "  %d request%s fed", c.Fed, plural(c.Fed))
		if c.BadICRC > 0 {
			fmt.Fprintf(&b, " (%d with a bad ICRC)", c.BadICRC)
		}
		if c.DroppedICRC > 0 {
			fmt.Fprintf(&b, ", %d dropped by the engine for a bad ICRC", c.DroppedICRC)
		}
		if c.DroppedOther > 0 {
			fmt.Fprintf(&b, ", %d dropped by the engine as malformed or not for its QP", c.DroppedOther)
		}
		fmt.Fprintf(&b, "; %d response%s sent, %d captured, %d compared", c.Sent, plural(c.Sent), c.Captured, c.Compared)
		if c.OwnRequests > 0 {
			fmt.Fprintf(&b, "; %d request%s of %s's own not compared", c.OwnRequests, plural(c.OwnRequests), r.As)
		}
		if len(c.Diffs) == 0 {
			b.WriteString(": no differences\n")
			continue
		}
		fmt.Fprintf(&b, ": %d difference%s\n", len(c.Diffs), plural(len(c.Diffs)))
		for _, d := range c.Diffs {
			fmt.Fprintf(&b, "  response %d", d.Response)
			if d.After > 0 {
				fmt.Fprintf(&b, ", sent after request frame %d", d.After)
			}
			if d.Frame > 0 {
				fmt.Fprintf(&b, ", captured in frame %d", d.Frame)
			}
			b.WriteString(":\n")
			sent, capt := d.Sent, d.Captured
			if sent == "" {
				sent = "nothing"
			}
			if capt == "" {
				capt = "nothing"
			}
			fmt.Fprintf(&b, "    - sent:     %s\n    + captured: %s\n", sent, capt)
			for _, f := range d.Fields {
				fmt.Fprintf(&b, "    %s: sent %s, captured %s\n", f.Field, f.Sent, f.Captured)
			}
			if d.Note != "" {
				fmt.Fprintf(&b, "    %s\n", d.Note)
			}
		}
		if c.NotCompared > 0 {
			fmt.Fprintf(&b, "  the engine and the capture parted at response %d: %d later captured response%s not compared\n",
				c.Diffs[len(c.Diffs)-1].Response, c.NotCompared, plural(c.NotCompared))
		}
	}
	n := r.Differences()
	compared := 0
	for _, c := range r.Conns {
		compared += c.Compared
	}
	switch {
	case n == 0 && compared == 0:
		b.WriteString("replay: nothing compared\n")
	case n == 0:
		b.WriteString("replay: no differences\n")
	default:
		fmt.Fprintf(&b, "replay: %d difference%s\n", n, plural(n))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// packet is a decoded RC frame of the capture.
type packet struct {
	f   *Frame
	p   roce.Packet
	bad bool // ICRC bad
}

// decodeRC returns the capture's RC frames (ICRC good or bad).
func decodeRC(frames []Frame) []*packet {
	var out []*packet
	for i := range frames {
		q := &packet{f: &frames[i]}
		err := q.p.Decode(frames[i].Data)
		if err != nil && err != roce.ErrBadICRC {
			continue
		}
		if q.p.BTH.Opcode.Service() != roce.ServiceRC {
			continue
		}
		q.bad = err == roce.ErrBadICRC
		out = append(out, q)
	}
	return out
}

func isResponse(p *roce.Packet) bool { return p.BTH.Opcode.Info().IsResponse }

// Endpoints returns the IP addresses that send or receive RC frames in the capture,
// in order of appearance.
func Endpoints(frames []Frame) []netip.Addr {
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	for _, q := range decodeRC(frames) {
		for _, a := range []netip.Addr{q.p.SrcAddr(), q.p.DstAddr()} {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	return out
}

// InferConns finds the RC connections of endpoint as from the RoCE frames alone, for
// captures without a TCP exchange: one per (peer address, destination QPN) that the
// peer sends requests to, starting a new one when the PSN jumps by more than 2^20
// after a second of silence (a new run that reused the QPN). PSN is the first
// request's PSN; PeerQPN is the destination QPN of the first frame as sent to the
// peer after that request (a response if there is one); MTU is left to Replay.
func InferConns(frames []Frame, as netip.Addr) []Conn {
	pkts := decodeRC(frames)
	type key struct {
		peer netip.Addr
		qpn  uint32
	}
	last := map[key]*packet{} // the latest request of each connection
	var conns []Conn
	for i, q := range pkts {
		p := &q.p
		if p.DstAddr() != as || isResponse(p) || p.SrcAddr() == as {
			continue
		}
		k := key{p.SrcAddr(), p.BTH.DestQP}
		if l := last[k]; l != nil {
			d := roce.PSNDiff(p.BTH.PSN, l.p.BTH.PSN)
			if (d > 1<<20 || d < -(1<<20)) && q.f.Time.Sub(l.f.Time) > time.Second {
				delete(last, k) // a new run that reused the QPN
			}
		}
		if last[k] == nil {
			c := Conn{Peer: p.SrcAddr(), QPN: p.BTH.DestQP, PSN: p.BTH.PSN, From: q.f.Index,
				Source: fmt.Sprintf("inferred from the RoCE frames from frame %d", q.f.Index)}
			found := false
			for _, r := range pkts[i+1:] {
				if r.p.SrcAddr() == as && r.p.DstAddr() == c.Peer && isResponse(&r.p) {
					c.PeerQPN, found = r.p.BTH.DestQP, true
					break
				}
			}
			for _, r := range pkts[i+1:] {
				if !found && r.p.SrcAddr() == as && r.p.DstAddr() == c.Peer {
					c.PeerQPN, found = r.p.BTH.DestQP, true
				}
			}
			if !found {
				c.Source += "; the peer's QPN is unknown (the endpoint never sent to it)"
			}
			conns = append(conns, c)
		}
		last[k] = q
	}
	return conns
}

// Replay emulates one endpoint of a capture with the engine: for every RC
// connection of that endpoint it builds a responder QP with the captured QPN, the
// expected PSN and the captured memory keys and addresses, feeds it the peer's
// request frames in capture order (one at a time; or, for a capture recorded by a
// Tap, in the batches one Recv call returned), and compares each response the engine
// sends with the response the endpoint sent in the capture.
//
// Compared, response by response in order: the opcode, the PSN, the destination QPN,
// AckReq, the AETH syndrome and MSN, the atomic original value and the payload bytes.
// Not compared, because they legitimately differ between two implementations or
// runs: the Ethernet addresses, IPv4 ID and TTL (IPv6 hop limit) and flow label, the
// IP traffic class, the UDP source port (rdma_rxe derives it from the QPNs,
// rdma_get_udp_sport in ib_verbs.h; a host peer sends from 4791), the checksums,
// and so the ICRC, which covers the IPv4 ID (IBTA Vol 1 Annex A17.3.3 masks only
// the TOS, TTL and header checksum).
//
// Memory: each rkey the requests use gets one region covering the addresses they
// name (or the Region given), filled with what the capture shows of it: the bytes
// the READ responses returned (by majority where several responses cover a byte, so
// one altered response stands out; a byte read once cannot be checked) and the
// original values atomics returned, except where an earlier WRITE or atomic of the
// capture wrote them (the engine does that itself).
//
// Not emulated: the endpoint as a requester (its own requests are counted, not
// compared; the peer's responses to them are not fed), receive queues running dry
// (the emulated side always has receives posted, so it never sends an RNR NAK),
// receive buffers inside an RDMA region (what SENDs write there is not seen by later
// READs and atomics), a memory region smaller than what the requests touch when no
// Region gives its length, and frames lost after the capture point (a capture taken
// before a lossy hop shows frames the endpoint never received; the rxe-loss
// captures are such).
//
// Errors: no valid As, or the capture has no RC frame to or from As. Per-connection
// set-up failures (a region too large, an rkey the engine cannot register) are in
// the connection's Err and count as differences.
func Replay(frames []Frame, cfg ReplayConfig) (*Report, error) {
	as := cfg.As
	if !as.IsValid() {
		return nil, errors.New("pcap: replay needs the address of the endpoint to emulate")
	}
	as = as.Unmap()
	pkts := decodeRC(frames)
	involved := false
	for _, q := range pkts {
		if q.p.SrcAddr() == as || q.p.DstAddr() == as {
			involved = true
			break
		}
	}
	if !involved {
		eps := Endpoints(frames)
		if len(eps) == 0 {
			return nil, errors.New("pcap: the capture has no RoCE RC frames")
		}
		s := make([]string, len(eps))
		for i, a := range eps {
			s[i] = a.String()
		}
		return nil, fmt.Errorf("pcap: no RoCE RC frame to or from %s; the capture's RoCE endpoints are %s", as, strings.Join(s, ", "))
	}
	conns := append([]Conn(nil), cfg.Conns...)
	if cfg.Conns == nil {
		conns = InferConns(frames, as)
	}
	for i := range conns {
		conns[i].Peer = conns[i].Peer.Unmap()
	}
	rep := &Report{As: as}
	// Each RC frame between as and a connection's peer belongs to the connection
	// with the latest start at or before it whose QPN matches.
	evs := make([][]*packet, len(conns))
	for _, q := range pkts {
		p := &q.p
		best := -1
		for i := range conns {
			c := &conns[i]
			fromPeer := p.SrcAddr() == c.Peer && p.DstAddr() == as && p.BTH.DestQP == c.QPN
			toPeer := p.SrcAddr() == as && p.DstAddr() == c.Peer && p.BTH.DestQP == c.PeerQPN
			if (fromPeer || toPeer) && c.From <= q.f.Index && (best < 0 || c.From > conns[best].From) {
				best = i
			}
		}
		if best >= 0 {
			evs[best] = append(evs[best], q)
		}
	}
	for i := range conns {
		rep.Conns = append(rep.Conns, replayConn(as, conns[i], evs[i]))
	}
	return rep, nil
}

// inferMTU returns the path MTU the connection's packets show.
func inferMTU(evs []*packet) (roce.MTU, string) {
	largest := 0
	for _, q := range evs {
		pos := q.p.BTH.Opcode.Info().Position
		if pos == roce.PosFirst || pos == roce.PosMiddle {
			if m, err := roce.MTUFromBytes(len(q.p.Payload)); err == nil {
				return m, fmt.Sprintf("path MTU %d from the payload of frame %d (%v)", m.Bytes(), q.f.Index, q.p.BTH.Opcode)
			}
		}
		largest = max(largest, len(q.p.Payload))
	}
	for _, m := range []roce.MTU{roce.MTU1024, roce.MTU2048, roce.MTU4096} {
		if largest <= m.Bytes() {
			return m, fmt.Sprintf("path MTU %d assumed: no multi-packet message shows it, and the largest payload is %d bytes", m.Bytes(), largest)
		}
	}
	return roce.MTU4096, fmt.Sprintf("path MTU 4096 assumed, though a payload of %d bytes exceeds it", largest)
}

// span is a range of memory under one rkey.
type span struct {
	rkey   uint32
	lo, hi uint64
	exact  bool // given by a Region with a length
	buf    []byte
	v      *votes
}

func (s *span) contains(rkey uint32, va, n uint64) bool {
	return s.rkey == rkey && va >= s.lo && va+n >= va && va+n <= s.hi
}

// votes reconstructs memory contents from the READ responses and atomic results
// that show them: each byte takes the value most responses agree on (the first seen
// on a tie), so one altered response stands out as a difference.
type votes struct {
	n   []uint16 // how often buf's value was seen; 0: never
	alt map[uint64]map[byte]int
}

func (s *span) vote(off uint64, b byte) {
	if s.v == nil {
		s.v = &votes{n: make([]uint16, len(s.buf)), alt: map[uint64]map[byte]int{}}
	}
	v := s.v
	switch {
	case v.n[off] == 0:
		s.buf[off], v.n[off] = b, 1
	case s.buf[off] == b:
		if v.n[off] < ^uint16(0) {
			v.n[off]++
		}
	default:
		if v.alt[off] == nil {
			v.alt[off] = map[byte]int{}
		}
		v.alt[off][b]++
	}
}

// settle applies the majorities.
func (s *span) settle() {
	if s.v == nil {
		return
	}
	for off, m := range s.v.alt {
		best, bn := s.buf[off], int(s.v.n[off])
		for b, n := range m {
			if n > bn || (n == bn && b < best && bn != int(s.v.n[off])) {
				best, bn = b, n
			}
		}
		s.buf[off] = best
	}
	s.v = nil
}

// regions works out the memory regions: the given ones, and for every rkey the
// requests use without a given region, the range they touch.
func regions(c *Conn, evs []*packet, as netip.Addr) ([]*span, []string, error) {
	type rng struct{ lo, hi uint64 }
	used := map[uint32]*rng{}
	var order []uint32
	for _, q := range evs {
		p := &q.p
		if p.SrcAddr() == as || isResponse(p) {
			continue
		}
		var rkey uint32
		var va, n uint64
		switch {
		case p.Headers&roce.HdrAtomicETH != 0:
			rkey, va, n = p.AtomicETH.RKey, p.AtomicETH.VA, 8
		case p.Headers&roce.HdrRETH != 0 && p.RETH.DMALen > 0:
			rkey, va, n = p.RETH.RKey, p.RETH.VA, uint64(p.RETH.DMALen)
		default:
			continue
		}
		if va+n < va {
			continue // wraps: the engine refuses it, as a real responder would
		}
		r := used[rkey]
		if r == nil {
			r = &rng{va, va + n}
			used[rkey] = r
			order = append(order, rkey)
		}
		r.lo, r.hi = min(r.lo, va), max(r.hi, va+n)
	}
	var spans []*span
	var notes []string
	given := map[uint32]bool{}
	for _, g := range c.Regions {
		given[g.RKey] = true
		r := used[g.RKey]
		switch {
		case g.Len > 0:
			if g.VA+g.Len < g.VA {
				return nil, nil, fmt.Errorf("region rkey 0x%08x at 0x%x of %d bytes wraps around", g.RKey, g.VA, g.Len)
			}
			spans = append(spans, &span{rkey: g.RKey, lo: g.VA, hi: g.VA + g.Len, exact: true})
		case r != nil:
			spans = append(spans, &span{rkey: g.RKey, lo: min(g.VA, r.lo), hi: max(g.VA+1, r.hi)})
		}
	}
	for _, k := range order {
		if !given[k] {
			r := used[k]
			spans = append(spans, &span{rkey: k, lo: r.lo, hi: r.hi})
			if len(c.Regions) > 0 {
				notes = append(notes, fmt.Sprintf("rkey 0x%08x was not advertised; it gets a region from the requests' addresses", k))
			}
		}
	}
	total := uint64(0)
	for _, s := range spans {
		n := s.hi - s.lo
		total += n
		if n > MaxRegion || total > MaxRegion {
			return nil, nil, fmt.Errorf("the requests with rkey 0x%08x span %d bytes (0x%x to 0x%x): more than the %d bytes replay emulates", s.rkey, n, s.lo, s.hi, MaxRegion)
		}
		s.buf = make([]byte, n)
	}
	return spans, notes, nil
}

func findSpan(spans []*span, rkey uint32, va, n uint64) *span {
	for _, s := range spans {
		if s.contains(rkey, va, n) {
			return s
		}
	}
	return nil
}

// fillMemory sets the regions' contents from what the capture shows of them: the
// bytes READ responses returned and the original values of atomics, where no earlier
// WRITE or atomic of the capture wrote them.
func fillMemory(spans []*span, evs []*packet, as netip.Addr, pmtu int) {
	type readReq struct {
		psn   uint32
		npkts int
		rkey  uint32
		va    uint64
		n     uint64
	}
	type atomicReq struct {
		rkey    uint32
		va      uint64
		written bool
	}
	written := map[*span][]bool{}
	mark := func(s *span, off, n uint64) {
		w := written[s]
		if w == nil {
			w = make([]bool, len(s.buf))
			written[s] = w
		}
		for i := off; i < off+n && i < uint64(len(w)); i++ {
			w[i] = true
		}
	}
	isWritten := func(s *span, off uint64) bool { w := written[s]; return w != nil && w[off] }
	var reads []readReq
	atomics := map[uint32]atomicReq{}
	var wspan *span // the WRITE in progress
	var woff uint64
	for _, q := range evs {
		p := &q.p
		op := p.BTH.Opcode
		if q.bad {
			continue // the receiver drops it
		}
		if p.SrcAddr() != as && !isResponse(p) {
			switch {
			case op == roce.RC_RDMA_READ_REQUEST:
				n := uint64(p.RETH.DMALen)
				np := max(1, int((n+uint64(pmtu)-1)/uint64(pmtu)))
				reads = append(reads, readReq{p.BTH.PSN, np, p.RETH.RKey, p.RETH.VA, n})
			case op == roce.RC_FETCH_ADD || op == roce.RC_COMPARE_SWAP:
				a := atomicReq{rkey: p.AtomicETH.RKey, va: p.AtomicETH.VA}
				if s := findSpan(spans, a.rkey, a.va, 8); s != nil {
					a.written = isWritten(s, a.va-s.lo)
					mark(s, a.va-s.lo, 8)
				}
				atomics[p.BTH.PSN] = a
			case op&0x1F >= 0x06 && op&0x1F <= 0x0B: // RDMA WRITE
				pos := op.Info().Position
				if pos == roce.PosFirst || pos == roce.PosOnly {
					wspan, woff = findSpan(spans, p.RETH.RKey, p.RETH.VA, uint64(p.RETH.DMALen)), 0
					if wspan != nil {
						woff = p.RETH.VA - wspan.lo
					}
				}
				if wspan != nil {
					mark(wspan, woff, uint64(len(p.Payload)))
					woff += uint64(len(p.Payload))
				}
			}
			continue
		}
		if p.SrcAddr() != as {
			continue
		}
		switch op {
		case roce.RC_RDMA_READ_RESPONSE_FIRST, roce.RC_RDMA_READ_RESPONSE_MIDDLE, roce.RC_RDMA_READ_RESPONSE_LAST, roce.RC_RDMA_READ_RESPONSE_ONLY:
			for i := len(reads) - 1; i >= 0; i-- {
				r := reads[i]
				d := roce.PSNDiff(p.BTH.PSN, r.psn)
				if d < 0 || int(d) >= r.npkts {
					continue
				}
				off := uint64(d) * uint64(pmtu)
				n := min(uint64(len(p.Payload)), r.n-min(off, r.n))
				if s := findSpan(spans, r.rkey, r.va+off, n); s != nil {
					base := r.va + off - s.lo
					for j := uint64(0); j < n; j++ {
						if !isWritten(s, base+j) {
							s.vote(base+j, p.Payload[j])
						}
					}
				}
				break
			}
		case roce.RC_ATOMIC_ACKNOWLEDGE:
			a, ok := atomics[p.BTH.PSN]
			if !ok || a.written {
				continue
			}
			if s := findSpan(spans, a.rkey, a.va, 8); s != nil {
				var v [8]byte
				binary.NativeEndian.PutUint64(v[:], p.AtomicAckETH.OrigRemData)
				for j := range uint64(8) {
					s.vote(a.va-s.lo+j, v[j])
				}
			}
			a.written = true // a retransmitted ACK of the same atomic votes once
			atomics[p.BTH.PSN] = a
		}
	}
	for _, s := range spans {
		s.settle()
	}
}

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

// diffPackets compares the engine's response g with the captured w. structural
// reports a difference after which the two can no longer be compared: the opcode,
// the PSN or the AETH syndrome's kind (ACK, RNR NAK, NAK). msnDelta carries the
// MSN offset of the previous pair, so an offset is reported once, where it starts or
// changes, not on every later response.
func diffPackets(g, w *roce.Packet, msnDelta *int32) (fields []FieldDiff, structural bool) {
	add := func(f, s, c string) { fields = append(fields, FieldDiff{f, s, c}) }
	msnField := -1
	defer func() {
		if msnField >= 0 && !structural {
			fields[msnField].Captured += " (later MSNs that differ by as much are not listed)"
		}
	}()
	if g.BTH.Opcode != w.BTH.Opcode {
		add("opcode", g.BTH.Opcode.String(), w.BTH.Opcode.String())
		structural = true
	}
	if g.BTH.PSN != w.BTH.PSN {
		add("PSN", fmt.Sprint(g.BTH.PSN), fmt.Sprint(w.BTH.PSN))
		structural = true
	}
	if g.BTH.DestQP != w.BTH.DestQP {
		add("destination QPN", fmt.Sprintf("0x%06x", g.BTH.DestQP), fmt.Sprintf("0x%06x", w.BTH.DestQP))
	}
	if g.BTH.AckReq != w.BTH.AckReq {
		add("AckReq", fmt.Sprint(g.BTH.AckReq), fmt.Sprint(w.BTH.AckReq))
	}
	both := g.Headers & w.Headers
	if both&roce.HdrAETH != 0 {
		gs, ws := g.AETH.Syndrome, w.AETH.Syndrome
		if gs != ws {
			add("AETH syndrome", fmt.Sprintf("0x%02x (%s)", uint8(gs), gs), fmt.Sprintf("0x%02x (%s)", uint8(ws), ws))
			if gs.Kind() != ws.Kind() {
				structural = true
			}
		}
		d := roce.PSNDiff(g.AETH.MSN, w.AETH.MSN)
		if d != 0 && d != *msnDelta {
			add("AETH MSN", fmt.Sprint(g.AETH.MSN), fmt.Sprint(w.AETH.MSN))
			msnField = len(fields) - 1
		}
		*msnDelta = d
	}
	if both&roce.HdrAtomicAckETH != 0 && g.AtomicAckETH != w.AtomicAckETH {
		add("atomic original value", fmt.Sprintf("0x%x", g.AtomicAckETH.OrigRemData), fmt.Sprintf("0x%x", w.AtomicAckETH.OrigRemData))
	}
	if g.BTH.Opcode.Info().Payload && w.BTH.Opcode.Info().Payload && !bytes.Equal(g.Payload, w.Payload) {
		gp, wp := g.Payload, w.Payload
		if len(gp) != len(wp) {
			add("payload length", fmt.Sprint(len(gp)), fmt.Sprint(len(wp)))
		}
		first, ndiff := -1, 0
		for i := range min(len(gp), len(wp)) {
			if gp[i] != wp[i] {
				if first < 0 {
					first = i
				}
				ndiff++
			}
		}
		if first >= 0 {
			add(fmt.Sprintf("payload byte %d", first), fmt.Sprintf("0x%02x", gp[first]),
				fmt.Sprintf("0x%02x (%d of %d bytes differ)", wp[first], ndiff, min(len(gp), len(wp))))
		}
	}
	return fields, structural
}

// SortConns orders connections by their start frame.
func SortConns(cs []Conn) {
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].From < cs[j].From })
}
