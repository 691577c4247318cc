package daemon

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// FuzzSession feeds arbitrary data-path requests (op and body, no descriptors; the
// connection manager's and the SRQs' ops too) to one session, whose objects accumulate across inputs: the daemon never panics, and
// every answer is a well-formed reply to the request's op and seq.
func FuzzSession(f *testing.F) {
	le := func(v any) []byte {
		var b bytes.Buffer
		_ = binary.Write(&b, binary.LittleEndian, v)
		return b.Bytes()
	}
	f.Add(OpAllocPD, []byte{})
	f.Add(OpCreateCQ, le(&CreateCQReq{CQE: 16}))
	f.Add(OpCreateQP, le(&CreateQPReq{PD: 1, SendCQ: 2, RecvCQ: 2, QPType: qptRC, MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}))
	f.Add(OpModifyQP, le(&QPAttrMsg{QP: 3, Mask: 1, State: 1}))
	f.Add(OpCreateQP, le(&CreateQPReq{PD: 1, SendCQ: 2, RecvCQ: 2, QPType: qptUD, MaxSendWR: 4, MaxRecvWR: 4, MaxSendSGE: 1, MaxRecvSGE: 1}))
	f.Add(OpModifyQP, le(&QPAttrMsg{QP: 4, Mask: 1 | 1<<6, State: 1, QKey: 0x11111111}))
	f.Add(OpCreateAH, le(&CreateAHReq{PD: 1, SGIDIndex: 1, IsGlobal: 1, PortNum: 1}))
	f.Add(OpDestroyAH, le(&Handle{5}))
	f.Add(OpDestroyQP, le(&Handle{3}))
	f.Add(OpRegMR, le(&RegMRReq{PD: 1, Access: 1, Length: 4096}))
	f.Add(OpCreateSRQ, le(&CreateSRQReq{PD: 1, MaxWR: 4, MaxSGE: 1}))
	f.Add(OpPostSRQRecv, append(le(&PostSRQRecvReq{SRQ: 6, Count: 2}), le(&RecvWRMsg{WRID: 1, NumSGE: 1})...))
	f.Add(OpCreateQP, le(&CreateQPReq{PD: 1, SendCQ: 2, RecvCQ: 2, QPType: qptRC, MaxSendWR: 4, SRQ: 6}))
	f.Add(OpDestroySRQ, le(&Handle{6}))
	ip := netip.MustParseAddr("10.0.0.1")
	link, _ := transport.NewPipe(transport.PipeConfig{MAC: [6]byte{2, 0, 0, 0, 0, 1}, Addrs: []netip.Addr{ip}},
		transport.PipeConfig{MAC: [6]byte{2, 0, 0, 0, 0, 2}})
	dev, err := transport.Open(link, transport.Options{})
	if err != nil {
		f.Fatal(err)
	}
	sess := newSession(engineFake{fakeSource{[6]byte{2, 0, 0, 0, 0, 1}}, dev}, &objCounts{}, func(string, ...any) {})
	f.Cleanup(sess.close)
	seq := uint32(0)
	f.Fuzz(func(t *testing.T, op uint16, body []byte) {
		op = OpAllocPD + op%(opLastSRQ-OpAllocPD+1)
		seq++
		r, fds := sess.handle(op, seq, body, nil)
		closeAll(fds)
		h, p, err := ParseHeader(r)
		if err != nil || h.Op != op|ReplyBit || h.Seq != seq || len(p) < 4 {
			t.Fatalf("op %d: reply %x (%v)", op, r, err)
		}
		pollerFor(dev).Poll()
		_, _ = dev.Progress()
	})
}

// FuzzRings writes arbitrary slots and tails into the rings of a QP in RTS (RC,
// or UD with an address handle of the session, handle 3, that slots may name), as
// a misbehaving client could, and lets the daemon's poller take them: it never
// panics or faults; it posts what is well-formed and stops a broken ring with the
// QP in ERR.
func FuzzRings(f *testing.F) {
	f.Add([]byte{}, uint8(1), uint8(1), false)
	f.Add(le(SendWRMsg{Opcode: uint32(transport.WR_SEND), NumSGE: 1}, SGEMsg{Addr: 1 << 40, Length: 8, LKey: 7}), uint8(1), uint8(0), false)
	f.Add(le(SendWRMsg{Opcode: 3, NumSGE: 1000, InlineLen: 1 << 31}), uint8(200), uint8(200), false)
	f.Add(le(RecvWRMsg{NumSGE: 33}), uint8(0), uint8(3), false)
	f.Add(le(SendWRMsg{Opcode: uint32(transport.WR_SEND), Flags: uint32(transport.SendInline), InlineLen: 8, AH: 3, RemoteQPN: 99, RemoteQKey: 1},
		[]byte("8 bytes!")), uint8(1), uint8(0), true)
	f.Add(le(SendWRMsg{Opcode: uint32(transport.WR_RDMA_WRITE), AH: 3}), uint8(1), uint8(0), true)
	f.Add(le(SendWRMsg{Opcode: uint32(transport.WR_SEND), AH: 77}), uint8(2), uint8(0), true)
	ipA, ipB := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	link, _ := transport.NewPipe(transport.PipeConfig{MAC: [6]byte{2, 0, 0, 0, 0, 1}, Addrs: []netip.Addr{ipA}},
		transport.PipeConfig{MAC: [6]byte{2, 0, 0, 0, 0, 2}, Addrs: []netip.Addr{ipB}})
	dev, err := transport.Open(link, transport.Options{})
	if err != nil {
		f.Fatal(err)
	}
	sess := newSession(engineFake{fakeSource{[6]byte{2, 0, 0, 0, 0, 1}}, dev}, &objCounts{}, func(string, ...any) {})
	f.Cleanup(sess.close)
	pd, _ := sess.allocPD()
	cq, cqFDs, err := sess.createCQ(&CreateCQReq{CQE: 64})
	if err != nil {
		f.Fatal(err)
	}
	closeAll(cqFDs)
	gidB := roce.GIDFromAddr(ipB)
	if ah, err := sess.createAH(&CreateAHReq{PD: pd.Handle, DGID: gidB, SGIDIndex: 1, IsGlobal: 1, PortNum: 1}); err != nil || ah.Handle != 3 {
		f.Fatal(ah, err)
	}
	f.Fuzz(func(t *testing.T, data []byte, sends, recvs uint8, ud bool) {
		typ, modify := uint32(qptRC), []QPAttrMsg{
			{Mask: 1 | 1<<3 | 1<<4 | 1<<5, State: 1, AccessFlags: 0xf, PortNum: 1},
			{Mask: 1 | 1<<7 | 1<<8 | 1<<20 | 1<<12 | 1<<17 | 1<<15, State: 2, PathMTU: 3, DestQPN: 99, DGID: gidB, SGIDIndex: 1, IsGlobal: 1},
			{Mask: 1 | 1<<9 | 1<<10 | 1<<11 | 1<<16 | 1<<13, State: 3, Timeout: 14, RetryCnt: 7, RNRRetry: 7},
		}
		if ud {
			typ, modify = qptUD, []QPAttrMsg{{Mask: 1 | 1<<4 | 1<<5 | 1<<6, State: 1, PortNum: 1, QKey: 1}, {Mask: 1, State: 2}, {Mask: 1 | 1<<16, State: 3}}
		}
		r, fds, err := sess.createQP(&CreateQPReq{PD: pd.Handle, SendCQ: cq.Handle, RecvCQ: cq.Handle, QPType: typ,
			MaxSendWR: 8, MaxRecvWR: 8, MaxSendSGE: 2, MaxRecvSGE: 2, MaxInline: 32})
		if err != nil {
			t.Fatal(err)
		}
		mem, err := unix.Mmap(fds[0], 0, int(r.RingSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		closeAll(fds)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(mem)
		for _, m := range modify {
			m.QP = r.Handle
			if err := sess.modifyQP(&m); err != nil {
				t.Fatal(err)
			}
		}
		for off := r.SQOffset; off < r.RingSize && len(data) > 0; off += uint64(len(data)) {
			copy(mem[off:], data)
		}
		atomic.StoreUint32(u32(mem, QPRingSQTail), uint32(sends))
		atomic.StoreUint32(u32(mem, QPRingRQTail), uint32(recvs))
		pollerFor(dev).Poll()
		_, _ = dev.Progress()
		if err := sess.destroyQP(r.Handle); err != nil {
			t.Fatal(err)
		}
	})
}
