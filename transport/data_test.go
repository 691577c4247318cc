package transport_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// TestDataTransfer moves data engine to engine with SEND, RDMA WRITE and RDMA READ at
// sizes around the path MTU and up to 8 MiB, at PMTU 256, 1024 and 4096, and checks
// the bytes and the completions.
func TestDataTransfer(t *testing.T) {
	for _, mtu := range []roce.MTU{roce.MTU256, roce.MTU1024, roce.MTU4096} {
		pm := mtu.Bytes()
		sizes := []int{0, 1, pm - 1, pm, pm + 1, 2500, 1 << 20, 8 << 20}
		for _, op := range []string{"SEND", "WRITE", "READ"} {
			t.Run(fmt.Sprintf("%s/pmtu%d", op, pm), func(t *testing.T) {
				p := newPair(t, pairConfig{mtu: mtu, bufSize: 2 * (8 << 20)})
				for i, n := range sizes {
					transfer(t, p, op, uint64(i), n)
				}
			})
		}
	}
}

// transfer moves n bytes from A to B (READ: B's bytes to A) and checks them.
func transfer(t *testing.T, p *pair, op string, seed uint64, n int) {
	t.Helper()
	a, b := p.a, p.b
	half := len(a.buf) / 2
	src, dst := a.buf[:n], b.buf[half:half+n]
	if op == "READ" {
		src, dst = b.buf[:n], a.buf[half:half+n]
	}
	fill(src, seed+1)
	fill(dst, seed+2)
	wrid := 1000 + seed
	switch op {
	case "SEND":
		must(t, postRecv(b, wrid, half, n))
		must(t, postSend(a, transport.SendWR{WRID: wrid, Opcode: transport.WR_SEND, SGList: sge(a, 0, n), Flags: transport.SendSignaled}))
		wcs := p.waitWCs(a, 1, time.Minute)
		checkWC(t, wcs[0], wrid, transport.WC_SUCCESS, transport.WC_SEND, -1)
		wcs = p.waitWCs(b, 1, time.Minute)
		checkWC(t, wcs[0], wrid, transport.WC_SUCCESS, transport.WC_RECV, n)
	case "WRITE":
		must(t, postSend(a, transport.SendWR{WRID: wrid, Opcode: transport.WR_RDMA_WRITE, SGList: sge(a, 0, n),
			Flags: transport.SendSignaled, RemoteAddr: b.mr.Addr() + uint64(half), RKey: b.mr.RKey()}))
		wcs := p.waitWCs(a, 1, time.Minute)
		checkWC(t, wcs[0], wrid, transport.WC_SUCCESS, transport.WC_RDMA_WRITE, -1)
	case "READ":
		must(t, postSend(a, transport.SendWR{WRID: wrid, Opcode: transport.WR_RDMA_READ, SGList: sge(a, half, n),
			Flags: transport.SendSignaled, RemoteAddr: b.mr.Addr(), RKey: b.mr.RKey()}))
		wcs := p.waitWCs(a, 1, time.Minute)
		checkWC(t, wcs[0], wrid, transport.WC_SUCCESS, transport.WC_RDMA_READ, n)
	}
	checkBytes(t, fmt.Sprintf("%s of %d bytes", op, n), dst, src)
}

func postSend(s *side, wrs ...transport.SendWR) error {
	_, err := s.qp.PostSend(wrs...)
	return err
}

func postRecv(s *side, wrid uint64, off, n int) error {
	_, err := s.qp.PostRecv(transport.RecvWR{WRID: wrid, SGList: sge(s, off, n)})
	return err
}

// TestPSNWrap moves multi-packet messages whose PSNs cross 0xFFFFFF → 0 in both
// directions, with loss so retransmissions cross the wrap too.
func TestPSNWrap(t *testing.T) {
	f := transport.Faults{Seed: 42, Loss: 0.03}
	p := newPair(t, pairConfig{mtu: roce.MTU1024, bufSize: 1 << 22, psnA: 0xFFFFF0, psnB: 0xFFFFFA, faultsA: f, faultsB: f})
	for i, op := range []string{"WRITE", "READ", "SEND", "WRITE"} {
		transfer(t, p, op, uint64(i), 100000)
	}
	if p.a.qp.Counters().Get(transport.CntCompleterRetryErr) == 0 {
		t.Error("no retransmission happened across the wrap")
	}
}
