package transport_test

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/test/captures"
	"github.com/xroce/xroce/transport"
)

// Replay against rdma_rxe: the request frames of real captures are fed, one at a
// time, to a responder set up with the captured QPN, PSN, rkey and addresses, and
// what it answers must equal what rdma_rxe answered: opcode, PSN, destination QPN,
// AETH syndrome and MSN, atomic result and payload. Each source of captures (the
// repository's, and the shared ones when present) is replayed on its own.

type capFrame struct {
	time time.Time
	data []byte
	pkt  roce.Packet
}

// connections splits a capture's RoCE frames into runs separated by more than a
// second of silence: each perftest or rc_pingpong run is one connection.
func connections(t *testing.T, s captures.Source, file string) [][]capFrame {
	frames, err := pcap.ReadFile(s.Path(t, file))
	must(t, err)
	var runs [][]capFrame
	var last time.Time
	for _, f := range frames {
		var p roce.Packet
		if err := p.Decode(f.Data); err != nil {
			continue
		}
		if len(runs) == 0 || f.Time.Sub(last) > time.Second {
			runs = append(runs, nil)
		}
		last = f.Time
		runs[len(runs)-1] = append(runs[len(runs)-1], capFrame{f.Time, f.Data, p})
	}
	return runs
}

var (
	rxeServer = netip.MustParseAddr("10.77.0.11")
	rxeClient = netip.MustParseAddr("10.77.0.12")
)

func TestReplayAgainstRxe(t *testing.T) {
	captures.Run(t, replayAgainstRxe)
}

func replayAgainstRxe(t *testing.T, s captures.Source) {
	for _, file := range []string{"ib_write_bw.pcap", "ib_read_bw.pcap", "ib_send_bw.pcap", "ib_atomic_bw.pcap", "ibv_rc_pingpong.pcap"} {
		runs := connections(t, s, file)
		// perftest's bandwidth tests and rc_pingpong: two runs (64 and 2500
		// bytes); ib_atomic_bw: one.
		if want := 2 - btoi(file == "ib_atomic_bw.pcap"); len(runs) != want {
			t.Fatalf("%s: %d runs, want %d", file, len(runs), want)
		}
		for i, run := range runs {
			t.Run(fmt.Sprintf("%s/run%d", file, i+1), func(t *testing.T) { replayRun(t, run) })
		}
	}
}

func isResponse(p *roce.Packet) bool { return p.BTH.Opcode.Is(roce.ClassResponse) }

func replayRun(t *testing.T, run []capFrame) {
	var requests, want []*roce.Packet
	var reqFrames [][]byte
	for i := range run {
		p := &run[i].pkt
		switch {
		case p.SrcAddr() == rxeClient && !isResponse(p):
			requests = append(requests, p)
			reqFrames = append(reqFrames, run[i].data)
		case p.SrcAddr() == rxeServer && isResponse(p):
			want = append(want, p)
		}
	}
	if len(requests) == 0 || len(want) == 0 {
		t.Fatalf("%d requests, %d responses", len(requests), len(want))
	}
	serverQPN, clientQPN := requests[0].BTH.DestQP, want[0].BTH.DestQP

	// The server's memory: one region covering every address the requests name, with
	// the captured rkey, holding what the READ responses returned and, for atomics,
	// the first original value.
	lo, hi, rkey := ^uint64(0), uint64(0), uint32(0)
	for _, p := range requests {
		va, n, key := p.RETH.VA, uint64(p.RETH.DMALen), p.RETH.RKey
		if p.Headers&roce.HdrAtomicETH != 0 {
			va, n, key = p.AtomicETH.VA, 8, p.AtomicETH.RKey
		} else if p.Headers&roce.HdrRETH == 0 {
			continue
		}
		lo, hi, rkey = min(lo, va), max(hi, va+n), key
	}
	ep, eq := transport.NewPipe(
		transport.PipeConfig{MAC: [6]byte{0x52, 0x54, 0x00, 0x77, 0x00, 0x0b}, Addrs: []netip.Addr{rxeServer}},
		transport.PipeConfig{MAC: [6]byte{0x52, 0x54, 0x00, 0x77, 0x00, 0x0c}, Addrs: []netip.Addr{rxeClient}})
	clock := transport.NewFakeClock()
	dev, err := transport.Open(ep, transport.Options{Clock: clock})
	must(t, err)
	pd := dev.AllocPD()
	var mem []byte
	if rkey != 0 {
		mem = make([]byte, hi-lo)
		fillFromReadResponses(requests, want, mem, lo)
		// Each atomic target holds, before the first atomic on it, the value that
		// atomic's ATOMIC_ACKNOWLEDGE returned.
		seen := map[uint64]bool{}
		for _, r := range requests {
			if r.Headers&roce.HdrAtomicETH == 0 || seen[r.AtomicETH.VA] {
				continue
			}
			seen[r.AtomicETH.VA] = true
			for _, w := range want {
				if w.BTH.Opcode == roce.RC_ATOMIC_ACKNOWLEDGE && w.BTH.PSN == r.BTH.PSN {
					binary.NativeEndian.PutUint64(mem[r.AtomicETH.VA-lo:], w.AtomicAckETH.OrigRemData)
				}
			}
		}
		_, err := pd.RegMRWith(mem, transport.AccessLocalWrite|transport.AccessRemoteWrite|transport.AccessRemoteRead|
			transport.AccessRemoteAtomic, transport.MROptions{IOVA: lo, HasIOVA: true, Key: rkey})
		must(t, err)
	}
	cq := dev.CreateCQ(4096)
	qp, err := pd.CreateQP(transport.QPInitAttr{SendCQ: cq, RecvCQ: cq, QPN: serverQPN})
	must(t, err)
	recvBuf := make([]byte, 1<<20)
	rmr, err := pd.RegMR(recvBuf, transport.AccessLocalWrite)
	must(t, err)
	must(t, transport.BringUp(qp, transport.QPS_RESET, transport.QPS_RTR, transport.ConnectParams{
		Access: transport.AccessRemoteWrite | transport.AccessRemoteRead | transport.AccessRemoteAtomic,
		AH:     transport.AddressHandle{DGID: roce.GIDFromAddr(rxeClient), SGIDIndex: 1}, PathMTU: roce.MTU1024,
		DestQPN: clientQPN, RQPSN: requests[0].BTH.PSN, MaxDestRdAtomic: 16}))
	for i := 0; i < 64; i++ {
		_, err := qp.PostRecv(transport.RecvWR{WRID: uint64(i), SGList: []transport.SGE{
			{Addr: rmr.Addr() + uint64(i)*16384, Length: 16384, LKey: rmr.LKey()}}})
		must(t, err)
	}

	var got []roce.Packet
	out := make([][]byte, 64)
	for _, f := range reqFrames {
		if n, err := eq.Send([][]byte{f}); n != 1 || err != nil {
			t.Fatalf("inject: %v", err)
		}
		for progress(t, dev) {
			clock.Advance(time.Microsecond)
		}
		for {
			n, err := eq.Recv(out)
			must(t, err)
			if n == 0 {
				break
			}
			for _, fr := range out[:n] {
				var p roce.Packet
				must(t, p.Decode(append([]byte(nil), fr...)))
				got = append(got, p)
			}
		}
	}
	if len(got) != len(want) {
		t.Fatalf("responder sent %d packets %v, rxe sent %d %v", len(got), summary(got), len(want), summary(derefs(want)))
	}
	for i := range got {
		g, w := &got[i], want[i]
		if g.BTH.Opcode != w.BTH.Opcode || g.BTH.PSN != w.BTH.PSN || g.BTH.DestQP != w.BTH.DestQP ||
			g.AETH != w.AETH || g.AtomicAckETH != w.AtomicAckETH || string(g.Payload) != string(w.Payload) ||
			g.BTH.AckReq != w.BTH.AckReq || g.BTH.PadCnt != w.BTH.PadCnt {
			t.Errorf("response %d: got %s PSN %d QP 0x%x %+v %+v %d bytes; rxe sent %s PSN %d QP 0x%x %+v %+v %d bytes",
				i, g.BTH.Opcode, g.BTH.PSN, g.BTH.DestQP, g.AETH, g.AtomicAckETH, len(g.Payload),
				w.BTH.Opcode, w.BTH.PSN, w.BTH.DestQP, w.AETH, w.AtomicAckETH, len(w.Payload))
		}
	}
	// Writes and sends landed: the recorded payloads are in memory.
	for _, p := range requests {
		if p.BTH.Opcode == roce.RC_RDMA_WRITE_ONLY {
			checkBytes(t, "written bytes", mem[p.RETH.VA-lo:][:len(p.Payload)], p.Payload)
		}
	}
}

// fillFromReadResponses writes what each READ returned at the addresses it read.
func fillFromReadResponses(requests, responses []*roce.Packet, mem []byte, base uint64) {
	for _, r := range requests {
		if r.BTH.Opcode != roce.RC_RDMA_READ_REQUEST {
			continue
		}
		off := r.RETH.VA - base
		for _, p := range responses {
			d := roce.PSNDiff(p.BTH.PSN, r.BTH.PSN)
			if d >= 0 && int(d)*1024 < int(r.RETH.DMALen) && p.BTH.Opcode != roce.RC_ACKNOWLEDGE {
				copy(mem[off+uint64(d)*1024:], p.Payload)
			}
		}
	}
}

func derefs(ps []*roce.Packet) []roce.Packet {
	out := make([]roce.Packet, len(ps))
	for i, p := range ps {
		out[i] = *p
	}
	return out
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
