package roce_test

import (
	"testing"

	"github.com/xroce/xroce/roce"
)

// TestOpcodeClasses checks the class bits of every known opcode, and that no unknown
// opcode has any.
func TestOpcodeClasses(t *testing.T) {
	const (
		send  = roce.ClassSend | roce.ClassRequest
		write = roce.ClassWrite | roce.ClassRequest
		take  = roce.ClassConsumesRecv
		done  = roce.ClassCompletesRecv
		imm   = roce.ClassImmediate
		inv   = roce.ClassInvalidate
		resp  = roce.ClassReadResponse | roce.ClassResponse
		ack   = roce.ClassAck | roce.ClassResponse
	)
	want := map[roce.Opcode]roce.OpClass{
		roce.RC_SEND_FIRST:                     send | take,
		roce.RC_SEND_MIDDLE:                    send,
		roce.RC_SEND_LAST:                      send | done,
		roce.RC_SEND_LAST_WITH_IMMEDIATE:       send | done | imm,
		roce.RC_SEND_ONLY:                      send | take | done,
		roce.RC_SEND_ONLY_WITH_IMMEDIATE:       send | take | done | imm,
		roce.RC_RDMA_WRITE_FIRST:               write,
		roce.RC_RDMA_WRITE_MIDDLE:              write,
		roce.RC_RDMA_WRITE_LAST:                write,
		roce.RC_RDMA_WRITE_LAST_WITH_IMMEDIATE: write | take | done | imm,
		roce.RC_RDMA_WRITE_ONLY:                write,
		roce.RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE: write | take | done | imm,
		roce.RC_RDMA_READ_REQUEST:              roce.ClassRead | roce.ClassRequest,
		roce.RC_RDMA_READ_RESPONSE_FIRST:       resp,
		roce.RC_RDMA_READ_RESPONSE_MIDDLE:      resp,
		roce.RC_RDMA_READ_RESPONSE_LAST:        resp,
		roce.RC_RDMA_READ_RESPONSE_ONLY:        resp,
		roce.RC_ACKNOWLEDGE:                    ack,
		roce.RC_ATOMIC_ACKNOWLEDGE:             ack,
		roce.RC_COMPARE_SWAP:                   roce.ClassAtomic | roce.ClassRequest,
		roce.RC_FETCH_ADD:                      roce.ClassAtomic | roce.ClassRequest,
		roce.RC_SEND_LAST_WITH_INVALIDATE:      send | done | inv,
		roce.RC_SEND_ONLY_WITH_INVALIDATE:      send | take | done | inv,
		roce.RC_FLUSH:                          roce.ClassFlush | roce.ClassRequest,
		roce.RC_ATOMIC_WRITE:                   roce.ClassAtomicWrite | roce.ClassRequest,
		roce.UC_SEND_FIRST:                     send | take,
		roce.UC_SEND_MIDDLE:                    send,
		roce.UC_SEND_LAST:                      send | done,
		roce.UC_SEND_LAST_WITH_IMMEDIATE:       send | done | imm,
		roce.UC_SEND_ONLY:                      send | take | done,
		roce.UC_SEND_ONLY_WITH_IMMEDIATE:       send | take | done | imm,
		roce.UC_RDMA_WRITE_FIRST:               write,
		roce.UC_RDMA_WRITE_MIDDLE:              write,
		roce.UC_RDMA_WRITE_LAST:                write,
		roce.UC_RDMA_WRITE_LAST_WITH_IMMEDIATE: write | take | done | imm,
		roce.UC_RDMA_WRITE_ONLY:                write,
		roce.UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE: write | take | done | imm,
		roce.UD_SEND_ONLY:                      send | take | done,
		roce.UD_SEND_ONLY_WITH_IMMEDIATE:       send | take | done | imm,
		roce.CNP:                               roce.ClassCNP,
	}
	if len(want) != 40 {
		t.Fatalf("the table lists %d opcodes, want all 40", len(want))
	}
	for i := range 256 {
		op := roce.Opcode(i)
		w, known := want[op]
		if known != op.Valid() {
			t.Errorf("%v: Valid %v, listed %v", op, op.Valid(), known)
		}
		if got := op.Class(); got != w {
			t.Errorf("%v: Class %v, want %v", op, got, w)
		}
		if got := op.Info().Class; got != w {
			t.Errorf("%v: Info().Class %v, want %v", op, got, w)
		}
		if !known {
			continue
		}
		// Every opcode but CNP is exactly one of request and response.
		if r := w & (roce.ClassRequest | roce.ClassResponse); (r == 0) != (op == roce.CNP) || r == roce.ClassRequest|roce.ClassResponse {
			t.Errorf("%v: request/response classes %v", op, r)
		}
		// ClassImmediate and ClassInvalidate go with the ImmDt and IETH headers.
		hs := op.Info().Headers
		if (hs&roce.HdrImmDt != 0) != op.Is(roce.ClassImmediate) || (hs&roce.HdrIETH != 0) != op.Is(roce.ClassInvalidate) {
			t.Errorf("%v: headers %v, classes %v", op, hs, w)
		}
	}
}

func TestOpcodeIs(t *testing.T) {
	for _, c := range []struct {
		op   roce.Opcode
		c    roce.OpClass
		want bool
	}{
		{roce.RC_SEND_ONLY, roce.ClassSend, true},
		{roce.RC_SEND_ONLY, roce.ClassSend | roce.ClassConsumesRecv, true},
		{roce.RC_SEND_ONLY, roce.ClassSend | roce.ClassImmediate, false},
		{roce.RC_SEND_MIDDLE, roce.ClassConsumesRecv, false},
		{roce.RC_RDMA_WRITE_FIRST, roce.ClassWrite, true},
		{roce.RC_RDMA_WRITE_FIRST, roce.ClassSend, false},
		{roce.RC_ATOMIC_WRITE, roce.ClassWrite, false},
		{roce.RC_ATOMIC_WRITE, roce.ClassAtomic, false},
		{roce.RC_ATOMIC_ACKNOWLEDGE, roce.ClassAtomic, false},
		{roce.RC_ATOMIC_ACKNOWLEDGE, roce.ClassAck, true},
		{roce.RC_RDMA_READ_RESPONSE_MIDDLE, roce.ClassResponse, true},
		{roce.RC_RDMA_READ_RESPONSE_MIDDLE, roce.ClassRead, false},
		{roce.CNP, roce.ClassCNP, true},
		{roce.RC_SEND_ONLY, 0, false},
		{roce.Opcode(0x15), roce.ClassRequest, false},
	} {
		if got := c.op.Is(c.c); got != c.want {
			t.Errorf("%v.Is(%v) = %v, want %v", c.op, c.c, got, c.want)
		}
	}
}

func TestOpClassString(t *testing.T) {
	for _, c := range []struct {
		c    roce.OpClass
		want string
	}{
		{0, "none"},
		{roce.ClassSend | roce.ClassRequest | roce.ClassConsumesRecv, "Send|Request|ConsumesRecv"},
		{roce.ClassReadResponse | roce.ClassResponse, "ReadResponse|Response"},
		{roce.ClassCNP, "CNP"},
		{roce.ClassAck | 0x8000, "Ack|0x8000"},
		{0x8000, "0x8000"},
	} {
		if got := c.c.String(); got != c.want {
			t.Errorf("OpClass(0x%x).String() = %q, want %q", uint16(c.c), got, c.want)
		}
	}
}

// TestNextOpcode lists the exact opcodes of one-, two- and three-packet messages of
// every operation on every service.
func TestNextOpcode(t *testing.T) {
	type seqs = [3][]roce.Opcode // n = 1, 2, 3; nil: not carried
	one := func(op roce.Opcode) seqs { return seqs{{op}} }
	multi := func(first, middle, last, only roce.Opcode) seqs {
		return seqs{{only}, {first, last}, {first, middle, last}}
	}
	ops := []roce.Operation{roce.OpSend, roce.OpSendWithImm, roce.OpSendWithInv, roce.OpRDMAWrite,
		roce.OpRDMAWriteWithImm, roce.OpRDMARead, roce.OpCompareSwap, roce.OpFetchAdd, roce.OpFlush, roce.OpAtomicWrite}
	want := map[roce.Opcode]map[roce.Operation]seqs{
		roce.ServiceRC: {
			roce.OpSend:             multi(roce.RC_SEND_FIRST, roce.RC_SEND_MIDDLE, roce.RC_SEND_LAST, roce.RC_SEND_ONLY),
			roce.OpSendWithImm:      multi(roce.RC_SEND_FIRST, roce.RC_SEND_MIDDLE, roce.RC_SEND_LAST_WITH_IMMEDIATE, roce.RC_SEND_ONLY_WITH_IMMEDIATE),
			roce.OpSendWithInv:      multi(roce.RC_SEND_FIRST, roce.RC_SEND_MIDDLE, roce.RC_SEND_LAST_WITH_INVALIDATE, roce.RC_SEND_ONLY_WITH_INVALIDATE),
			roce.OpRDMAWrite:        multi(roce.RC_RDMA_WRITE_FIRST, roce.RC_RDMA_WRITE_MIDDLE, roce.RC_RDMA_WRITE_LAST, roce.RC_RDMA_WRITE_ONLY),
			roce.OpRDMAWriteWithImm: multi(roce.RC_RDMA_WRITE_FIRST, roce.RC_RDMA_WRITE_MIDDLE, roce.RC_RDMA_WRITE_LAST_WITH_IMMEDIATE, roce.RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE),
			roce.OpRDMARead:         one(roce.RC_RDMA_READ_REQUEST),
			roce.OpCompareSwap:      one(roce.RC_COMPARE_SWAP),
			roce.OpFetchAdd:         one(roce.RC_FETCH_ADD),
			roce.OpFlush:            one(roce.RC_FLUSH),
			roce.OpAtomicWrite:      one(roce.RC_ATOMIC_WRITE),
		},
		roce.ServiceUC: {
			roce.OpSend:             multi(roce.UC_SEND_FIRST, roce.UC_SEND_MIDDLE, roce.UC_SEND_LAST, roce.UC_SEND_ONLY),
			roce.OpSendWithImm:      multi(roce.UC_SEND_FIRST, roce.UC_SEND_MIDDLE, roce.UC_SEND_LAST_WITH_IMMEDIATE, roce.UC_SEND_ONLY_WITH_IMMEDIATE),
			roce.OpRDMAWrite:        multi(roce.UC_RDMA_WRITE_FIRST, roce.UC_RDMA_WRITE_MIDDLE, roce.UC_RDMA_WRITE_LAST, roce.UC_RDMA_WRITE_ONLY),
			roce.OpRDMAWriteWithImm: multi(roce.UC_RDMA_WRITE_FIRST, roce.UC_RDMA_WRITE_MIDDLE, roce.UC_RDMA_WRITE_LAST_WITH_IMMEDIATE, roce.UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE),
		},
		roce.ServiceUD: {
			roce.OpSend:        one(roce.UD_SEND_ONLY),
			roce.OpSendWithImm: one(roce.UD_SEND_ONLY_WITH_IMMEDIATE),
		},
		roce.ServiceCNP: {},
	}
	for svc, bySvc := range want {
		for _, o := range ops {
			w := bySvc[o]
			for n := 1; n <= 3; n++ {
				var got []roce.Opcode
				for i := range n {
					op, ok := roce.NextOpcode(svc, o, i, n)
					if ok != (w[n-1] != nil) {
						t.Errorf("NextOpcode(%v, %v, %d, %d) ok = %v", svc, o, i, n, ok)
					}
					if ok {
						got = append(got, op)
					}
				}
				if !equalOps(got, w[n-1]) {
					t.Errorf("%v %v in %d packets: %v, want %v", svc, o, n, got, w[n-1])
				}
			}
			// A long message repeats MIDDLE.
			if w[2] != nil {
				if op, _ := roce.NextOpcode(svc, o, 5, 10); op != w[2][1] {
					t.Errorf("NextOpcode(%v, %v, 5, 10) = %v, want %v", svc, o, op, w[2][1])
				}
			}
		}
	}
	for _, c := range []struct {
		o    roce.Operation
		i, n int
	}{{roce.OpSend, 0, 0}, {roce.OpSend, -1, 2}, {roce.OpSend, 2, 2}, {0, 0, 1}, {roce.OpAtomicWrite + 1, 0, 1}, {255, 0, 1}} {
		if op, ok := roce.NextOpcode(roce.ServiceRC, c.o, c.i, c.n); ok {
			t.Errorf("NextOpcode(RC, %v, %d, %d) = %v, want not ok", c.o, c.i, c.n, op)
		}
	}
}

func equalOps(a, b []roce.Opcode) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestReadResponseOpcode(t *testing.T) {
	for _, c := range []struct {
		n    int
		want []roce.Opcode
	}{
		{1, []roce.Opcode{roce.RC_RDMA_READ_RESPONSE_ONLY}},
		{2, []roce.Opcode{roce.RC_RDMA_READ_RESPONSE_FIRST, roce.RC_RDMA_READ_RESPONSE_LAST}},
		{3, []roce.Opcode{roce.RC_RDMA_READ_RESPONSE_FIRST, roce.RC_RDMA_READ_RESPONSE_MIDDLE, roce.RC_RDMA_READ_RESPONSE_LAST}},
		{4, []roce.Opcode{roce.RC_RDMA_READ_RESPONSE_FIRST, roce.RC_RDMA_READ_RESPONSE_MIDDLE, roce.RC_RDMA_READ_RESPONSE_MIDDLE, roce.RC_RDMA_READ_RESPONSE_LAST}},
	} {
		var got []roce.Opcode
		for i := range c.n {
			op, ok := roce.ReadResponseOpcode(i, c.n)
			if !ok {
				t.Errorf("ReadResponseOpcode(%d, %d) not ok", i, c.n)
			}
			got = append(got, op)
		}
		if !equalOps(got, c.want) {
			t.Errorf("%d packets: %v, want %v", c.n, got, c.want)
		}
	}
	for _, c := range [][2]int{{0, 0}, {-1, 1}, {1, 1}, {3, 2}} {
		if op, ok := roce.ReadResponseOpcode(c[0], c[1]); ok {
			t.Errorf("ReadResponseOpcode(%d, %d) = %v, want not ok", c[0], c[1], op)
		}
	}
}

func TestOperationString(t *testing.T) {
	for o, want := range map[roce.Operation]string{
		roce.OpSend: "SEND", roce.OpSendWithImm: "SEND_WITH_IMM", roce.OpSendWithInv: "SEND_WITH_INV",
		roce.OpRDMAWrite: "RDMA_WRITE", roce.OpRDMAWriteWithImm: "RDMA_WRITE_WITH_IMM", roce.OpRDMARead: "RDMA_READ",
		roce.OpCompareSwap: "COMPARE_SWAP", roce.OpFetchAdd: "FETCH_ADD", roce.OpFlush: "FLUSH",
		roce.OpAtomicWrite: "ATOMIC_WRITE", 0: "Operation(0)", 11: "Operation(11)",
	} {
		if got := o.String(); got != want {
			t.Errorf("Operation(%d).String() = %q, want %q", uint8(o), got, want)
		}
	}
}
