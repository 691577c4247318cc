package daemon

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"testing"

	"github.com/xroce/xroce/transport"
)

// FuzzSession feeds arbitrary data-path requests (op and body, no descriptors) to
// one session, whose objects accumulate across inputs: the daemon never panics, and
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
	f.Add(OpPostSend, le(&PostHdr{QP: 3, N: 1}))
	f.Add(OpPostRecv, le(&PostHdr{QP: 3, N: 2}))
	f.Add(OpRegMR, le(&RegMRReq{PD: 1, Access: 1, Length: 4096}))
	ip := netip.MustParseAddr("10.0.0.1")
	link, _ := transport.NewPipe(transport.PipeConfig{MAC: [6]byte{2, 0, 0, 0, 0, 1}, Addrs: []netip.Addr{ip}},
		transport.PipeConfig{MAC: [6]byte{2, 0, 0, 0, 0, 2}})
	dev, err := transport.Open(link, transport.Options{})
	if err != nil {
		f.Fatal(err)
	}
	sess := newSession(engineFake{fakeSource{[6]byte{2, 0, 0, 0, 0, 1}}, dev}, &objCounts{})
	f.Cleanup(sess.close)
	seq := uint32(0)
	f.Fuzz(func(t *testing.T, op uint16, body []byte) {
		op = OpAllocPD + op%(OpPostRecv-OpAllocPD+1)
		seq++
		r := sess.handle(op, seq, body, nil)
		h, p, err := ParseHeader(r)
		if err != nil || h.Op != op|ReplyBit || h.Seq != seq || len(p) < 4 {
			t.Fatalf("op %d: reply %x (%v)", op, r, err)
		}
		_, _ = dev.Progress()
	})
}
