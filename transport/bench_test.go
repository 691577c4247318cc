package transport_test

import (
	"testing"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// benchWrite measures RDMA WRITE engine to engine over the in-memory Pipe, both
// devices driven from this goroutine, keeping depth WRs in flight.
func benchWrite(b *testing.B, size int, mtu roce.MTU) {
	p := newPair(b, pairConfig{mtu: mtu, bufSize: 2 * size})
	a, bb := p.a, p.b
	const depth = 64
	wr := transport.SendWR{Opcode: transport.WR_RDMA_WRITE, SGList: sge(a, 0, size), Flags: transport.SendSignaled,
		RemoteAddr: bb.mr.Addr(), RKey: bb.mr.RKey()}
	var wcs [depth]transport.WorkCompletion
	posted, done := 0, 0
	step := func() {
		for posted-done < depth && posted < b.N {
			if _, err := a.qp.PostSend(wr); err != nil {
				b.Fatal(err)
			}
			posted++
		}
		a.dev.Progress()
		bb.dev.Progress()
		n := a.cq.Poll(wcs[:])
		for _, wc := range wcs[:n] {
			if wc.Status != transport.WC_SUCCESS {
				b.Fatalf("completion %+v", wc)
			}
		}
		done += n
	}
	// Warm up pools and rings, then measure.
	for i := 0; i < 3*depth; i++ {
		step()
	}
	posted, done = 0, 0
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for done < b.N {
		step()
	}
	b.StopTimer()
	pkts := a.dev.Counters().Get(transport.CntSentPkts)
	b.ReportMetric(float64(pkts)/float64(b.N), "pkts/op")
}

func BenchmarkWrite64(b *testing.B)  { benchWrite(b, 64, roce.MTU1024) }
func BenchmarkWrite64K(b *testing.B) { benchWrite(b, 64<<10, roce.MTU4096) }
