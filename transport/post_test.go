package transport_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// stallLink is a Pipe end whose Send, once armed, blocks until released, as a link
// stuck in a slow system call would: the engine then sits in its pass holding the
// engine lock. Resolve can be made to block the same way.
type stallLink struct {
	*transport.PipeEnd
	stallSend    chan struct{} // closed: Send stalls
	inSend       chan struct{} // receives a value when a stalled Send begins
	release      chan struct{} // closed: stalled calls return
	stallResolve chan struct{}
	inResolve    chan struct{}
}

func newStallLink(end *transport.PipeEnd) *stallLink {
	return &stallLink{PipeEnd: end, stallSend: make(chan struct{}), inSend: make(chan struct{}, 1),
		release: make(chan struct{}), stallResolve: make(chan struct{}), inResolve: make(chan struct{}, 1)}
}

func (l *stallLink) Send(frames [][]byte) (int, error) {
	l.stall(l.stallSend, l.inSend)
	return l.PipeEnd.Send(frames)
}

func (l *stallLink) Resolve(ip netip.Addr) ([6]byte, error) {
	l.stall(l.stallResolve, l.inResolve)
	return l.PipeEnd.Resolve(ip)
}

// stall blocks until release when armed is closed, telling entered first.
func (l *stallLink) stall(armed, entered chan struct{}) {
	select {
	case <-armed:
	default:
		return
	}
	select {
	case entered <- struct{}{}:
	default:
	}
	<-l.release
}

// within runs f on another goroutine and fails the test unless it returns within
// limit: the bound stands for "does not wait for the stalled engine", not a speed.
func within(t *testing.T, what string, limit time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("%s did not return within %v while the engine was stalled", what, limit)
	}
}

// TestPostWhileEngineStalled: with the engine stuck inside Link.Send in the middle of
// a pass (holding the engine lock), PostSend, PostRecv, Poll and State still return
// at once; the posted work goes out after the link recovers.
func TestPostWhileEngineStalled(t *testing.T) {
	p, a, b, la := stallPair(t)
	c := defaults(pairConfig{})
	p.connect(a, b, c, 100, 200)
	p.connect(b, a, c, 200, 100)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := make(chan error, 2)
	for _, s := range []*side{a, b} {
		go func() { errs <- s.dev.Run(ctx) }()
	}
	defer func() {
		cancel()
		for range 2 {
			<-errs
		}
	}()
	fill(a.buf[:4096], 9)
	close(la.stallSend)
	must(t, postSend(a, transport.SendWR{WRID: 1, Opcode: transport.WR_RDMA_WRITE, SGList: sge(a, 0, 1024),
		Flags: transport.SendSignaled, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}))
	select {
	case <-la.inSend:
	case <-time.After(10 * time.Second):
		t.Fatal("the engine never sent the first WRITE")
	}
	// The engine is now inside Send, in its pass.
	within(t, "PostSend", 2*time.Second, func() {
		if err := postSend(a, transport.SendWR{WRID: 2, Opcode: transport.WR_RDMA_WRITE, SGList: sge(a, 1024, 3072),
			Flags: transport.SendSignaled, RemoteAddr: b.mr.Addr() + 1024, RKey: b.mr.RKey()}); err != nil {
			t.Error(err)
		}
	})
	within(t, "PostRecv", 2*time.Second, func() {
		if err := postRecv(a, 7, 8192, 64); err != nil {
			t.Error(err)
		}
	})
	within(t, "Poll", 2*time.Second, func() {
		var wcs [4]transport.WorkCompletion
		if n := a.cq.Poll(wcs[:]); n != 0 {
			t.Errorf("%d completions before the link sent anything", n)
		}
	})
	within(t, "State", 2*time.Second, func() {
		if s := a.qp.State(); s != transport.QPS_RTS {
			t.Errorf("state %v", s)
		}
	})
	close(la.release)
	var got []transport.WorkCompletion
	buf := make([]transport.WorkCompletion, 4)
	for len(got) < 2 {
		if err := a.cq.Wait(ctx); err != nil {
			t.Fatalf("after %d completions: %v", len(got), err)
		}
		got = append(got, buf[:a.cq.Poll(buf)]...)
	}
	checkWC(t, got[0], 1, transport.WC_SUCCESS, transport.WC_RDMA_WRITE, 1024)
	checkWC(t, got[1], 2, transport.WC_SUCCESS, transport.WC_RDMA_WRITE, 3072)
	checkBytes(t, "written", b.buf[:4096], a.buf[:4096])
}

// TestModifyResolvesWithoutEngineLock: while Modify waits for the neighbour of its
// DGID, the engine keeps making passes.
func TestModifyResolvesWithoutEngineLock(t *testing.T) {
	_, a, b, la := stallPair(t)
	c := defaults(pairConfig{})
	must(t, a.qp.Modify(transport.QPAttr{State: transport.QPS_INIT, AccessFlags: c.access},
		transport.QP_STATE|transport.QP_ACCESS_FLAGS|transport.QP_PKEY_INDEX|transport.QP_PORT))
	close(la.stallResolve)
	modified := make(chan error, 1)
	go func() {
		modified <- a.qp.Modify(transport.QPAttr{State: transport.QPS_RTR, PathMTU: c.mtu, DestQPN: b.qp.QPN(),
			RQPSN: 5, MaxDestRdAtomic: 1, MinRNRTimer: 12,
			AH: transport.AddressHandle{DGID: roce.GIDFromAddr(addrB), SGIDIndex: 1}},
			transport.QP_STATE|transport.QP_AV|transport.QP_PATH_MTU|transport.QP_DEST_QPN|transport.QP_RQ_PSN|
				transport.QP_MAX_DEST_RD_ATOMIC|transport.QP_MIN_RNR_TIMER)
	}()
	select {
	case <-la.inResolve:
	case <-time.After(10 * time.Second):
		t.Fatal("Modify never resolved the neighbour")
	}
	within(t, "Progress", 2*time.Second, func() {
		if _, err := a.dev.Progress(); err != nil {
			t.Error(err)
		}
	})
	within(t, "NextDeadline", 2*time.Second, func() { a.dev.NextDeadline() })
	close(la.release)
	if err := <-modified; err != nil {
		t.Fatal(err)
	}
	if s := a.qp.State(); s != transport.QPS_RTR {
		t.Errorf("state %v, want IBV_QPS_RTR", s)
	}
}

// stallPair returns two sides on the system clock, A on a stalling link.
func stallPair(t *testing.T) (*pair, *side, *side, *stallLink) {
	ea, eb := transport.NewPipe(transport.PipeConfig{MAC: macA, Addrs: []netip.Addr{addrA}},
		transport.PipeConfig{MAC: macB, Addrs: []netip.Addr{addrB}})
	la := newStallLink(ea)
	p := &pair{t: t}
	return p, p.newLinkSide(la, ea), p.newRealSide(eb), la
}

// newLinkSide is newRealSide on a wrapped link; end is the Pipe end beneath it.
func (p *pair) newLinkSide(l transport.Link, end *transport.PipeEnd) *side {
	dev, err := transport.Open(l, transport.Options{})
	must(p.t, err)
	s := &side{dev: dev, end: end, pd: dev.AllocPD(), cq: dev.CreateCQ(1 << 12), buf: make([]byte, 1<<16)}
	s.mr, err = s.pd.RegMR(s.buf, transport.AccessLocalWrite|transport.AccessRemoteWrite|transport.AccessRemoteRead)
	must(p.t, err)
	s.qp, err = s.pd.CreateQP(transport.QPInitAttr{SendCQ: s.cq, RecvCQ: s.cq})
	must(p.t, err)
	return s
}

// TestSendQueueFull: a QP holds max_send_wr WRs and refuses one more with
// ErrQueueFull (ENOMEM in the library, as rxe's post_send on a full queue); the slots
// come free when the WRs complete, unsignaled ones included (rxe_comp.c do_complete
// advances the queue for every WQE), and when the QP is reset.
func TestSendQueueFull(t *testing.T) {
	p := newPair(t, pairConfig{maxSendWR: 4})
	a, b := p.a, p.b
	write := func(id uint64, signaled bool) transport.SendWR {
		w := transport.SendWR{WRID: id, Opcode: transport.WR_RDMA_WRITE, SGList: sge(b, 0, 64),
			RemoteAddr: a.mr.Addr(), RKey: a.mr.RKey()}
		if signaled {
			w.Flags = transport.SendSignaled
		}
		return w
	}
	full := func(when string) {
		t.Helper()
		if _, err := b.qp.PostSend(write(99, true)); !errors.Is(err, transport.ErrQueueFull) {
			t.Fatalf("%s: a fifth WR: %v, want ErrQueueFull", when, err)
		}
	}
	must(t, postSend(b, write(0, false), write(1, false), write(2, false), write(3, true)))
	full("4 WRs posted")
	checkWC(t, p.waitWCs(b, 1, time.Second)[0], 3, transport.WC_SUCCESS, transport.WC_RDMA_WRITE, 64)
	must(t, postSend(b, write(4, false), write(5, false), write(6, false), write(7, false)))
	full("4 more posted")
	// Unsignaled WRs: their slots come free when their ACK comes, with no completion.
	p.run(func() bool { _, err := b.qp.PostSend(write(8, false)); return err == nil }, time.Second)
	if len(b.wcs) != 0 {
		t.Fatalf("completions of unsignaled WRs: %+v", b.wcs)
	}
	must(t, postSend(b, write(9, false), write(10, false), write(11, false)))
	full("4 more after unsignaled ones completed")
	// A reset drops what was posted and frees every slot.
	must(t, b.qp.Modify(transport.QPAttr{State: transport.QPS_RESET}, transport.QP_STATE))
	p.connect(b, a, defaults(pairConfig{}), 100, 0)
	must(t, postSend(b, write(12, false), write(13, false), write(14, false), write(15, true)))
	full("4 posted after a reset")
}
