package transport_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/xroce/xroce/transport"
)

// TestRunConcurrent runs both devices with Run on the system clock, posts from other
// goroutines and waits on the CQ with a context, as an application would.
func TestRunConcurrent(t *testing.T) {
	ea, eb := transport.NewPipe(
		transport.PipeConfig{MAC: macA, Addrs: []netip.Addr{addrA}, Faults: transport.Faults{Seed: 1, Loss: 0.01}},
		transport.PipeConfig{MAC: macB, Addrs: []netip.Addr{addrB}, Faults: transport.Faults{Seed: 2, Loss: 0.01}})
	p := &pair{t: t, clock: nil}
	a, b := p.newRealSide(ea), p.newRealSide(eb)
	c := defaults(pairConfig{timeout: 8})
	p.a, p.b = a, b
	p.connect(a, b, c, 1, 2)
	p.connect(b, a, c, 2, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range []*side{a, b} {
		wg.Add(1)
		go func(s *side) {
			defer wg.Done()
			if err := s.dev.Run(ctx); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Run: %v", err)
			}
		}(s)
	}
	const n = 200
	fill(a.buf[:n*1000], 5)
	// The poster reports its error on a channel (t.Fatal belongs to the test's own
	// goroutine) and cancels the run, so the wait below ends at once.
	posted := make(chan error, 1)
	go func() {
		err := func() error {
			for i := 0; i < n; i++ {
				if err := postRecv(b, uint64(i), i*1000, 1000); err != nil {
					return fmt.Errorf("PostRecv %d: %w", i, err)
				}
			}
			for i := 0; i < n; i++ {
				if err := postSend(a, transport.SendWR{WRID: uint64(i), Opcode: transport.WR_SEND, SGList: sge(a, i*1000, 1000),
					Flags: transport.SendSignaled}); err != nil {
					return fmt.Errorf("PostSend %d: %w", i, err)
				}
			}
			return nil
		}()
		if err != nil {
			cancel()
		}
		posted <- err
	}()
	var got []transport.WorkCompletion
	buf := make([]transport.WorkCompletion, 16)
	for len(got) < n {
		if err := b.cq.Wait(ctx); err != nil {
			select {
			case perr := <-posted:
				if perr != nil {
					t.Fatal(perr)
				}
			default:
			}
			t.Fatalf("after %d receives: %v", len(got), err)
		}
		k := b.cq.Poll(buf)
		got = append(got, buf[:k]...)
	}
	for i, wc := range got {
		checkWC(t, wc, uint64(i), transport.WC_SUCCESS, transport.WC_RECV, 1000)
	}
	if err := <-posted; err != nil {
		t.Fatal(err)
	}
	checkBytes(t, "received", b.buf[:n*1000], a.buf[:n*1000])
	cancel()
	wg.Wait()
}

func (p *pair) newRealSide(end *transport.PipeEnd) *side {
	dev, err := transport.Open(end, transport.Options{})
	must(p.t, err)
	s := &side{dev: dev, end: end, pd: dev.AllocPD(), cq: dev.CreateCQ(1 << 12), buf: make([]byte, 1<<20)}
	s.mr, err = s.pd.RegMR(s.buf, transport.AccessLocalWrite|transport.AccessRemoteWrite|transport.AccessRemoteRead)
	must(p.t, err)
	s.qp, err = s.pd.CreateQP(transport.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq,
		Cap: transport.QPCap{MaxSendWR: 1024, MaxRecvWR: 1024}})
	must(p.t, err)
	return s
}
