package xdp_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xroce/xroce/bpf"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/xdp"
)

// BenchmarkAFXDP measures, in one run on one veth pair between two namespaces
// (native XDP, copy mode, PMTU 1024): the raw AF_XDP ceiling (1098-byte RoCE frames
// sent by one link and received by the other, no engine), then engine RDMA WRITE at
// 64 B (message rate) and 64 KiB (goodput), and the ratios engine / raw. Each phase
// runs for phaseTime; b.N is not used.
func BenchmarkAFXDP(b *testing.B) {
	const phaseTime = 2 * time.Second
	n := newTestNet(b, 1500, false)
	la, err := xdp.Open(xdp.Config{Interface: n.ifA, Mode: bpf.ModeNative, Netns: nsPath(n.nsA)})
	if err != nil {
		b.Fatal(err)
	}
	defer la.Close()
	lb, err := xdp.Open(xdp.Config{Interface: n.ifB, Mode: bpf.ModeNative, Netns: nsPath(n.nsB)})
	if err != nil {
		b.Fatal(err)
	}
	defer lb.Close()

	// Raw: a valid RDMA_WRITE_MIDDLE frame with 1024 bytes of payload, A → B.
	mac, err := la.Resolve(n.ipB)
	if err != nil {
		b.Fatal(err)
	}
	p := roce.Packet{Eth: roce.Ethernet{Src: la.HardwareAddr(), Dst: mac},
		IPv4: roce.IPv4{FlagsFrag: 0x4000, TTL: 64, Src: n.ipA.As4(), Dst: n.ipB.As4()},
		UDP:  roce.UDP{SrcPort: 0xc000, DstPort: roce.UDPPort}, BTH: roce.BTH{Opcode: roce.RC_RDMA_WRITE_MIDDLE, PKey: 0xffff, DestQP: 99},
		Payload: make([]byte, 1024)}
	frame := make([]byte, p.Len())
	if _, err := p.Encode(frame); err != nil {
		b.Fatal(err)
	}
	batch := make([][]byte, 64)
	for i := range batch {
		batch[i] = frame
	}
	var received atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), phaseTime)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rx := make([][]byte, 64)
		for ctx.Err() == nil {
			k, _ := lb.Recv(rx)
			received.Add(int64(k))
			if k == 0 {
				lb.Wait(time.Now().Add(time.Millisecond))
			}
		}
	}()
	start := time.Now()
	for ctx.Err() == nil {
		if k, _ := la.Send(batch); k == 0 {
			time.Sleep(time.Microsecond)
		}
	}
	wg.Wait()
	cancel()
	rawPPS := float64(received.Load()) / time.Since(start).Seconds()

	// Engine WRITE at 64 B and 64 KiB.
	ea, eb := newEndpoint(b, la, 1<<20), newEndpoint(b, lb, 1<<20)
	connect(b, ea, eb, n.ipB, roce.MTU1024)
	connect(b, eb, ea, n.ipA, roce.MTU1024)
	stop := run(b, ea, eb)
	defer stop()
	writeRate := func(size int) float64 {
		wr := transport.SendWR{Opcode: transport.WR_RDMA_WRITE, SGList: sge(ea, 0, size), Flags: transport.SendSignaled,
			RemoteAddr: eb.mr.Addr(), RKey: eb.mr.RKey()}
		const depth = 64
		wcs := make([]transport.WorkCompletion, depth)
		inflight, done := 0, 0
		start := time.Now()
		for time.Since(start) < phaseTime || inflight > 0 {
			for inflight < depth && time.Since(start) < phaseTime {
				if _, err := ea.qp.PostSend(wr); err != nil {
					b.Fatal(err)
				}
				inflight++
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := ea.cq.Wait(ctx); err != nil {
				b.Fatalf("WRITE %d: %v %v", size, err, nonzero(ea.dev.Counters().Map()))
			}
			cancel()
			k := ea.cq.Poll(wcs)
			for _, wc := range wcs[:k] {
				if wc.Status != transport.WC_SUCCESS {
					b.Fatalf("completion %+v", wc)
				}
			}
			inflight -= k
			done += k
		}
		return float64(done) / time.Since(start).Seconds()
	}
	w64 := writeRate(64)
	w64k := writeRate(64 << 10)
	b.ReportMetric(rawPPS, "raw_pps")
	b.ReportMetric(rawPPS*1024/1e6, "raw_payload_MB/s")
	b.ReportMetric(w64, "write64B_msg/s")
	b.ReportMetric(w64k*65536/1e6, "write64KiB_MB/s")
	b.ReportMetric(w64/rawPPS, "ratio_write64B/raw_pps")
	b.ReportMetric(w64k*65536/(rawPPS*1024), "ratio_write64KiB/raw_payload")
}
