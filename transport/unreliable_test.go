package transport_test

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/test/captures"
	"github.com/xroce/xroce/transport"
)

const testQKey = 0x11111111 // ibv_ud_pingpong's Q_Key

var (
	addrA6 = netip.MustParseAddr("fd77::11")
	addrB6 = netip.MustParseAddr("fd77::12")
)

// tapLink is a Pipe end that keeps a copy of every frame its device sends, and how
// many frames each Send carried.
type tapLink struct {
	*transport.PipeEnd
	mu    sync.Mutex
	sent  []roce.Packet
	sends []int
}

func (l *tapLink) Send(frames [][]byte) (int, error) {
	n, err := l.PipeEnd.Send(frames)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sends = append(l.sends, len(frames))
	for _, f := range frames[:n] {
		var p roce.Packet
		if e := p.Decode(append([]byte(nil), f...)); e != nil {
			panic(e)
		}
		l.sent = append(l.sent, p)
	}
	return n, err
}

// take returns the frames sent since the last call.
func (l *tapLink) take() []roce.Packet {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := l.sent
	l.sent = nil
	return s
}

// upair is a pair of UC or UD QPs on two devices joined by a Pipe with taps.
type upair struct {
	*pair
	tapA, tapB *tapLink
	ahAB       *transport.AH // A's address handle for B (UD)
	ahBA       *transport.AH
}

type upairConfig struct {
	pairConfig
	ipv6       bool
	psnA, psnB uint32
	qkeyB      uint32 // B's Q_Key (default testQKey); A's is always testQKey
}

// newUPair creates QPs of type typ on two devices and brings them to RTS: UC towards
// each other, UD each with an address handle for the other.
func newUPair(t testing.TB, typ transport.QPType, c upairConfig) *upair {
	t.Helper()
	c.pairConfig = defaults(c.pairConfig)
	if c.qkeyB == 0 {
		c.qkeyB = testQKey
	}
	ca := transport.PipeConfig{MAC: macA, Addrs: []netip.Addr{addrA, addrA6}, Faults: c.faultsA}
	cb := transport.PipeConfig{MAC: macB, Addrs: []netip.Addr{addrB, addrB6}, Faults: c.faultsB}
	ea, eb := transport.NewPipe(ca, cb)
	u := &upair{pair: &pair{t: t, clock: transport.NewFakeClock()}, tapA: &tapLink{PipeEnd: ea}, tapB: &tapLink{PipeEnd: eb}}
	u.a = u.newSide(u.tapA, typ)
	u.b = u.newSide(u.tapB, typ)
	gidIndex, dstA, dstB := 1, addrA, addrB
	if c.ipv6 {
		gidIndex, dstA, dstB = 2, addrA6, addrB6
	}
	ahB := transport.AddressHandle{DGID: roce.GIDFromAddr(dstB), SGIDIndex: gidIndex}
	ahA := transport.AddressHandle{DGID: roce.GIDFromAddr(dstA), SGIDIndex: gidIndex}
	pa := transport.ConnectParams{Type: typ, QKey: testQKey, Access: c.access, AH: ahB, PathMTU: c.mtu,
		DestQPN: u.b.qp.QPN(), RQPSN: c.psnB, SQPSN: c.psnA}
	pb := transport.ConnectParams{Type: typ, QKey: c.qkeyB, Access: c.access, AH: ahA, PathMTU: c.mtu,
		DestQPN: u.a.qp.QPN(), RQPSN: c.psnA, SQPSN: c.psnB}
	must(t, transport.BringUp(u.a.qp, transport.QPS_RESET, transport.QPS_RTS, pa))
	must(t, transport.BringUp(u.b.qp, transport.QPS_RESET, transport.QPS_RTS, pb))
	if typ == transport.QPT_UD {
		var err error
		u.ahAB, err = u.a.pd.CreateAH(ahB)
		must(t, err)
		u.ahBA, err = u.b.pd.CreateAH(ahA)
		must(t, err)
	}
	return u
}

func (u *upair) newSide(l *tapLink, typ transport.QPType) *side {
	dev, err := transport.Open(l, transport.Options{Clock: u.clock})
	must(u.t, err)
	s := &side{dev: dev, end: l.PipeEnd, pd: dev.AllocPD(), cq: dev.CreateCQ(1 << 10)}
	s.buf = make([]byte, 1<<16)
	s.mr, err = s.pd.RegMR(s.buf, transport.AccessLocalWrite|transport.AccessRemoteWrite|transport.AccessRemoteRead)
	must(u.t, err)
	s.qp, err = s.pd.CreateQP(transport.QPInitAttr{Type: typ, SendCQ: s.cq, RecvCQ: s.cq,
		Cap: transport.QPCap{MaxSendWR: 64, MaxRecvWR: 64, MaxInlineData: 64}})
	must(u.t, err)
	return s
}

// settle runs both engines until neither has anything to do.
func (u *upair) settle() {
	u.t.Helper()
	for i := 0; i < 1000; i++ {
		a, b := progress(u.t, u.a.dev), progress(u.t, u.b.dev)
		if !a && !b {
			u.collect()
			return
		}
		u.clock.Advance(time.Microsecond)
	}
	u.t.Fatal("engines still busy after 1000 passes")
}

func (u *upair) udSend(wrs ...transport.SendWR) {
	u.t.Helper()
	for i := range wrs {
		wrs[i].AH, wrs[i].RemoteQPN = u.ahAB, u.b.qp.QPN()
		wrs[i].Flags |= transport.SendSignaled
	}
	must(u.t, postSend(u.a, wrs...))
}

func recvAt(t testing.TB, s *side, wrid uint64, off, n int) {
	t.Helper()
	if _, err := s.qp.PostRecv(transport.RecvWR{WRID: wrid, SGList: sge(s, off, n)}); err != nil {
		t.Fatal(err)
	}
}

// checkCounters compares the QP's non-zero counters with want exactly.
func checkCounters(t testing.TB, what string, s *side, want map[string]uint64) {
	t.Helper()
	got := map[string]uint64{}
	for k, v := range s.qp.Counters().Map() {
		if v != 0 {
			got[k] = v
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s counters %v, want %v", what, got, want)
		return
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s counters %v, want %v", what, got, want)
			return
		}
	}
}

func checkState(t testing.TB, s *side, want transport.QPState) {
	t.Helper()
	if st := s.qp.State(); st != want {
		t.Fatalf("%v is %v, want %v", s, st, want)
	}
}

// TestUDSendRecv sends a UD SEND and a UD SEND with immediate data at the PMTU, the
// second with a Q_Key whose high bit asks for the QP's own. It checks every field of
// the frames, the send and receive completions, and the receive buffers byte by
// byte: the 40-byte GRH area (20 zero bytes, then the IPv4 header exactly as it
// arrived), then the payload.
func TestUDSendRecv(t *testing.T) {
	u := newUPair(t, transport.QPT_UD, upairConfig{psnA: 0x123, psnB: 0x456})
	a, b := u.a, u.b
	fill(a.buf[:2048], 1)
	recvAt(t, b, 51, 0, 40+100)
	recvAt(t, b, 52, 4096, 40+1024+7) // room to spare
	u.udSend(
		transport.SendWR{WRID: 1, Opcode: transport.WR_SEND, SGList: sge(a, 0, 100), RemoteQKey: testQKey},
		transport.SendWR{WRID: 2, Opcode: transport.WR_SEND_WITH_IMM, SGList: sge(a, 1000, 1024), ImmData: 0xdeadbeef,
			RemoteQKey: 0x80000000, Flags: transport.SendSolicited})
	u.settle()

	out := u.tapA.take()
	if len(out) != 2 {
		t.Fatalf("A sent %d frames %v, want 2", len(out), summary(out))
	}
	for i, want := range []struct {
		op  roce.Opcode
		psn uint32
		n   int
		se  bool
	}{{roce.UD_SEND_ONLY, 0x123, 100, false}, {roce.UD_SEND_ONLY_WITH_IMMEDIATE, 0x124, 1024, true}} {
		p := &out[i]
		if p.BTH.Opcode != want.op || p.BTH.PSN != want.psn || p.BTH.DestQP != b.qp.QPN() || !p.BTH.AckReq ||
			p.BTH.SE != want.se || p.BTH.PKey != 0xFFFF || len(p.Payload) != want.n {
			t.Errorf("frame %d: %+v, want %v PSN 0x%x to QP 0x%x, AckReq, SE %v, %d bytes", i, p.BTH, want.op, want.psn,
				b.qp.QPN(), want.se, want.n)
		}
		if p.DETH != (roce.DETH{QKey: testQKey, SrcQP: a.qp.QPN()}) {
			t.Errorf("frame %d: DETH %+v, want Q_Key 0x%x from QP 0x%x", i, p.DETH, testQKey, a.qp.QPN())
		}
		if p.UDP.SrcPort != roce.UDSourcePort(a.qp.QPN()) || p.IPv4.TTL != 64 || p.IPv4.TOS != 0 || p.IPv4.FlagsFrag != 0x4000 {
			t.Errorf("frame %d: sport %d TTL %d TOS %d flags 0x%x", i, p.UDP.SrcPort, p.IPv4.TTL, p.IPv4.TOS, p.IPv4.FlagsFrag)
		}
	}
	if out[1].ImmDt != 0xdeadbeef {
		t.Errorf("immediate data 0x%x", out[1].ImmDt)
	}
	if back := u.tapB.take(); len(back) != 0 {
		t.Fatalf("B answered UD SENDs with %v", summary(back))
	}

	wa := a.wcs
	if len(wa) != 2 {
		t.Fatalf("A's completions %+v", wa)
	}
	checkWC(t, wa[0], 1, transport.WC_SUCCESS, transport.WC_SEND, 100)
	checkWC(t, wa[1], 2, transport.WC_SUCCESS, transport.WC_SEND, 1024)
	if wa[0].Flags() != 0 || wa[1].Flags() != transport.WC_WITH_IMM || wa[1].ImmData != 0xdeadbeef {
		t.Errorf("send completion flags %v %v", wa[0].Flags(), wa[1].Flags())
	}

	wb := b.wcs
	if len(wb) != 2 {
		t.Fatalf("B's completions %+v", wb)
	}
	checkWC(t, wb[0], 51, transport.WC_SUCCESS, transport.WC_RECV, 140)
	checkWC(t, wb[1], 52, transport.WC_SUCCESS, transport.WC_RECV, 40+1024)
	for i, wc := range wb {
		want := transport.WC_GRH
		if i == 1 {
			want |= transport.WC_WITH_IMM
		}
		if wc.SrcQP != a.qp.QPN() || wc.Flags() != want || wc.QPN != b.qp.QPN() {
			t.Errorf("receive %d: src_qp 0x%x flags %v qp 0x%x, want 0x%x %v 0x%x", i, wc.SrcQP, wc.Flags(), wc.QPN,
				a.qp.QPN(), want, b.qp.QPN())
		}
	}
	if wb[1].ImmData != 0xdeadbeef {
		t.Errorf("imm_data 0x%x", wb[1].ImmData)
	}
	// The GRH area: 20 zero bytes, then the IPv4 header as sent: version/IHL 0x45, TOS
	// 0, total length (IPv4 20 + UDP 8 + BTH 12 + DETH 8 + payload + ICRC 4), the
	// sender's ID, DF, TTL 64, UDP, the header checksum, A's and B's addresses.
	for i, c := range []struct {
		off, n, imm int
		frame       *roce.Packet
	}{{0, 100, 0, &out[0]}, {4096, 1024, 4, &out[1]}} {
		grh := b.buf[c.off : c.off+40]
		want := make([]byte, 40)
		ip := want[20:]
		ip[0] = 0x45
		binary.BigEndian.PutUint16(ip[2:], uint16(20+8+12+8+c.imm+c.n+4))
		binary.BigEndian.PutUint16(ip[4:], c.frame.IPv4.ID)
		ip[6] = 0x40
		ip[8], ip[9] = 64, 17
		binary.BigEndian.PutUint16(ip[10:], c.frame.IPv4.Checksum)
		copy(ip[12:], addrA.AsSlice())
		copy(ip[16:], addrB.AsSlice())
		checkBytes(t, "GRH area", grh, want)
		checkBytes(t, "GRH area against the frame", grh[20:], c.frame.Frame()[c.frame.L3Off:c.frame.L4Off])
		if c.frame.IPv4.ID != uint16(i+1) {
			t.Errorf("IPv4 ID %d, want %d", c.frame.IPv4.ID, i+1)
		}
	}
	checkBytes(t, "payload 1", b.buf[40:140], a.buf[0:100])
	checkBytes(t, "payload 2", b.buf[4096+40:4096+40+1024], a.buf[1000:2024])
	checkCounters(t, "A", a, map[string]uint64{"sent_pkts": 2, "rdma_sends": 2})
	checkCounters(t, "B", b, map[string]uint64{"rcvd_pkts": 2, "rdma_recvs": 2})
}

// TestUDIPv6GRH: over IPv6 the GRH area is the 40-byte IPv6 header as received, with
// the address handle's traffic class, flow label and hop limit.
func TestUDIPv6GRH(t *testing.T) {
	u := newUPair(t, transport.QPT_UD, upairConfig{ipv6: true})
	a, b := u.a, u.b
	ah, err := a.pd.CreateAH(transport.AddressHandle{DGID: roce.GIDFromAddr(addrB6), SGIDIndex: 2, TrafficClass: 0x6a,
		HopLimit: 7, FlowLabel: 0x12345})
	must(t, err)
	fill(a.buf[:64], 3)
	recvAt(t, b, 9, 0, 200)
	must(t, postSend(a, transport.SendWR{WRID: 1, Opcode: transport.WR_SEND, SGList: sge(a, 0, 64), AH: ah,
		RemoteQPN: b.qp.QPN(), RemoteQKey: testQKey}))
	u.settle()
	if len(b.wcs) != 1 {
		t.Fatalf("completions %+v", b.wcs)
	}
	checkWC(t, b.wcs[0], 9, transport.WC_SUCCESS, transport.WC_RECV, 40+64)
	want := make([]byte, 40)
	binary.BigEndian.PutUint32(want[0:], 6<<28|0x6a<<20|0x12345)
	binary.BigEndian.PutUint16(want[4:], 8+12+8+64+4) // payload length: UDP, BTH, DETH, data, ICRC
	want[6], want[7] = 17, 7
	copy(want[8:], addrA6.AsSlice())
	copy(want[24:], addrB6.AsSlice())
	checkBytes(t, "GRH area", b.buf[:40], want)
	checkBytes(t, "payload", b.buf[40:104], a.buf[:64])
	if f := u.tapA.take(); len(f) != 1 || f[0].UDP.SrcPort != roce.UDSourcePort(a.qp.QPN()) {
		t.Errorf("frames %v", summary(f))
	}
}

// udFrame injects a UD frame from B's address into A's link.
func (u *upair) inject(to *side, from *tapLink, op roce.Opcode, psn uint32, fill func(*roce.Packet)) {
	u.t.Helper()
	p := roce.Packet{Eth: roce.Ethernet{Src: macB, Dst: macA},
		IPv4: roce.IPv4{FlagsFrag: 0x4000, TTL: 64, Src: addrB.As4(), Dst: addrA.As4()},
		UDP:  roce.UDP{SrcPort: 0xc123, DstPort: roce.UDPPort},
		BTH:  roce.BTH{Opcode: op, PKey: 0xFFFF, DestQP: to.qp.QPN(), PSN: psn, AckReq: true}}
	fill(&p)
	buf := make([]byte, 9000)
	n, err := p.Encode(buf)
	must(u.t, err)
	if k, err := from.PipeEnd.Send([][]byte{buf[:n]}); k != 1 || err != nil {
		u.t.Fatalf("inject: %d %v", k, err)
	}
}

// TestUDDrops: a bad Q_Key, an oversize payload, a frame while the QP is only in
// INIT and a message with no receive posted are each dropped and counted; the QP stays
// in RTS, sends nothing back, and the receive posted all along takes the next good
// message.
func TestUDDrops(t *testing.T) {
	u := newUPair(t, transport.QPT_UD, upairConfig{qkeyB: 0x2222})
	a, b := u.a, u.b
	fill(a.buf[:1024], 4)
	// No receive posted yet: dropped, out_of_buffer.
	u.udSend(transport.SendWR{WRID: 1, Opcode: transport.WR_SEND, SGList: sge(a, 0, 10), RemoteQKey: 0x2222})
	u.settle()
	checkCounters(t, "B", b, map[string]uint64{"rcvd_pkts": 1, "out_of_buffer": 1})
	recvAt(t, b, 7, 0, 2000)
	// Q_Key 0x1111 (A's own, by the high-bit rule) is not B's 0x2222.
	u.udSend(transport.SendWR{WRID: 2, Opcode: transport.WR_SEND, SGList: sge(a, 0, 10), RemoteQKey: 0x80000000})
	u.udSend(transport.SendWR{WRID: 3, Opcode: transport.WR_SEND, SGList: sge(a, 0, 10), RemoteQKey: 0x2223})
	u.settle()
	checkCounters(t, "B", b, map[string]uint64{"rcvd_pkts": 3, "out_of_buffer": 1, "qkey_viol_cntr": 2})
	// A payload longer than the path MTU (1024 here), as only a broken or hostile
	// peer sends: dropped, not an error.
	u.inject(a, u.tapB, roce.UD_SEND_ONLY, 5, func(p *roce.Packet) {
		p.DETH = roce.DETH{QKey: testQKey, SrcQP: 0x77}
		p.Payload = make([]byte, 1028)
	})
	recvAt(t, a, 70, 0, 2000)
	u.settle()
	checkCounters(t, "A", a, map[string]uint64{"sent_pkts": 3, "rcvd_pkts": 1, "rcvd_oversize": 1, "rdma_sends": 3})
	checkState(t, a, transport.QPS_RTS)
	checkState(t, b, transport.QPS_RTS)
	if len(b.wcs) != 0 || len(a.wcs) != 3 {
		t.Fatalf("completions A %+v B %+v", a.wcs, b.wcs)
	}
	// A frame for a UD QP that is not ready to receive is dropped before the QP.
	c, err := b.pd.CreateQP(transport.QPInitAttr{Type: transport.QPT_UD, SendCQ: b.cq, RecvCQ: b.cq})
	must(t, err)
	must(t, c.Modify(transport.QPAttr{State: transport.QPS_INIT, QKey: testQKey}, transport.QP_STATE|transport.QP_QKEY))
	must(t, postSend(a, transport.SendWR{WRID: 4, Opcode: transport.WR_SEND, SGList: sge(a, 0, 10), AH: u.ahAB,
		RemoteQPN: c.QPN(), RemoteQKey: testQKey}))
	unknown := b.dev.Counters().Get(transport.CntRcvdUnknownQP)
	u.settle()
	if got := b.dev.Counters().Get(transport.CntRcvdUnknownQP); got != unknown+1 {
		t.Errorf("rcvd_unknown_qp %d, want %d", got, unknown+1)
	}
	// The receive posted all along takes the next good message.
	a.wcs, b.wcs = nil, nil
	u.udSend(transport.SendWR{WRID: 5, Opcode: transport.WR_SEND, SGList: sge(a, 0, 33), RemoteQKey: 0x2222})
	u.settle()
	if len(b.wcs) != 1 {
		t.Fatalf("completions %+v", b.wcs)
	}
	checkWC(t, b.wcs[0], 7, transport.WC_SUCCESS, transport.WC_RECV, 40+33)
	checkBytes(t, "payload", b.buf[40:73], a.buf[:33])
	if back := u.tapB.take(); len(back) != 0 {
		t.Fatalf("B sent %v", summary(back))
	}
}

// TestUDRecvTooSmall: a receive WR without room for the GRH area and the payload
// completes with IBV_WC_LOC_LEN_ERR; the QP stays in RTS and the next receive takes
// the next message.
func TestUDRecvTooSmall(t *testing.T) {
	u := newUPair(t, transport.QPT_UD, upairConfig{})
	a, b := u.a, u.b
	fill(a.buf[:100], 5)
	recvAt(t, b, 1, 0, 40+99)
	recvAt(t, b, 2, 1000, 40+100)
	u.udSend(transport.SendWR{WRID: 10, Opcode: transport.WR_SEND, SGList: sge(a, 0, 100), RemoteQKey: testQKey},
		transport.SendWR{WRID: 11, Opcode: transport.WR_SEND, SGList: sge(a, 0, 100), RemoteQKey: testQKey})
	u.settle()
	if len(b.wcs) != 2 {
		t.Fatalf("completions %+v", b.wcs)
	}
	checkWC(t, b.wcs[0], 1, transport.WC_LOC_LEN_ERR, transport.WC_RECV, 0)
	checkWC(t, b.wcs[1], 2, transport.WC_SUCCESS, transport.WC_RECV, 140)
	if b.wcs[0].Flags() != 0 || b.wcs[0].SrcQP != 0 {
		t.Errorf("error completion %+v", b.wcs[0])
	}
	checkBytes(t, "payload", b.buf[1040:1140], a.buf[:100])
	if z := b.buf[:139]; strings.Count(string(z), "\x00") != len(z) {
		t.Error("the receive too small was written to")
	}
	checkState(t, b, transport.QPS_RTS)
	checkCounters(t, "B", b, map[string]uint64{"rcvd_pkts": 2, "resp_local_length_error": 1, "rdma_recvs": 1})
}

// TestUDOversize: a UD message longer than the port's MTU is posted, emits no
// packet and completes successfully, its PSN used, as rdma_rxe's requester fakes
// it (IBTA C10-93.1.1, rxe_req.c); the next message goes out with the PSN after it
// (rxe refuses nothing at post time; xroce returned EINVAL, found by a fresh user's
// trial).
func TestUDOversize(t *testing.T) {
	u := newUPair(t, transport.QPT_UD, upairConfig{psnA: 100})
	a, b := u.a, u.b
	recvAt(t, b, 1, 0, 2048)
	fill(a.buf[:1025], 4)
	u.udSend(transport.SendWR{WRID: 1, Opcode: transport.WR_SEND, SGList: sge(a, 0, 1025), RemoteQKey: testQKey},
		transport.SendWR{WRID: 2, Opcode: transport.WR_SEND, SGList: sge(a, 0, 1024), RemoteQKey: testQKey})
	u.settle()
	if len(a.wcs) != 2 {
		t.Fatalf("sender's completions %+v, want 2", a.wcs)
	}
	checkWC(t, a.wcs[0], 1, transport.WC_SUCCESS, transport.WC_SEND, -1)
	checkWC(t, a.wcs[1], 2, transport.WC_SUCCESS, transport.WC_SEND, -1)
	sent := u.tapA.take()
	if len(sent) != 1 || len(sent[0].Payload) != 1024 || sent[0].BTH.PSN != 101 {
		t.Fatalf("sent %d packets (want one, of 1024 bytes, PSN 101): %+v", len(sent), sent)
	}
	if len(b.wcs) != 1 {
		t.Fatalf("receiver's completions %+v, want 1", b.wcs)
	}
	checkWC(t, b.wcs[0], 1, transport.WC_SUCCESS, transport.WC_RECV, 40+1024)
	checkBytes(t, "payload", b.buf[40:40+1024], a.buf[:1024])
}

// TestUDPostChecks: PostSend refuses operations UD does not carry and a send
// without an address handle of the QP's PD.
func TestUDPostChecks(t *testing.T) {
	u := newUPair(t, transport.QPT_UD, upairConfig{})
	a := u.a
	for _, op := range []transport.WROpcode{transport.WR_RDMA_WRITE, transport.WR_RDMA_WRITE_WITH_IMM, transport.WR_RDMA_READ,
		transport.WR_ATOMIC_CMP_AND_SWP, transport.WR_ATOMIC_FETCH_AND_ADD} {
		wr := transport.SendWR{Opcode: op, SGList: sge(a, 0, 8), AH: u.ahAB}
		if _, err := a.qp.PostSend(wr); !errors.Is(err, transport.ErrBadWR) || !strings.Contains(err.Error(), op.String()+" is not available on a IBV_QPT_UD QP") {
			t.Errorf("%v on UD: %v", op, err)
		}
	}
	for _, ah := range []*transport.AH{nil, u.ahBA} { // none, another device's
		if _, err := a.qp.PostSend(transport.SendWR{Opcode: transport.WR_SEND, AH: ah}); !errors.Is(err, transport.ErrBadWR) {
			t.Errorf("UD send with AH %p: %v", ah, err)
		}
	}
	if n, err := a.qp.PostSend(transport.SendWR{Opcode: transport.WR_SEND, SGList: sge(a, 0, 1024), AH: u.ahAB}); n != 1 || err != nil {
		t.Errorf("1024-byte UD send: %d %v", n, err)
	}
}

// TestUCReadRefused: a UC QP refuses RDMA READ and atomics at post time.
func TestUCReadRefused(t *testing.T) {
	u := newUPair(t, transport.QPT_UC, upairConfig{})
	a := u.a
	for _, op := range []transport.WROpcode{transport.WR_RDMA_READ, transport.WR_ATOMIC_CMP_AND_SWP, transport.WR_ATOMIC_FETCH_AND_ADD} {
		wr := transport.SendWR{Opcode: op, SGList: sge(a, 0, 8), RemoteAddr: u.b.mr.Addr(), RKey: u.b.mr.RKey()}
		if n, err := a.qp.PostSend(wr); n != 0 || !errors.Is(err, transport.ErrBadWR) ||
			!strings.Contains(err.Error(), op.String()+" is not available on a IBV_QPT_UC QP") {
			t.Errorf("%v on UC: %d %v", op, n, err)
		}
	}
	u.settle()
	if f := u.tapA.take(); len(f) != 0 {
		t.Errorf("sent %v", summary(f))
	}
}

// TestQPTypeModify: each type takes its own attributes (ibv_modify_qp(3)).
func TestQPTypeModify(t *testing.T) {
	u := newUPair(t, transport.QPT_UD, upairConfig{})
	s := u.a
	newQP := func(typ transport.QPType) *transport.QueuePair {
		qp, err := s.pd.CreateQP(transport.QPInitAttr{Type: typ, SendCQ: s.cq, RecvCQ: s.cq})
		must(t, err)
		return qp
	}
	ud, uc, rc := newQP(transport.QPT_UD), newQP(transport.QPT_UC), newQP(0)
	if ud.Type() != transport.QPT_UD || uc.Type() != transport.QPT_UC || rc.Type() != transport.QPT_RC {
		t.Fatalf("types %v %v %v", ud.Type(), uc.Type(), rc.Type())
	}
	init := transport.QPAttr{State: transport.QPS_INIT, QKey: 5, AccessFlags: transport.AccessRemoteWrite}
	for _, c := range []struct {
		qp   *transport.QueuePair
		mask transport.QPAttrMask
		err  string
	}{
		{ud, transport.QP_STATE, "needs attributes IBV_QP_QKEY"},
		{ud, transport.QP_STATE | transport.QP_QKEY | transport.QP_ACCESS_FLAGS, "does not take attributes IBV_QP_ACCESS_FLAGS"},
		{rc, transport.QP_STATE | transport.QP_QKEY | transport.QP_ACCESS_FLAGS, "does not take attributes IBV_QP_QKEY"},
		{uc, transport.QP_STATE | transport.QP_QKEY | transport.QP_ACCESS_FLAGS, "does not take attributes IBV_QP_QKEY"},
		{ud, transport.QP_STATE | transport.QP_QKEY, ""},
		{uc, transport.QP_STATE | transport.QP_ACCESS_FLAGS, ""},
	} {
		err := c.qp.Modify(init, c.mask)
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%v RESET → INIT with %v: %v, want %q", c.qp.Type(), c.mask, err, c.err)
		}
	}
	rtr := transport.QPAttr{State: transport.QPS_RTR, AH: transport.AddressHandle{DGID: roce.GIDFromAddr(addrB), SGIDIndex: 1},
		PathMTU: roce.MTU1024, DestQPN: 20, MaxDestRdAtomic: 1}
	if err := ud.Modify(rtr, transport.QP_STATE|transport.QP_AV); err == nil || !strings.Contains(err.Error(), "does not take attributes IBV_QP_AV") {
		t.Errorf("UD INIT → RTR with an AV: %v", err)
	}
	if err := uc.Modify(rtr, transport.QP_STATE|transport.QP_AV|transport.QP_PATH_MTU|transport.QP_DEST_QPN|transport.QP_RQ_PSN|
		transport.QP_MAX_DEST_RD_ATOMIC); err == nil || !strings.Contains(err.Error(), "does not take attributes IBV_QP_MAX_DEST_RD_ATOMIC") {
		t.Errorf("UC INIT → RTR with max_dest_rd_atomic: %v", err)
	}
	must(t, ud.Modify(rtr, transport.QP_STATE))
	if err := ud.Modify(transport.QPAttr{State: transport.QPS_RTS}, transport.QP_STATE); err == nil ||
		!strings.Contains(err.Error(), "needs attributes IBV_QP_SQ_PSN") {
		t.Errorf("UD RTR → RTS without an SQ PSN: %v", err)
	}
	must(t, ud.Modify(transport.QPAttr{State: transport.QPS_RTS, QKey: 9}, transport.QP_STATE|transport.QP_SQ_PSN|transport.QP_QKEY))
	if _, err := s.pd.CreateQP(transport.QPInitAttr{Type: 1, SendCQ: s.cq, RecvCQ: s.cq}); err == nil {
		t.Error("QP type 1 created")
	}
	if _, err := s.pd.CreateQP(transport.QPInitAttr{Type: transport.QPT_RC, QPN: 1, SendCQ: s.cq, RecvCQ: s.cq}); err == nil {
		t.Error("RC QP 1 created")
	}
	gsi, err := s.pd.CreateQP(transport.QPInitAttr{Type: transport.QPT_UD, QPN: 1, SendCQ: s.cq, RecvCQ: s.cq})
	if err != nil || gsi.QPN() != 1 {
		t.Errorf("UD QP 1: %v", err)
	}
}

// TestUCWriteSend: UC RDMA WRITE and SEND with immediate data, three packets each:
// the exact opcodes and PSNs on the wire, AckReq on the last packets only, nothing
// sent back, completions on both sides as soon as the last packet left.
func TestUCWriteSend(t *testing.T) {
	u := newUPair(t, transport.QPT_UC, upairConfig{psnA: 0xFFFFFE})
	a, b := u.a, u.b
	fill(a.buf[:8192], 6)
	recvAt(t, b, 21, 20000, 3000)
	must(t, postSend(a,
		transport.SendWR{WRID: 1, Opcode: transport.WR_RDMA_WRITE, SGList: sge(a, 0, 2500), Flags: transport.SendSignaled,
			RemoteAddr: b.mr.Addr() + 100, RKey: b.mr.RKey()},
		transport.SendWR{WRID: 2, Opcode: transport.WR_SEND_WITH_IMM, SGList: sge(a, 4000, 2100), ImmData: 0x01020304,
			Flags: transport.SendSignaled}))
	u.settle()
	out := u.tapA.take()
	expect(t, "UC", out,
		roce.UC_RDMA_WRITE_FIRST, 0xFFFFFE, roce.UC_RDMA_WRITE_MIDDLE, 0xFFFFFF, roce.UC_RDMA_WRITE_LAST, 0,
		roce.UC_SEND_FIRST, 1, roce.UC_SEND_MIDDLE, 2, roce.UC_SEND_LAST_WITH_IMMEDIATE, 3)
	for i, p := range out {
		if p.BTH.AckReq != (i == 2 || i == 5) || p.BTH.DestQP != b.qp.QPN() {
			t.Errorf("packet %d: AckReq %v DestQP 0x%x", i, p.BTH.AckReq, p.BTH.DestQP)
		}
		if want := roce.UDPSourcePort(0, a.qp.QPN(), b.qp.QPN()); p.UDP.SrcPort != want {
			t.Errorf("packet %d: sport %d, want %d", i, p.UDP.SrcPort, want)
		}
	}
	if out[0].RETH != (roce.RETH{VA: b.mr.Addr() + 100, RKey: b.mr.RKey(), DMALen: 2500}) || out[5].ImmDt != 0x01020304 {
		t.Errorf("RETH %+v ImmDt 0x%x", out[0].RETH, out[5].ImmDt)
	}
	if back := u.tapB.take(); len(back) != 0 {
		t.Fatalf("B answered with %v", summary(back))
	}
	if len(a.wcs) != 2 || len(b.wcs) != 1 {
		t.Fatalf("completions A %+v B %+v", a.wcs, b.wcs)
	}
	checkWC(t, a.wcs[0], 1, transport.WC_SUCCESS, transport.WC_RDMA_WRITE, 2500)
	checkWC(t, a.wcs[1], 2, transport.WC_SUCCESS, transport.WC_SEND, 2100)
	checkWC(t, b.wcs[0], 21, transport.WC_SUCCESS, transport.WC_RECV, 2100)
	if w := b.wcs[0]; w.Flags() != transport.WC_WITH_IMM || w.ImmData != 0x01020304 || w.SrcQP != 0 {
		t.Errorf("receive completion %+v", w)
	}
	checkBytes(t, "written", b.buf[100:2600], a.buf[:2500])
	checkBytes(t, "sent", b.buf[20000:22100], a.buf[4000:6100])
	checkCounters(t, "A", a, map[string]uint64{"sent_pkts": 6, "rdma_sends": 1})
	checkCounters(t, "B", b, map[string]uint64{"rcvd_pkts": 6, "rdma_recvs": 1, "rx_write_requests": 1})
}

// TestUCPSNGap loses packets on the Pipe. Four SENDs of 3, 3, 4 and 1 packets go to B
// (frames 1-3, 4-6, 7-10, 11); frames 3 and 8 are lost. The first message is dropped:
// the FIRST of the second arrives after a gap, B resynchronises on it and the second
// message lands in the receive WR the first had begun to fill. The third loses a
// MIDDLE: the packet after the gap and the rest of the message are dropped, and the
// fourth, an ONLY, takes the receive WR the third had begun to fill.
func TestUCPSNGap(t *testing.T) {
	u := newUPair(t, transport.QPT_UC, upairConfig{psnA: 100,
		pairConfig: pairConfig{faultsB: transport.Faults{Drop: []uint64{3, 8}}}})
	a, b := u.a, u.b
	fill(a.buf[:16384], 7)
	for i := range 3 {
		recvAt(t, b, uint64(31+i), 20000+i*5000, 5000)
	}
	sizes := []int{2100, 3000, 3500, 1000}
	var wrs []transport.SendWR
	for i, n := range sizes {
		wrs = append(wrs, transport.SendWR{WRID: uint64(i + 1), Opcode: transport.WR_SEND, SGList: sge(a, i*4096, n),
			Flags: transport.SendSignaled})
	}
	must(t, postSend(a, wrs...))
	u.settle()
	if got := b.end.Stats().Lost; got != 2 {
		t.Fatalf("%d frames lost, want 2", got)
	}
	if len(a.wcs) != 4 {
		t.Fatalf("A's completions %+v", a.wcs)
	}
	for i, wc := range a.wcs {
		checkWC(t, wc, uint64(i+1), transport.WC_SUCCESS, transport.WC_SEND, sizes[i])
	}
	if len(b.wcs) != 2 {
		t.Fatalf("B's completions %+v", b.wcs)
	}
	checkWC(t, b.wcs[0], 31, transport.WC_SUCCESS, transport.WC_RECV, 3000)
	checkWC(t, b.wcs[1], 32, transport.WC_SUCCESS, transport.WC_RECV, 1000)
	checkBytes(t, "second message", b.buf[20000:23000], a.buf[4096:4096+3000])
	checkBytes(t, "fourth message", b.buf[25000:26000], a.buf[3*4096:3*4096+1000])
	checkState(t, b, transport.QPS_RTS)
	// Frame 4 (a FIRST after the lost 3) and frame 9 (a MIDDLE after the lost 8) show
	// the gaps; frame 10 is dropped with its message.
	checkCounters(t, "B", b, map[string]uint64{"rcvd_pkts": 9, "out_of_seq_request": 2, "rcvd_msg_dropped": 1, "rdma_recvs": 2})
	// The third receive WR is still posted: the next message takes it.
	a.wcs, b.wcs = nil, nil
	must(t, postSend(a, transport.SendWR{WRID: 9, Opcode: transport.WR_SEND, SGList: sge(a, 0, 10)}))
	u.settle()
	if len(b.wcs) != 1 {
		t.Fatalf("B's completions %+v", b.wcs)
	}
	checkWC(t, b.wcs[0], 33, transport.WC_SUCCESS, transport.WC_RECV, 10)
}

// TestUCWriteGap: a UC RDMA WRITE that loses a packet is dropped from there on (the
// bytes before the gap stay written, as on any HCA), and a WRITE with immediate data
// after it completes normally; a WRITE to a bad R_Key is dropped silently.
func TestUCWriteGap(t *testing.T) {
	u := newUPair(t, transport.QPT_UC, upairConfig{pairConfig: pairConfig{faultsB: transport.Faults{Drop: []uint64{2}}}})
	a, b := u.a, u.b
	fill(a.buf[:8192], 8)
	recvAt(t, b, 41, 0, 0)
	must(t, postSend(a,
		transport.SendWR{WRID: 1, Opcode: transport.WR_RDMA_WRITE, SGList: sge(a, 0, 3000), RemoteAddr: b.mr.Addr() + 10000, RKey: b.mr.RKey()},
		transport.SendWR{WRID: 2, Opcode: transport.WR_RDMA_WRITE, SGList: sge(a, 0, 100), RemoteAddr: b.mr.Addr() + 30000, RKey: b.mr.RKey() ^ 0x80},
		transport.SendWR{WRID: 3, Opcode: transport.WR_RDMA_WRITE_WITH_IMM, SGList: sge(a, 4096, 2048), ImmData: 7,
			RemoteAddr: b.mr.Addr() + 20000, RKey: b.mr.RKey()}))
	u.settle()
	if len(b.wcs) != 1 {
		t.Fatalf("B's completions %+v", b.wcs)
	}
	checkWC(t, b.wcs[0], 41, transport.WC_SUCCESS, transport.WC_RECV_RDMA_WITH_IMM, 2048)
	checkBytes(t, "first packet of the broken WRITE", b.buf[10000:11024], a.buf[:1024])
	if z := b.buf[11024:13000]; strings.Count(string(z), "\x00") != len(z) {
		t.Error("the broken WRITE wrote past its gap")
	}
	if z := b.buf[30000:30100]; strings.Count(string(z), "\x00") != len(z) {
		t.Error("the WRITE with a bad R_Key wrote")
	}
	checkBytes(t, "WRITE with immediate", b.buf[20000:22048], a.buf[4096:4096+2048])
	checkState(t, b, transport.QPS_RTS)
	checkCounters(t, "B", b, map[string]uint64{"rcvd_pkts": 5, "out_of_seq_request": 1, "rcvd_msg_dropped": 1, "rdma_recvs": 1, "rx_write_requests": 1})
}

// TestUDQP1AgainstRxeCM puts a UD QP with QPN 1 and Q_Key 0x80010000 (the GSI) on
// the server's address of the rdma_cm capture. Every CM MAD the rdma_rxe client sent
// to QP1 is fed to it and received with byte_len 40 + 256, src_qp 1, IBV_WC_GRH, the
// frame's IPv4 header in the GRH area and the MAD after it. Every MAD the rdma_rxe
// server sent is then posted on the same QP (Q_Key 0x80010000 by the high-bit rule)
// and the frame the engine builds equals rxe's byte for byte once rxe's IPv4 ID is put
// in it: the same UDP source port, PSNs from 0, AckReq, DETH.
func TestUDQP1AgainstRxeCM(t *testing.T) {
	captures.Run(t, func(t *testing.T, s captures.Source) {
		frames, err := pcap.ReadFile(s.Path(t, "ib_write_bw_rdmacm.pcap"))
		must(t, err)
		var in, out []capFrame
		for _, f := range frames {
			var p roce.Packet
			if p.Decode(f.Data) != nil || p.BTH.Opcode.Service() != roce.ServiceUD {
				continue
			}
			if p.DstAddr() == rxeServer {
				in = append(in, capFrame{f.Time, f.Data, p})
			} else {
				out = append(out, capFrame{f.Time, f.Data, p})
			}
		}
		if len(in) == 0 || len(out) == 0 {
			t.Fatalf("%d UD frames to the server, %d from it", len(in), len(out))
		}
		ea, eb := transport.NewPipe(transport.PipeConfig{MAC: macA, Addrs: []netip.Addr{rxeServer}},
			transport.PipeConfig{MAC: macB, Addrs: []netip.Addr{rxeClient}})
		tap := &tapLink{PipeEnd: ea}
		u := &upair{pair: &pair{t: t, clock: transport.NewFakeClock()}}
		sv := u.newSideQPN(tap, 1)
		must(t, transport.BringUp(sv.qp, transport.QPS_RESET, transport.QPS_RTS,
			transport.ConnectParams{Type: transport.QPT_UD, QKey: 0x80010000}))
		for i := range in {
			recvAt(t, sv, uint64(i), i*296, 296)
		}
		for _, f := range in {
			if k, err := eb.Send([][]byte{f.data}); k != 1 || err != nil {
				t.Fatal(k, err)
			}
		}
		settle(t, u.clock, sv.dev)
		wcs := make([]transport.WorkCompletion, len(in)+1)
		if n := sv.cq.Poll(wcs); n != len(in) {
			t.Fatalf("%d completions for %d MADs: %+v; counters %v", n, len(in), wcs[:n], sv.qp.Counters())
		}
		for i, f := range in {
			wc := wcs[i]
			checkWC(t, wc, uint64(i), transport.WC_SUCCESS, transport.WC_RECV, 296)
			if wc.SrcQP != 1 || wc.Flags() != transport.WC_GRH {
				t.Errorf("MAD %d: src_qp %d flags %v", i, wc.SrcQP, wc.Flags())
			}
			got := sv.buf[i*296 : (i+1)*296]
			checkBytes(t, "GRH area zeros", got[:20], make([]byte, 20))
			checkBytes(t, "GRH area IPv4 header", got[20:40], f.data[f.pkt.L3Off:f.pkt.L4Off])
			checkBytes(t, "MAD", got[40:], f.pkt.Payload)
		}
		ah, err := sv.pd.CreateAH(transport.AddressHandle{DGID: roce.GIDFromAddr(rxeClient), SGIDIndex: 1})
		must(t, err)
		for i, f := range out {
			copy(sv.buf[60000:], f.pkt.Payload)
			must(t, postSend(sv, transport.SendWR{WRID: uint64(i), Opcode: transport.WR_SEND, SGList: sge(sv, 60000, len(f.pkt.Payload)),
				AH: ah, RemoteQPN: f.pkt.BTH.DestQP, RemoteQKey: f.pkt.DETH.QKey}))
			settle(t, u.clock, sv.dev)
			sent := tap.take()
			if len(sent) != 1 {
				t.Fatalf("MAD %d: %d frames", i, len(sent))
			}
			p := sent[0]
			p.IPv4.ID = f.pkt.IPv4.ID
			buf := make([]byte, 2048)
			n, err := p.Encode(buf)
			must(t, err)
			checkBytes(t, "frame", buf[:n], f.data[:len(f.pkt.Frame())])
		}
		if c := sv.qp.Counters(); c.Get(transport.CntSentPkts) != uint64(len(out)) || c.Get(transport.CntRcvdPkts) != uint64(len(in)) {
			t.Errorf("counters %v", c)
		}
		t.Logf("%d MADs received, %d sent as rxe sent them", len(in), len(out))
	})
}

// newSideQPN is newSide for a UD QP with a chosen QPN.
func (u *upair) newSideQPN(l *tapLink, qpn uint32) *side {
	dev, err := transport.Open(l, transport.Options{Clock: u.clock})
	must(u.t, err)
	s := &side{dev: dev, end: l.PipeEnd, pd: dev.AllocPD(), cq: dev.CreateCQ(1 << 10)}
	s.buf = make([]byte, 1<<16)
	s.mr, err = s.pd.RegMR(s.buf, transport.AccessLocalWrite)
	must(u.t, err)
	s.qp, err = s.pd.CreateQP(transport.QPInitAttr{Type: transport.QPT_UD, QPN: qpn, SendCQ: s.cq, RecvCQ: s.cq})
	must(u.t, err)
	return s
}

// settle runs one engine until it is idle.
func settle(t testing.TB, clock *transport.FakeClock, d *transport.Device) {
	t.Helper()
	for i := 0; i < 1000 && progress(t, d); i++ {
		clock.Advance(time.Microsecond)
	}
}
