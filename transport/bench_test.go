package transport_test

import (
	"fmt"
	"testing"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// benchWrite measures RDMA WRITE engine to engine over the in-memory Pipe, both
// devices driven from this goroutine, keeping depth WRs in flight.
func benchWrite(b *testing.B, size int, mtu roce.MTU) { benchWriteIdle(b, size, mtu, 0, 1) }

// benchWriteIdle is benchWrite with idle connected QPs on the sending device and a
// completion asked for every every-th WR (and the last), as perftest's CQ
// moderation (-Q) does.
func benchWriteIdle(b *testing.B, size int, mtu roce.MTU, idle, every int) {
	p := newPair(b, pairConfig{mtu: mtu, bufSize: 2 * size})
	a, bb := p.a, p.b
	addIdleQPs(b, a, bb, idle)
	const depth = 64
	wr := transport.SendWR{Opcode: transport.WR_RDMA_WRITE, SGList: sge(a, 0, size),
		RemoteAddr: bb.mr.Addr(), RKey: bb.mr.RKey()}
	var wcs [depth]transport.WorkCompletion
	posted, done, total := 0, 0, 3*depth
	step := func() {
		for posted-done < depth && posted < total {
			wr.Flags, wr.WRID = 0, uint64(posted+1) // WRID: the WRs done when it completes
			if (posted+1)%every == 0 || posted+1 == total {
				wr.Flags = transport.SendSignaled
			}
			if _, err := a.qp.PostSend(wr); err != nil {
				b.Fatal(err)
			}
			posted++
		}
		pass(b, a.dev)
		pass(b, bb.dev)
		n := a.cq.Poll(wcs[:])
		for _, wc := range wcs[:n] {
			if wc.Status != transport.WC_SUCCESS {
				b.Fatalf("completion %+v", wc)
			}
			done = int(wc.WRID)
		}
	}
	// Warm up pools and rings, then measure.
	for done < total {
		step()
	}
	posted, done, total = 0, 0, b.N
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for done < total {
		step()
	}
	b.StopTimer()
	pkts := a.dev.Counters().Get(transport.CntSentPkts)
	b.ReportMetric(float64(pkts)/float64(b.N), "pkts/op")
}

func BenchmarkWrite64(b *testing.B) { benchWrite(b, 64, roce.MTU1024) }

// BenchmarkWrite64Moderated is BenchmarkWrite64 with a completion every 16 WRs, as
// perftest's ib_write_bw asks for them (CQ moderation; xroce write_bw -Q).
func BenchmarkWrite64Moderated(b *testing.B) { benchWriteIdle(b, 64, roce.MTU1024, 0, 16) }
func BenchmarkWrite64K(b *testing.B)         { benchWrite(b, 64<<10, roce.MTU4096) }

// pass makes one engine pass; unlike progress it does not call b.Helper, whose
// cost (runtime.Callers) would dwarf an idle pass.
func pass(b *testing.B, d *transport.Device) {
	if _, err := d.Progress(); err != nil {
		b.Fatal(err)
	}
}

// addIdleQPs creates n RC QPs on s's device, one CQ each, and brings them to RTS
// towards peer's QPN: connected and idle, as in a job with many quiet connections.
func addIdleQPs(tb testing.TB, s, peer *side, n int) {
	tb.Helper()
	for i := range n {
		cq := s.dev.CreateCQ(16)
		qp, err := s.pd.CreateQP(transport.QPInitAttr{SendCQ: cq, RecvCQ: cq,
			Cap: transport.QPCap{MaxSendWR: 16, MaxRecvWR: 16}})
		if err != nil {
			tb.Fatalf("QP %d: %v", i, err)
		}
		idle := &side{dev: s.dev, end: s.end, pd: s.pd, cq: cq, qp: qp}
		(&pair{t: tb}).connect(idle, peer, defaults(pairConfig{}), 1, 1)
	}
}

// BenchmarkProgressIdle times one engine pass with nothing to do beside N connected,
// idle QPs. Issue 14's target: the 100,000-QP figure within 2× the 1-QP figure.
func BenchmarkProgressIdle(b *testing.B) {
	for _, n := range []int{1, 1000, 10000, 100000} {
		b.Run(fmt.Sprintf("qps=%d", n), func(b *testing.B) {
			p := newPair(b, pairConfig{})
			addIdleQPs(b, p.a, p.b, n-1) // the pair's own QP is the first
			pass(b, p.a.dev)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				pass(b, p.a.dev)
			}
		})
	}
}

// BenchmarkWrite64Idle is BenchmarkWrite64 with 10,000 connected, idle QPs on the
// sending device beside the active one (and with none, for the ratio in one run).
func BenchmarkWrite64Idle(b *testing.B) {
	for _, n := range []int{0, 10000} {
		b.Run(fmt.Sprintf("idle=%d", n), func(b *testing.B) {
			benchWriteIdle(b, 64, roce.MTU1024, n, 1)
		})
	}
}
