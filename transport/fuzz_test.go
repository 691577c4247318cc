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
// engine must not panic, must not touch memory outside its registered region, and
// every completion it reports must have a known status.
func FuzzEngineInput(f *testing.F) {
	f.Add([]byte{0x06, 0, 0, 0x10, 0x00, 0x00, 0x01, 0x07, 0x0a, 0x11, 0, 0, 0, 0x10, 0x0c, 0x12, 0x00, 0x01, 0x1f, 0x60})
	f.Add([]byte{0x0c, 0, 0, 0, 0, 0x20, 0, 0x10, 0, 0x0d, 0, 0x00, 0x0f, 0x02, 0x01, 0x14, 0x00, 0x00, 0x08})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newRaw(t, 100, 500, pairConfig{timeout: 10, rnrRetry: 2, retryCnt: 2})
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
			op := rcOpcodes[int(data[0])%len(rcOpcodes)] // RC only: the device drops the others before the QP
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
			r.send(op, psn, func(p *roce.Packet) {
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
	})
}

// rcOpcodes lists the known RC opcodes in ascending order: a fuzz byte below 0x15
// picks the opcode of the same value.
var rcOpcodes = func() []roce.Opcode {
	var ops []roce.Opcode
	for i := range 256 {
		if op := roce.Opcode(i); op.Valid() && op.Service() == roce.ServiceRC {
			ops = append(ops, op)
		}
	}
	return ops
}()

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
