package transport_test

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/xroce/xroce/transport"
)

// TestLoopback: two QPs of one device, each with the device's own GID as DGID
// (as two applications of one verbs daemon, or ibv_rc_pingpong's client and
// server on one rdma_rxe device). WRITE, READ, SEND and FETCH_AND_ADD between them
// move the right bytes; every frame loops back inside the engine (rdma_rxe's
// rxe_loopback): sent_pkts equals rcvd_pkts, and the link carries none.
func TestLoopback(t *testing.T) {
	c := defaults(pairConfig{})
	ea, eb := transport.NewPipe(transport.PipeConfig{MAC: macA, Addrs: []netip.Addr{addrA}}, transport.PipeConfig{MAC: macB, Addrs: []netip.Addr{addrB}})
	p := &pair{t: t, clock: transport.NewFakeClock()}
	p.a = p.newSide(ea, c, 1<<10)
	p.b = p.secondSide(p.a, c)
	p.connect(p.a, p.b, c, 100, 0xFFFFF0)
	p.connect(p.b, p.a, c, 0xFFFFF0, 100)

	const n = 30000 // 30 packets at path MTU 1024; B's READ responses cross the PSN wrap
	half := len(p.a.buf) / 2
	fill(p.a.buf[:n], 1)
	must(t, postSend(p.a, transport.SendWR{WRID: 1, Opcode: transport.WR_RDMA_WRITE, SGList: sge(p.a, 0, n), Flags: transport.SendSignaled,
		RemoteAddr: p.b.mr.Addr() + uint64(half), RKey: p.b.mr.RKey()}))
	checkWC(t, p.waitWCs(p.a, 1, time.Second)[0], 1, transport.WC_SUCCESS, transport.WC_RDMA_WRITE, n)
	checkBytes(t, "WRITE", p.b.buf[half:half+n], p.a.buf[:n])

	fill(p.a.buf[half:half+n], 2)
	must(t, postSend(p.b, transport.SendWR{WRID: 2, Opcode: transport.WR_RDMA_READ, SGList: sge(p.b, 0, n), Flags: transport.SendSignaled,
		RemoteAddr: p.a.mr.Addr() + uint64(half), RKey: p.a.mr.RKey()}))
	checkWC(t, p.waitWCs(p.b, 1, time.Second)[0], 2, transport.WC_SUCCESS, transport.WC_RDMA_READ, n)
	checkBytes(t, "READ", p.b.buf[:n], p.a.buf[half:half+n])

	fill(p.a.buf[:n], 3)
	must(t, postRecv(p.b, 3, half, n))
	must(t, postSend(p.a, transport.SendWR{WRID: 4, Opcode: transport.WR_SEND, SGList: sge(p.a, 0, n), Flags: transport.SendSignaled}))
	checkWC(t, p.waitWCs(p.a, 1, time.Second)[0], 4, transport.WC_SUCCESS, transport.WC_SEND, n)
	checkWC(t, p.waitWCs(p.b, 1, time.Second)[0], 3, transport.WC_SUCCESS, transport.WC_RECV, n)
	checkBytes(t, "SEND", p.b.buf[half:half+n], p.a.buf[:n])

	binary.LittleEndian.PutUint64(p.b.buf[8:], 40)
	must(t, postSend(p.a, transport.SendWR{WRID: 5, Opcode: transport.WR_ATOMIC_FETCH_AND_ADD, SGList: sge(p.a, 0, 8), Flags: transport.SendSignaled,
		RemoteAddr: p.b.mr.Addr() + 8, RKey: p.b.mr.RKey(), CompareAdd: 2}))
	checkWC(t, p.waitWCs(p.a, 1, time.Second)[0], 5, transport.WC_SUCCESS, transport.WC_FETCH_ADD, 8)
	if orig, now := binary.LittleEndian.Uint64(p.a.buf), binary.LittleEndian.Uint64(p.b.buf[8:]); orig != 40 || now != 42 {
		t.Errorf("FETCH_AND_ADD: original %d (want 40), now %d (want 42)", orig, now)
	}

	m := p.a.dev.Counters().Map()
	if m["sent_pkts"] != m["rcvd_pkts"] || m["sent_pkts"] < 3*30+3 || m["rcvd_unknown_qp"]+m["rcvd_icrc_err"] != 0 {
		t.Errorf("counters %v: want sent_pkts = rcvd_pkts, at least 93 (the data packets, the READ and atomic requests and its response), and nothing dropped", p.a.counters())
	}
	if s := eb.Stats(); s.Sent != 0 {
		t.Errorf("%d frames went to the link: %+v", s.Sent, s)
	}
}

// secondSide is another QP, PD, CQ and buffer on s's device.
func (p *pair) secondSide(s *side, c pairConfig) *side {
	p.t.Helper()
	o := &side{dev: s.dev, end: s.end, pd: s.dev.AllocPD(), cq: s.dev.CreateCQ(1 << 10), buf: make([]byte, c.bufSize)}
	var err error
	o.mr, err = o.pd.RegMR(o.buf, transport.AccessLocalWrite|transport.AccessRemoteWrite|transport.AccessRemoteRead|transport.AccessRemoteAtomic)
	must(p.t, err)
	o.qp, err = o.pd.CreateQP(transport.QPInitAttr{SendCQ: o.cq, RecvCQ: o.cq,
		Cap: transport.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxSendSGE: 4, MaxRecvSGE: 4}})
	must(p.t, err)
	return o
}
