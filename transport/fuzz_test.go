package transport_test

import (
	"encoding/binary"
	"testing"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// FuzzEngineInput feeds the engine sequences of well-formed frames (good ICRC) with
// arbitrary opcodes, PSNs, keys, addresses, lengths and syndromes, as a hostile or
// broken peer would send, while the engine has requests of its own outstanding. The
// top two bits of a record's first byte pick the QP the frame goes to, with opcodes
// of its service: 0 and 3 the RC QP, 1 a UC QP, 2 a UD QP (Q_Key good or bad). The
// engine must not panic, must not touch memory outside its registered region, every
// completion it reports must have a known status, and the UC and UD QPs must never
// leave RTS because of what arrived.
func FuzzEngineInput(f *testing.F) {
	f.Add([]byte{0x06, 0, 0, 0x10, 0x00, 0x00, 0x01, 0x07, 0x0a, 0x11, 0, 0, 0, 0x10, 0x0c, 0x12, 0x00, 0x01, 0x1f, 0x60})
	f.Add([]byte{0x0c, 0, 0, 0, 0, 0x20, 0, 0x10, 0, 0x0d, 0, 0x00, 0x0f, 0x02, 0x01, 0x14, 0x00, 0x00, 0x08})
	// UC: SEND_FIRST at PSN 500, SEND_LAST after a gap, SEND_ONLY (resynchronised),
	// RDMA_WRITE_FIRST of 2048 bytes, RDMA_WRITE_LAST_WITH_IMMEDIATE.
	f.Add([]byte{0x40, 10, 0x04, 0x00, 0, 0, 0, 0, 0, 0x42, 12, 0x00, 0x10, 0, 0, 0, 0, 0, 0x44, 13, 0x00, 0x20, 0, 0, 0, 0, 0,
		0x46, 14, 0x04, 0x00, 0x10, 0, 0x08, 0x00, 0, 0x49, 15, 0x04, 0x00, 0, 0, 0, 0, 0})
	// UD: a good SEND_ONLY, an oversize SEND_ONLY_WITH_IMMEDIATE, a bad Q_Key, one too
	// big for the 1000-byte receive.
	f.Add([]byte{0x80, 0, 0x00, 0x40, 0, 0, 0, 0, 0x33, 0x81, 1, 0x04, 0x10, 0, 0, 0, 0, 0x33, 0x80, 2, 0x00, 0x10, 0, 2, 0, 0, 0,
		0x80, 3, 0x03, 0xf0, 0, 0, 0, 0, 0x44})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newRaw(t, 100, 500, pairConfig{timeout: 10, rnrRetry: 2, retryCnt: 2})
		uc, ud := fuzzUnreliableQPs(t, r)
		guard := make([]byte, 4096)
		fill(guard, 1)
		want := append([]byte(nil), guard...)
		must(t, postRecv(r.e, 1, 0, 3000))
		fill(r.e.buf[:8192], 2)
		must(t, postSend(r.e,
			transport.SendWR{WRID: 1, Opcode: transport.WR_RDMA_WRITE, SGList: sge(r.e, 0, 2500), RemoteAddr: 0x1000, RKey: 7},
			transport.SendWR{WRID: 2, Opcode: transport.WR_RDMA_READ, SGList: sge(r.e, 4096, 3000), RemoteAddr: 0x1000, RKey: 7},
			transport.SendWR{WRID: 3, Opcode: transport.WR_ATOMIC_FETCH_AND_ADD, SGList: sge(r.e, 8000, 8), RemoteAddr: 0x1000, RKey: 7}))
		r.step()
		for len(data) >= 8 {
			target, ops := r.e.qp, rcOpcodes // a fuzz byte below 0x15 picks the RC opcode of the same value
			switch data[0] >> 6 {
			case 1:
				target, ops = uc, ucOpcodes
			case 2:
				target, ops = ud, udOpcodes
			}
			op := ops[int(data[0]&0x3F)%len(ops)]
			psn := uint32(490) + uint32(data[1]%40)
			if op.Is(roce.ClassResponse) {
				psn = uint32(95) + uint32(data[1]%20)
			}
			n := int(binary.BigEndian.Uint16(data[2:4])) % 1100
			if !op.Info().Payload {
				n = 0
			}
			va := r.e.mr.Addr() + uint64(int64(int8(data[4]))*64)
			key := r.e.mr.RKey()
			if data[5]&1 != 0 {
				key ^= uint32(data[5])
			}
			dlen := uint32(binary.BigEndian.Uint16(data[6:8]))
			syn := roce.Syndrome(0x1F)
			if len(data) > 8 {
				syn = roce.Syndrome(data[8])
			}
			qkey := uint32(testQKey)
			if data[5]&2 != 0 {
				qkey ^= uint32(data[5])
			}
			srcQP := uint32(0x42)
			if len(data) > 8 {
				srcQP = uint32(data[8])
			}
			r.send(op, psn, func(p *roce.Packet) {
				p.BTH.DestQP = target.QPN()
				p.DETH = roce.DETH{QKey: qkey, SrcQP: srcQP}
				p.Payload = make([]byte, n)
				p.BTH.AckReq = data[1]&0x80 != 0
				p.RETH = roce.RETH{VA: va, RKey: key, DMALen: dlen}
				p.AtomicETH = roce.AtomicETH{VA: va &^ 7, RKey: key, SwapAdd: 1}
				p.AETH = roce.AETH{Syndrome: syn, MSN: 1}
			})
			r.step()
			if data[1]&0x40 != 0 && !r.e.dev.NextDeadline().IsZero() {
				r.advance()
			}
			data = data[min(len(data), 9):]
		}
		for _, wc := range r.wcs() {
			if !wcStatuses[wc.Status] {
				t.Fatalf("completion with an undefined status: %+v", wc)
			}
		}
		checkBytes(t, "memory outside the region", guard, want)
		for _, qp := range []*transport.QueuePair{uc, ud} {
			if s := qp.State(); s != transport.QPS_RTS {
				t.Fatalf("%v QP in %v after what it received", qp.Type(), s)
			}
		}
	})
}

// fuzzUnreliableQPs adds a UC and a UD QP to r's device, on r's CQ, with receives
// posted and sends of their own under way: the UC QP talks to r's peer QP, whose
// PSNs it expects from 500; the UD QP has Q_Key testQKey.
func fuzzUnreliableQPs(t *testing.T, r *raw) (uc, ud *transport.QueuePair) {
	e := r.e
	mk := func(typ transport.QPType) *transport.QueuePair {
		qp, err := e.pd.CreateQP(transport.QPInitAttr{Type: typ, SendCQ: e.cq, RecvCQ: e.cq})
		must(t, err)
		return qp
	}
	uc, ud = mk(transport.QPT_UC), mk(transport.QPT_UD)
	ah := transport.AddressHandle{DGID: roce.GIDFromAddr(addrB), SGIDIndex: 1}
	must(t, transport.BringUp(uc, transport.QPS_RESET, transport.QPS_RTS, transport.ConnectParams{Type: transport.QPT_UC,
		Access: transport.AccessRemoteWrite, AH: ah, PathMTU: roce.MTU1024, DestQPN: rawQPN, RQPSN: 500, SQPSN: 300}))
	must(t, transport.BringUp(ud, transport.QPS_RESET, transport.QPS_RTS, transport.ConnectParams{Type: transport.QPT_UD,
		QKey: testQKey, SQPSN: 700}))
	for i := range 4 {
		_, err := uc.PostRecv(transport.RecvWR{WRID: uint64(100 + i), SGList: sge(e, 12288+i*3000, 3000)})
		must(t, err)
		_, err = ud.PostRecv(transport.RecvWR{WRID: uint64(200 + i), SGList: sge(e, 24576+i*1000, 1000)})
		must(t, err)
	}
	handle, err := e.pd.CreateAH(ah)
	must(t, err)
	_, err = uc.PostSend(transport.SendWR{WRID: 11, Opcode: transport.WR_SEND, SGList: sge(e, 0, 2000)})
	must(t, err)
	_, err = ud.PostSend(transport.SendWR{WRID: 12, Opcode: transport.WR_SEND_WITH_IMM, SGList: sge(e, 0, 500), AH: handle,
		RemoteQPN: rawQPN, RemoteQKey: 0x80000000})
	must(t, err)
	return uc, ud
}

// rcOpcodes, ucOpcodes and udOpcodes list the known opcodes of each service in
// ascending order: a fuzz byte below 0x15 picks the RC opcode of the same value.
var (
	rcOpcodes = opcodesOf(roce.ServiceRC)
	ucOpcodes = opcodesOf(roce.ServiceUC)
	udOpcodes = opcodesOf(roce.ServiceUD)
)

func opcodesOf(svc roce.Opcode) []roce.Opcode {
	var ops []roce.Opcode
	for i := range 256 {
		if op := roce.Opcode(i); op.Valid() && op.Service() == svc {
			ops = append(ops, op)
		}
	}
	return ops
}

// wcStatuses holds every status enum ibv_wc_status defines that the engine's WCStatus
// names (libibverbs verbs.h); a completion must carry one of them.
var wcStatuses = map[transport.WCStatus]bool{
	transport.WC_SUCCESS: true, transport.WC_LOC_LEN_ERR: true, transport.WC_LOC_QP_OP_ERR: true,
	transport.WC_LOC_EEC_OP_ERR: true, transport.WC_LOC_PROT_ERR: true, transport.WC_WR_FLUSH_ERR: true,
	transport.WC_MW_BIND_ERR: true, transport.WC_BAD_RESP_ERR: true, transport.WC_LOC_ACCESS_ERR: true,
	transport.WC_REM_INV_REQ_ERR: true, transport.WC_REM_ACCESS_ERR: true, transport.WC_REM_OP_ERR: true,
	transport.WC_RETRY_EXC_ERR: true, transport.WC_RNR_RETRY_EXC_ERR: true, transport.WC_FATAL_ERR: true,
	transport.WC_RESP_TIMEOUT_ERR: true, transport.WC_GENERAL_ERR: true,
}
