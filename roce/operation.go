package roce

import "strconv"

// Operation is what a requester asks of its peer, the part of a send work request
// that decides the packets' opcodes (IBTA Vol 1 §9.4; the send opcodes of
// include/rdma/ib_verbs.h enum ib_wr_opcode that have a packet form).
type Operation uint8

// Operations. Every one is available on RC; UC carries SEND and RDMA WRITE with or
// without immediate data, UD carries single-packet SENDs with or without immediate
// data (IBTA Vol 1 Table 38).
const (
	OpSend             Operation = iota + 1 // SEND
	OpSendWithImm                           // SEND with immediate data
	OpSendWithInv                           // SEND with invalidate (an IETH names the R_Key)
	OpRDMAWrite                             // RDMA WRITE
	OpRDMAWriteWithImm                      // RDMA WRITE with immediate data
	OpRDMARead                              // RDMA READ (the request; the data comes back in read responses)
	OpCompareSwap                           // ATOMIC compare and swap
	OpFetchAdd                              // ATOMIC fetch and add
	OpFlush                                 // FLUSH (IBTA 1.5 memory placement extensions)
	OpAtomicWrite                           // ATOMIC WRITE (IBTA 1.5 memory placement extensions)
)

var operationNames = [...]string{
	OpSend: "SEND", OpSendWithImm: "SEND_WITH_IMM", OpSendWithInv: "SEND_WITH_INV",
	OpRDMAWrite: "RDMA_WRITE", OpRDMAWriteWithImm: "RDMA_WRITE_WITH_IMM", OpRDMARead: "RDMA_READ",
	OpCompareSwap: "COMPARE_SWAP", OpFetchAdd: "FETCH_ADD", OpFlush: "FLUSH", OpAtomicWrite: "ATOMIC_WRITE",
}

// String returns the operation's name, e.g. "RDMA_WRITE_WITH_IMM", or
// "Operation(N)" for an unknown value.
func (o Operation) String() string {
	if int(o) < len(operationNames) && operationNames[o] != "" {
		return operationNames[o]
	}
	return "Operation(" + strconv.Itoa(int(o)) + ")"
}

// opSeq is the opcodes of one operation on one service: only for a one-packet
// message, first/middle/last for longer ones (multi false: always one packet).
type opSeq struct {
	only, first, middle, last Opcode
	multi, ok                 bool
}

func seq(first, middle, last, only Opcode) opSeq {
	return opSeq{only: only, first: first, middle: middle, last: last, multi: true, ok: true}
}

func single(only Opcode) opSeq { return opSeq{only: only, ok: true} }

// The opcode sequences of each service (IBTA Vol 1 Table 38; rdma_rxe rxe_req.c
// next_opcode_rc and next_opcode_uc; UD messages are one packet).
var (
	rcOps = [...]opSeq{
		OpSend:             seq(RC_SEND_FIRST, RC_SEND_MIDDLE, RC_SEND_LAST, RC_SEND_ONLY),
		OpSendWithImm:      seq(RC_SEND_FIRST, RC_SEND_MIDDLE, RC_SEND_LAST_WITH_IMMEDIATE, RC_SEND_ONLY_WITH_IMMEDIATE),
		OpSendWithInv:      seq(RC_SEND_FIRST, RC_SEND_MIDDLE, RC_SEND_LAST_WITH_INVALIDATE, RC_SEND_ONLY_WITH_INVALIDATE),
		OpRDMAWrite:        seq(RC_RDMA_WRITE_FIRST, RC_RDMA_WRITE_MIDDLE, RC_RDMA_WRITE_LAST, RC_RDMA_WRITE_ONLY),
		OpRDMAWriteWithImm: seq(RC_RDMA_WRITE_FIRST, RC_RDMA_WRITE_MIDDLE, RC_RDMA_WRITE_LAST_WITH_IMMEDIATE, RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE),
		OpRDMARead:         single(RC_RDMA_READ_REQUEST),
		OpCompareSwap:      single(RC_COMPARE_SWAP),
		OpFetchAdd:         single(RC_FETCH_ADD),
		OpFlush:            single(RC_FLUSH),
		OpAtomicWrite:      single(RC_ATOMIC_WRITE),
	}
	ucOps = [...]opSeq{
		OpSend:             seq(UC_SEND_FIRST, UC_SEND_MIDDLE, UC_SEND_LAST, UC_SEND_ONLY),
		OpSendWithImm:      seq(UC_SEND_FIRST, UC_SEND_MIDDLE, UC_SEND_LAST_WITH_IMMEDIATE, UC_SEND_ONLY_WITH_IMMEDIATE),
		OpRDMAWrite:        seq(UC_RDMA_WRITE_FIRST, UC_RDMA_WRITE_MIDDLE, UC_RDMA_WRITE_LAST, UC_RDMA_WRITE_ONLY),
		OpRDMAWriteWithImm: seq(UC_RDMA_WRITE_FIRST, UC_RDMA_WRITE_MIDDLE, UC_RDMA_WRITE_LAST_WITH_IMMEDIATE, UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE),
	}
	udOps = [...]opSeq{
		OpSend:        single(UD_SEND_ONLY),
		OpSendWithImm: single(UD_SEND_ONLY_WITH_IMMEDIATE),
	}
)

// NextOpcode returns the opcode of packet i (counted from 0) of an n-packet message of
// operation o on transport service svc (ServiceRC, ServiceUC or ServiceUD): the ONLY
// opcode when n is 1, else FIRST, MIDDLE… and LAST, the LAST and ONLY ones carrying the
// immediate data or invalidate of o (IBTA Vol 1 §9.4, Table 38). rdma_rxe's
// next_opcode_rc/next_opcode_uc (rxe_req.c) choose the same opcodes from the previous
// packet's opcode instead of the index.
//
// It reports false when svc does not carry o (READ on UC, anything but SEND on UD,
// CNP), when o is unknown, when i is not in [0, n), and when n > 1 for an operation
// that is always one packet (READ request, atomics, FLUSH, ATOMIC_WRITE, every UD
// SEND).
func NextOpcode(svc Opcode, o Operation, i, n int) (Opcode, bool) {
	var ops []opSeq
	switch svc {
	case ServiceRC:
		ops = rcOps[:]
	case ServiceUC:
		ops = ucOps[:]
	case ServiceUD:
		ops = udOps[:]
	default:
		return 0, false
	}
	if int(o) >= len(ops) || !ops[o].ok || n < 1 || i < 0 || i >= n {
		return 0, false
	}
	s := &ops[o]
	switch {
	case n == 1:
		return s.only, true
	case !s.multi:
		return 0, false
	case i == 0:
		return s.first, true
	case i == n-1:
		return s.last, true
	}
	return s.middle, true
}

// ReadResponseOpcode returns the opcode of packet i (counted from 0) of an n-packet RDMA
// READ response: RDMA_READ_RESPONSE_ONLY when n is 1, else FIRST, MIDDLE… and LAST
// (IBTA Vol 1 §9.4, Table 38; RC is the only service with READ). It reports false
// when i is not in [0, n).
func ReadResponseOpcode(i, n int) (Opcode, bool) {
	switch {
	case n < 1 || i < 0 || i >= n:
		return 0, false
	case n == 1:
		return RC_RDMA_READ_RESPONSE_ONLY, true
	case i == 0:
		return RC_RDMA_READ_RESPONSE_FIRST, true
	case i == n-1:
		return RC_RDMA_READ_RESPONSE_LAST, true
	}
	return RC_RDMA_READ_RESPONSE_MIDDLE, true
}
