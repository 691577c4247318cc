package roce

import "strconv"

// Opcode is the 8-bit BTH OpCode field: a 3-bit transport-service prefix and a 5-bit
// operation (IBTA Vol 1 §9.2, Table 38 "OpCode Field"; Linux include/rdma/ib_pack.h).
type Opcode uint8

// Transport-service prefixes (the top 3 bits of the opcode).
const (
	ServiceRC  Opcode = 0x00 // Reliable Connected
	ServiceUC  Opcode = 0x20 // Unreliable Connected
	ServiceUD  Opcode = 0x60 // Unreliable Datagram
	ServiceCNP Opcode = 0x80 // congestion notification (Annex A17.9.3)
)

// Reliable Connected opcodes (IBTA Vol 1 Table 38).
const (
	RC_SEND_FIRST                     Opcode = 0x00
	RC_SEND_MIDDLE                    Opcode = 0x01
	RC_SEND_LAST                      Opcode = 0x02
	RC_SEND_LAST_WITH_IMMEDIATE       Opcode = 0x03
	RC_SEND_ONLY                      Opcode = 0x04
	RC_SEND_ONLY_WITH_IMMEDIATE       Opcode = 0x05
	RC_RDMA_WRITE_FIRST               Opcode = 0x06
	RC_RDMA_WRITE_MIDDLE              Opcode = 0x07
	RC_RDMA_WRITE_LAST                Opcode = 0x08
	RC_RDMA_WRITE_LAST_WITH_IMMEDIATE Opcode = 0x09
	RC_RDMA_WRITE_ONLY                Opcode = 0x0A
	RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE Opcode = 0x0B
	RC_RDMA_READ_REQUEST              Opcode = 0x0C
	RC_RDMA_READ_RESPONSE_FIRST       Opcode = 0x0D
	RC_RDMA_READ_RESPONSE_MIDDLE      Opcode = 0x0E
	RC_RDMA_READ_RESPONSE_LAST        Opcode = 0x0F
	RC_RDMA_READ_RESPONSE_ONLY        Opcode = 0x10
	RC_ACKNOWLEDGE                    Opcode = 0x11
	RC_ATOMIC_ACKNOWLEDGE             Opcode = 0x12
	RC_COMPARE_SWAP                   Opcode = 0x13
	RC_FETCH_ADD                      Opcode = 0x14
	RC_SEND_LAST_WITH_INVALIDATE      Opcode = 0x16
	RC_SEND_ONLY_WITH_INVALIDATE      Opcode = 0x17
	RC_FLUSH                          Opcode = 0x1C // IBTA 1.5 memory placement extensions
	RC_ATOMIC_WRITE                   Opcode = 0x1D // IBTA 1.5 memory placement extensions
)

// Unreliable Connected opcodes (IBTA Vol 1 Table 38).
const (
	UC_SEND_FIRST                     Opcode = 0x20
	UC_SEND_MIDDLE                    Opcode = 0x21
	UC_SEND_LAST                      Opcode = 0x22
	UC_SEND_LAST_WITH_IMMEDIATE       Opcode = 0x23
	UC_SEND_ONLY                      Opcode = 0x24
	UC_SEND_ONLY_WITH_IMMEDIATE       Opcode = 0x25
	UC_RDMA_WRITE_FIRST               Opcode = 0x26
	UC_RDMA_WRITE_MIDDLE              Opcode = 0x27
	UC_RDMA_WRITE_LAST                Opcode = 0x28
	UC_RDMA_WRITE_LAST_WITH_IMMEDIATE Opcode = 0x29
	UC_RDMA_WRITE_ONLY                Opcode = 0x2A
	UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE Opcode = 0x2B
)

// Unreliable Datagram opcodes (IBTA Vol 1 Table 38).
const (
	UD_SEND_ONLY                Opcode = 0x64
	UD_SEND_ONLY_WITH_IMMEDIATE Opcode = 0x65
)

// CNP is the RoCEv2 Congestion Notification Packet opcode (Annex A17.9.3): BTH with
// P_Key 0xFFFF and BECN set, then 16 reserved bytes, then the ICRC.
const CNP Opcode = 0x81

// Header is a bit set of the extension headers that follow the BTH.
type Header uint16

// Extension transport headers (IBTA Vol 1 §9.3). Within a packet they appear in the
// order of the constants below (§9.2 Figure 36 "IBA transport header formats"), FETH
// before RETH in a FLUSH (rdma_rxe rxe_opcode.c).
const (
	HdrDETH         Header = 1 << iota // Datagram ETH, 8 bytes (§9.3.3)
	HdrFETH                            // Flush ETH, 4 bytes (IBTA 1.5 memory placement extensions)
	HdrRETH                            // RDMA ETH, 16 bytes (§9.3.4)
	HdrAtomicETH                       // Atomic ETH, 28 bytes (§9.3.5)
	HdrAETH                            // ACK ETH, 4 bytes (§9.3.6)
	HdrAtomicAckETH                    // Atomic ACK ETH, 8 bytes (§9.3.7)
	HdrImmDt                           // Immediate data, 4 bytes (§9.3.8)
	HdrIETH                            // Invalidate ETH, 4 bytes (§9.3.9)
	HdrCNPReserved                     // the 16 reserved bytes of a CNP (Annex A17.9.3)
)

// Header sizes in bytes (IBTA Vol 1 §9.2–9.3).
const (
	BTHLen          = 12
	DETHLen         = 8
	FETHLen         = 4
	RETHLen         = 16
	AtomicETHLen    = 28
	AETHLen         = 4
	AtomicAckETHLen = 8
	ImmDtLen        = 4
	IETHLen         = 4
	CNPReservedLen  = 16
	ICRCLen         = 4
)

// Position is where a packet sits in its message (§9.4: FIRST, MIDDLE, LAST, ONLY).
type Position uint8

// Message positions. Single-packet operations (READ request, ACK, atomics) are ONLY.
const (
	PosFirst Position = iota + 1
	PosMiddle
	PosLast
	PosOnly
)

func (p Position) String() string {
	switch p {
	case PosFirst:
		return "FIRST"
	case PosMiddle:
		return "MIDDLE"
	case PosLast:
		return "LAST"
	case PosOnly:
		return "ONLY"
	}
	return "Position(" + strconv.Itoa(int(p)) + ")"
}

// OpClass is a bit set of what an opcode does: the operation it belongs to, which
// side sends it, and what it asks of the receiver. It plays the part of the per-opcode
// mask of rdma_rxe (drivers/infiniband/sw/rxe/rxe_opcode.c, enum rxe_hdr_mask in
// rxe_opcode.h); the message position (rxe's START/MIDDLE/END bits) is Position.
type OpClass uint16

// Opcode classes (IBTA Vol 1 §9.4 and Table 38). Every known opcode but CNP is either
// a ClassRequest or a ClassResponse.
const (
	ClassSend          OpClass = 1 << iota // SEND_* of RC, UC and UD: the data goes to a receive WQE
	ClassWrite                             // RDMA_WRITE_*: the data goes to the memory a RETH names
	ClassRead                              // RDMA_READ_REQUEST
	ClassReadResponse                      // RDMA_READ_RESPONSE_*
	ClassAtomic                            // COMPARE_SWAP and FETCH_ADD (requests; the answer is ATOMIC_ACKNOWLEDGE)
	ClassAtomicWrite                       // ATOMIC_WRITE (IBTA 1.5 memory placement extensions)
	ClassFlush                             // FLUSH (IBTA 1.5 memory placement extensions)
	ClassAck                               // ACKNOWLEDGE and ATOMIC_ACKNOWLEDGE: an AETH without data
	ClassRequest                           // sent by a requester (rxe RXE_REQ_MASK)
	ClassResponse                          // sent by a responder: read responses and ACKs (rxe RXE_ACK_MASK)
	ClassImmediate                         // carries immediate data (ImmDt)
	ClassInvalidate                        // carries an IETH: SEND with invalidate
	ClassConsumesRecv                      // the responder takes a receive WQE at this packet (rxe RXE_RWR_MASK)
	ClassCompletesRecv                     // the responder completes that receive WQE here (rxe RXE_COMP_MASK)
	ClassCNP                               // congestion notification (Annex A17.9.3)
)

var classNames = [...]string{
	"Send", "Write", "Read", "ReadResponse", "Atomic", "AtomicWrite", "Flush", "Ack",
	"Request", "Response", "Immediate", "Invalidate", "ConsumesRecv", "CompletesRecv", "CNP",
}

// String lists the classes in c joined by "|", in the order of the constants, e.g.
// "Send|Request|ConsumesRecv"; "none" when c is empty. Unknown bits show as hex.
func (c OpClass) String() string {
	s := ""
	for i, name := range classNames {
		if c&(1<<i) == 0 {
			continue
		}
		if s != "" {
			s += "|"
		}
		s += name
	}
	if rest := c &^ (1<<len(classNames) - 1); rest != 0 {
		if s != "" {
			s += "|"
		}
		s += "0x" + strconv.FormatUint(uint64(rest), 16)
	}
	if s == "" {
		return "none"
	}
	return s
}

// OpcodeInfo describes one opcode: its spec name, the extension headers that follow
// the BTH in order, whether a payload may follow them, its message position and its
// classes.
type OpcodeInfo struct {
	Name      string   // as IBTA Table 38 spells it, e.g. "RDMA_WRITE_FIRST"
	Headers   Header   // extension headers after the BTH
	HeaderLen int      // bytes of BTH plus extension headers
	Payload   bool     // whether the packet may carry a payload
	Position  Position // FIRST, MIDDLE, LAST or ONLY
	Class     OpClass  // what the opcode does; ClassImmediate and ClassInvalidate follow Headers
}

var opcodeTable [256]OpcodeInfo

// defineOp fills the table entry of op. ClassImmediate and ClassInvalidate are
// added from the headers (ImmDt, IETH), so the two can never disagree.
func defineOp(op Opcode, name string, h Header, payload bool, pos Position, c OpClass) {
	if h&HdrImmDt != 0 {
		c |= ClassImmediate
	}
	if h&HdrIETH != 0 {
		c |= ClassInvalidate
	}
	opcodeTable[op] = OpcodeInfo{
		Name: name, Headers: h, HeaderLen: BTHLen + h.Len(), Payload: payload, Position: pos,
		Class: c,
	}
}

func init() {
	const (
		send  = ClassSend | ClassRequest
		write = ClassWrite | ClassRequest
		recv  = ClassConsumesRecv | ClassCompletesRecv
		resp  = ClassReadResponse | ClassResponse
		ack   = ClassAck | ClassResponse
	)
	rc, uc := ServiceRC, ServiceUC
	for _, d := range []struct {
		svc         Opcode
		send, write [6]Opcode // FIRST, MIDDLE, LAST, LAST_WITH_IMMEDIATE, ONLY, ONLY_WITH_IMMEDIATE
	}{
		{rc, [6]Opcode{RC_SEND_FIRST, RC_SEND_MIDDLE, RC_SEND_LAST, RC_SEND_LAST_WITH_IMMEDIATE, RC_SEND_ONLY, RC_SEND_ONLY_WITH_IMMEDIATE},
			[6]Opcode{RC_RDMA_WRITE_FIRST, RC_RDMA_WRITE_MIDDLE, RC_RDMA_WRITE_LAST, RC_RDMA_WRITE_LAST_WITH_IMMEDIATE, RC_RDMA_WRITE_ONLY, RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE}},
		{uc, [6]Opcode{UC_SEND_FIRST, UC_SEND_MIDDLE, UC_SEND_LAST, UC_SEND_LAST_WITH_IMMEDIATE, UC_SEND_ONLY, UC_SEND_ONLY_WITH_IMMEDIATE},
			[6]Opcode{UC_RDMA_WRITE_FIRST, UC_RDMA_WRITE_MIDDLE, UC_RDMA_WRITE_LAST, UC_RDMA_WRITE_LAST_WITH_IMMEDIATE, UC_RDMA_WRITE_ONLY, UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE}},
	} {
		// Operations shared by RC and UC (Table 38).
		s, w := d.send, d.write
		defineOp(s[0], "SEND_FIRST", 0, true, PosFirst, send|ClassConsumesRecv)
		defineOp(s[1], "SEND_MIDDLE", 0, true, PosMiddle, send)
		defineOp(s[2], "SEND_LAST", 0, true, PosLast, send|ClassCompletesRecv)
		defineOp(s[3], "SEND_LAST_WITH_IMMEDIATE", HdrImmDt, true, PosLast, send|ClassCompletesRecv)
		defineOp(s[4], "SEND_ONLY", 0, true, PosOnly, send|recv)
		defineOp(s[5], "SEND_ONLY_WITH_IMMEDIATE", HdrImmDt, true, PosOnly, send|recv)
		defineOp(w[0], "RDMA_WRITE_FIRST", HdrRETH, true, PosFirst, write)
		defineOp(w[1], "RDMA_WRITE_MIDDLE", 0, true, PosMiddle, write)
		defineOp(w[2], "RDMA_WRITE_LAST", 0, true, PosLast, write)
		// Only a WRITE with immediate data takes (and completes) a receive WQE, at
		// the packet that carries the immediate data.
		defineOp(w[3], "RDMA_WRITE_LAST_WITH_IMMEDIATE", HdrImmDt, true, PosLast, write|recv)
		defineOp(w[4], "RDMA_WRITE_ONLY", HdrRETH, true, PosOnly, write)
		defineOp(w[5], "RDMA_WRITE_ONLY_WITH_IMMEDIATE", HdrRETH|HdrImmDt, true, PosOnly, write|recv)
	}
	defineOp(RC_RDMA_READ_REQUEST, "RDMA_READ_REQUEST", HdrRETH, false, PosOnly, ClassRead|ClassRequest)
	defineOp(RC_RDMA_READ_RESPONSE_FIRST, "RDMA_READ_RESPONSE_FIRST", HdrAETH, true, PosFirst, resp)
	defineOp(RC_RDMA_READ_RESPONSE_MIDDLE, "RDMA_READ_RESPONSE_MIDDLE", 0, true, PosMiddle, resp)
	defineOp(RC_RDMA_READ_RESPONSE_LAST, "RDMA_READ_RESPONSE_LAST", HdrAETH, true, PosLast, resp)
	defineOp(RC_RDMA_READ_RESPONSE_ONLY, "RDMA_READ_RESPONSE_ONLY", HdrAETH, true, PosOnly, resp)
	defineOp(RC_ACKNOWLEDGE, "ACKNOWLEDGE", HdrAETH, false, PosOnly, ack)
	defineOp(RC_ATOMIC_ACKNOWLEDGE, "ATOMIC_ACKNOWLEDGE", HdrAETH|HdrAtomicAckETH, false, PosOnly, ack)
	defineOp(RC_COMPARE_SWAP, "COMPARE_SWAP", HdrAtomicETH, false, PosOnly, ClassAtomic|ClassRequest)
	defineOp(RC_FETCH_ADD, "FETCH_ADD", HdrAtomicETH, false, PosOnly, ClassAtomic|ClassRequest)
	defineOp(RC_SEND_LAST_WITH_INVALIDATE, "SEND_LAST_WITH_INVALIDATE", HdrIETH, true, PosLast, send|ClassCompletesRecv)
	defineOp(RC_SEND_ONLY_WITH_INVALIDATE, "SEND_ONLY_WITH_INVALIDATE", HdrIETH, true, PosOnly, send|recv)
	defineOp(RC_FLUSH, "FLUSH", HdrFETH|HdrRETH, false, PosOnly, ClassFlush|ClassRequest)
	defineOp(RC_ATOMIC_WRITE, "ATOMIC_WRITE", HdrRETH, true, PosOnly, ClassAtomicWrite|ClassRequest) // 8 bytes of payload
	defineOp(UD_SEND_ONLY, "SEND_ONLY", HdrDETH, true, PosOnly, send|recv)
	defineOp(UD_SEND_ONLY_WITH_IMMEDIATE, "SEND_ONLY_WITH_IMMEDIATE", HdrDETH|HdrImmDt, true, PosOnly, send|recv)
	defineOp(CNP, "CNP", HdrCNPReserved, false, PosOnly, ClassCNP)
}

// Info returns the opcode's description; its Name is empty for an opcode this package
// does not know (RD, XRC, RESYNC and reserved values).
func (op Opcode) Info() OpcodeInfo { return opcodeTable[op] }

// Position returns the opcode's place in its message (FIRST, MIDDLE, LAST or ONLY);
// 0 for an unknown opcode. It reads one field of the table where Info copies the
// whole entry (a hot path's copy of the 48-byte struct stalled on store forwarding).
func (op Opcode) Position() Position { return opcodeTable[op].Position }

// Headers returns the extension headers the opcode carries after the BTH; 0 for an
// unknown opcode.
func (op Opcode) Headers() Header { return opcodeTable[op].Headers }

// Valid reports whether op is a known opcode: RC (including FLUSH and ATOMIC_WRITE of
// IBTA 1.5), UC, UD or CNP.
func (op Opcode) Valid() bool { return opcodeTable[op].Name != "" }

// Service returns the transport-service prefix (ServiceRC, ServiceUC, ServiceUD, ...).
func (op Opcode) Service() Opcode { return op & 0xE0 }

// Class returns the opcode's classes; 0 for an unknown opcode.
func (op Opcode) Class() OpClass { return opcodeTable[op].Class }

// Is reports whether op has every class in c: RC_SEND_ONLY.Is(ClassSend) and
// RC_SEND_ONLY.Is(ClassSend|ClassConsumesRecv) are true. It is false for an unknown
// opcode and for c == 0.
func (op Opcode) Is(c OpClass) bool { return c != 0 && opcodeTable[op].Class&c == c }

// String returns the spec name with its service, e.g. "RC_RDMA_WRITE_FIRST", or
// "Opcode(0xNN)" for an unknown opcode.
func (op Opcode) String() string {
	info := opcodeTable[op]
	if info.Name == "" {
		return "Opcode(0x" + strconv.FormatUint(uint64(op), 16) + ")"
	}
	switch op.Service() {
	case ServiceRC:
		return "RC_" + info.Name
	case ServiceUC:
		return "UC_" + info.Name
	case ServiceUD:
		return "UD_" + info.Name
	}
	return info.Name
}

// ParseOpcode returns the opcode whose String is name ("RC_SEND_ONLY", "CNP", ...).
// It also accepts an RC name without its prefix ("RDMA_WRITE_ONLY").
func ParseOpcode(name string) (Opcode, bool) {
	for i := range opcodeTable {
		op := Opcode(i)
		if !op.Valid() {
			continue
		}
		if op.String() == name || (op.Service() == ServiceRC && opcodeTable[i].Name == name) {
			return op, true
		}
	}
	return 0, false
}

// Len returns the total size in bytes of the headers in h.
func (h Header) Len() int {
	n := 0
	for _, e := range headerOrder {
		if h&e.h != 0 {
			n += e.n
		}
	}
	return n
}

var headerOrder = [...]struct {
	h    Header
	n    int
	name string
}{
	{HdrDETH, DETHLen, "DETH"},
	{HdrFETH, FETHLen, "FETH"},
	{HdrRETH, RETHLen, "RETH"},
	{HdrAtomicETH, AtomicETHLen, "AtomicETH"},
	{HdrAETH, AETHLen, "AETH"},
	{HdrAtomicAckETH, AtomicAckETHLen, "AtomicAckETH"},
	{HdrImmDt, ImmDtLen, "ImmDt"},
	{HdrIETH, IETHLen, "IETH"},
	{HdrCNPReserved, CNPReservedLen, "CNPReserved"},
}

func (h Header) String() string {
	s := ""
	for _, e := range headerOrder {
		if h&e.h != 0 {
			if s != "" {
				s += "|"
			}
			s += e.name
		}
	}
	if s == "" {
		return "none"
	}
	return s
}
