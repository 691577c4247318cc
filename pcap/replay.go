package pcap

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/xroce/xroce/roce"
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

// SortConns orders connections by their start frame.
func SortConns(cs []Conn) {
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].From < cs[j].From })
}
