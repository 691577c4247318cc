package pcap

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/xroce/xroce/roce"
)

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
// requests use without a given region, the range they touch -- unless a region
// was given with its length (the endpoint's memory is then known, and another
// rkey is one it would refuse: an rkey violation replays as one).
func regions(c *Conn, evs []*packet, as netip.Addr) ([]*span, []string, error) {
	type rng struct {
		lo, hi uint64
		n      int // requests
	}
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
			r = &rng{lo: va, hi: va + n}
			used[rkey] = r
			order = append(order, rkey)
		}
		r.lo, r.hi = min(r.lo, va), max(r.hi, va+n)
		r.n++
	}
	var spans []*span
	var notes []string
	given := map[uint32]bool{}
	exact := false // a region was given with its length: the endpoint's memory is known
	for _, g := range c.Regions {
		given[g.RKey] = true
		exact = exact || g.Len > 0
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
		if !given[k] && exact {
			// As the endpoint: an rkey of none of its regions is refused (NAK
			// remote access error), which a capture of such a request shows.
			notes = append(notes, fmt.Sprintf("rkey 0x%08x is not a given region's: the engine refuses its requests, as the endpoint would", k))
			continue
		}
		if !given[k] {
			r := used[k]
			spans = append(spans, &span{rkey: k, lo: r.lo, hi: r.hi})
			if len(c.Regions) > 0 {
				notes = append(notes, fmt.Sprintf("rkey 0x%08x was not advertised; it gets a region from the requests' addresses", k))
			}
		}
	}
	spans, clash := oneKeyPerIndex(spans, given, func(k uint32) int {
		if r := used[k]; r != nil {
			return r.n
		}
		return 0
	})
	notes = append(notes, clash...)
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

// oneKeyPerIndex keeps one span of the rkeys that share a key index (the upper 24
// bits, the engine's region table index; the lower 8 are the key's variant, as in
// rdma_rxe's and mlx5's keys): one memory region cannot answer to two of them, so
// the endpoint refused all but one -- the given one, else the one with the most
// requests (count), else the first. A capture with a corrupted rkey shows such a
// pair. The notes name the rkeys dropped.
func oneKeyPerIndex(spans []*span, given map[uint32]bool, count func(uint32) int) ([]*span, []string) {
	keep := map[uint32]*span{} // by index
	for _, s := range spans {
		k := keep[s.rkey>>8]
		if k == nil || (given[s.rkey] && !given[k.rkey]) || (given[s.rkey] == given[k.rkey] && count(s.rkey) > count(k.rkey)) {
			keep[s.rkey>>8] = s
		}
	}
	var out []*span
	var notes []string
	for _, s := range spans {
		k := keep[s.rkey>>8]
		if k == s {
			out = append(out, s)
			continue
		}
		notes = append(notes, fmt.Sprintf("rkey 0x%08x and rkey 0x%08x share a key index, which one region cannot answer to: the engine refuses the requests of 0x%08x (%d), as the endpoint would have", s.rkey, k.rkey, s.rkey, count(s.rkey)))
	}
	return out, notes
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
			case op.Is(roce.ClassRead):
				n := uint64(p.RETH.DMALen)
				np := max(1, int((n+uint64(pmtu)-1)/uint64(pmtu)))
				reads = append(reads, readReq{p.BTH.PSN, np, p.RETH.RKey, p.RETH.VA, n})
			case op.Is(roce.ClassAtomic):
				a := atomicReq{rkey: p.AtomicETH.RKey, va: p.AtomicETH.VA}
				if s := findSpan(spans, a.rkey, a.va, 8); s != nil {
					a.written = isWritten(s, a.va-s.lo)
					mark(s, a.va-s.lo, 8)
				}
				atomics[p.BTH.PSN] = a
			case op.Is(roce.ClassWrite):
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
		switch {
		case op.Is(roce.ClassReadResponse):
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
		case op == roce.RC_ATOMIC_ACKNOWLEDGE:
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
