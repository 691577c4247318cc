package conform

import (
	"time"

	"github.com/xroce/xroce/roce"
)

// Scenario is one conformance case: a fresh connection to a perftest server, the
// frames sent at its QP, and what the spec says must come back. The YAML format is
// documented in docs/conform.md.
type Scenario struct {
	Name    string  `yaml:"-"` // the file's name without .yaml
	File    string  `yaml:"-"` // where it was read from, for messages
	Summary string  `yaml:"summary"`
	Spec    string  `yaml:"spec"` // the spec section (and kernel source) the expectation follows
	Setup   Setup   `yaml:"setup"`
	Send    []Frame `yaml:"send"`
	// Answer is the responder role's rules: how the suite answers each request
	// packet of the peer's client (responder.go).
	Answer []Rule `yaml:"answer"`
	Expect Expect `yaml:"expect"`
}

// Responder reports whether the scenario plays the responder (the server of a
// perftest client) rather than the requester.
func (s *Scenario) Responder() bool { return s.Setup.Role == RoleResponder }

// PeerTool names the perftest tool the scenario talks to: the server (requester
// role) or the client (responder role).
func (s *Scenario) PeerTool() string {
	if s.Responder() {
		return s.Setup.Client
	}
	return s.Setup.Server
}

// The roles a scenario plays (setup.role).
const (
	RoleRequester = "requester"
	RoleResponder = "responder"
)

// Setup says which peer server the scenario talks to and how.
type Setup struct {
	// Role is requester (the default: the suite drives a perftest server's
	// responder) or responder (the suite is the server of a perftest client and
	// answers its requester as the scenario's answer rules say).
	Role string `yaml:"role"`
	// Client is the responder role's perftest client: write_bw, read_bw,
	// send_bw or atomic_bw (ib_write_bw ... SERVER on rdma_rxe or an HCA, or
	// xroce write_bw ... SERVER).
	Client string `yaml:"client"`
	// Timeout is the client's -u, its QP's local ACK timeout as a verbs code:
	// 4.096 µs × 2^Timeout (IBTA Vol 1 §11.2.4.2); 1 to 31, default 14 (67 ms,
	// perftest's DEF_QP_TIME). Responder role only.
	Timeout int `yaml:"timeout"`
	// Limit bounds the client's run in the responder role: past it the suite
	// ends the client (its outcome: "running"); default 10s, at most 60s.
	Limit Duration `yaml:"limit"`
	// Server is the perftest server the peer runs: write_bw, read_bw, send_bw or
	// atomic_bw (ib_write_bw ... on rdma_rxe or an HCA).
	Server string `yaml:"server"`
	// Size is the server's -s in bytes (default 65536). With B = max(Size, 4096)
	// (perftest's BUFF_SIZE with a page as cycle buffer), an xroce server
	// registers 2*B bytes from the address it advertises, a perftest server 2*B
	// from B bytes before it (perftest v4.5-0.17 perftest_communication.c set_up_connection: vaddr =
	// buf + (num_of_qps + i) * BUFF_SIZE). "end" in an address expression is the
	// advertised address plus 2*B, outside both; base-B-1 and below is too.
	Size int `yaml:"size"`
	// MTU is the path MTU in bytes this side offers in the exchange: 256 to 4096
	// (default 1024); the connection runs at the smaller of both sides'.
	MTU int `yaml:"mtu"`
	// Iters is a send_bw server's -n: the SENDs it waits for (default 5). The
	// suite sends what the scenario left over, so that the server ends.
	Iters int `yaml:"iters"`
}

// Frame is one packet to send at the peer's QP.
type Frame struct {
	// Opcode is the BTH opcode by the name roce spells (IBTA Vol 1 Table 38), e.g.
	// RC_RDMA_WRITE_ONLY.
	Opcode Opcode `yaml:"opcode"`
	// PSN is the packet's PSN as an offset from the PSN the peer's responder
	// expects first (0 is the first packet of the connection; -1 a duplicate of
	// nothing yet, i.e. the PSN before it).
	PSN int `yaml:"psn"`
	// AckReq sets the BTH AckReq bit; default: set on the last packet of a
	// message (LAST, ONLY, READ request, atomics).
	AckReq *bool   `yaml:"ackreq"`
	RETH   *RETH   `yaml:"reth"`
	Atomic *Atomic `yaml:"atomic"`
	// AETH is the ACK extended transport header of a response opcode sent at the
	// peer's responder (a ghost ACK): its syndrome byte (0x1f: ACK) and MSN.
	AETH *FrameAETH `yaml:"aeth"`
	// Imm is the ImmDt of a WITH_IMMEDIATE opcode.
	Imm     uint32   `yaml:"imm"`
	Payload *Payload `yaml:"payload"`
	BTH     BTHEdit  `yaml:"bth"`
	Corrupt Corrupt  `yaml:"corrupt"`
	// Delay is waited before the frame is sent (e.g. 5ms).
	Delay Duration `yaml:"delay"`
	// Repeat sends the frame this many times back to back (default 1).
	Repeat int `yaml:"repeat"`

	line int
	// orig is the AtomicAckETH of an RC_ATOMIC_ACKNOWLEDGE, and payload the
	// data of a READ response, that the responder role sends (never from a
	// file; payload replaces Payload).
	orig    uint64
	payload []byte
}

// RETH gives the RDMA extended transport header of a frame (IBTA Vol 1 §9.3.4).
type RETH struct {
	VA   Expr   `yaml:"va"`   // e.g. base, base+4096, end-8
	RKey Expr   `yaml:"rkey"` // e.g. rkey, rkey^0x80
	Len  uint32 `yaml:"len"`  // DMA length in bytes
}

// Atomic gives the AtomicETH of COMPARE_SWAP and FETCH_ADD (IBTA Vol 1 §9.3.5).
// SwapAdd and Compare may name what an earlier atomic found (orig1+7): the frame
// is then built once that answer has come.
type Atomic struct {
	VA      Expr `yaml:"va"`
	RKey    Expr `yaml:"rkey"`
	SwapAdd Expr `yaml:"swap_add"`
	Compare Expr `yaml:"compare"`
}

// FrameAETH is the AETH of a sent frame (IBTA Vol 1 §9.3.6): the syndrome as a
// byte (Tables 42 and 43) and the MSN.
type FrameAETH struct {
	Syndrome uint8  `yaml:"syndrome"`
	MSN      uint32 `yaml:"msn"`
}

// Payload is a frame's data: Size bytes of Fill, or the bytes Hex spells.
type Payload struct {
	Size int    `yaml:"size"`
	Fill uint8  `yaml:"fill"`
	Hex  string `yaml:"hex"`
}

// BTHEdit overrides BTH fields the encoder would otherwise set (IBTA Vol 1 §9.2):
// nil keeps the default.
type BTHEdit struct {
	SE     *bool `yaml:"se"`
	MigReq *bool `yaml:"migreq"`
	// PadCnt replaces the pad count Encode derives from the payload length; the
	// payload bytes stay, so the receiver counts fewer (or more) of them as data.
	PadCnt *uint8  `yaml:"pad_count"`
	TVer   *uint8  `yaml:"tver"`
	PKey   *uint16 `yaml:"pkey"`
	FECN   *bool   `yaml:"fecn"`
	BECN   *bool   `yaml:"becn"`
	Resv6  *uint8  `yaml:"resv6"` // the 6 reserved bits of byte 4
	Resv7  *uint8  `yaml:"resv7"` // the 7 reserved bits of byte 8
	DestQP *Expr   `yaml:"dest_qp"`
}

// Corrupt damages a frame after it is encoded.
type Corrupt struct {
	ICRC    bool   `yaml:"icrc"`     // flip the ICRC's bits
	DestGID string `yaml:"dest_gid"` // send to this IP address instead of the peer's (its MAC kept)
	SrcGID  string `yaml:"src_gid"`  // claim this IP address as the source
}

// Expect is what the peer must answer.
type Expect struct {
	// Responses are the packets the peer must send to this side's QP after the
	// frames, in order, and nothing else.
	Responses []Response `yaml:"responses"`
	// Quiet is how long nothing more may arrive after the last expected
	// response (or after the last frame when none is expected); default 300ms.
	Quiet Duration `yaml:"quiet"`
	// Usable says whether the peer's QP must still work afterwards: a probe (a
	// WRITE, READ, atomic or SEND as the server's test allows) must be answered
	// (true) or, after the QP went to the error state, dropped in silence (false).
	Usable *bool `yaml:"usable"`
	// ProbePSN is the probe's PSN offset; default: the PSN after the last one the
	// peer acknowledged or answered.
	ProbePSN *int `yaml:"probe_psn"`
	// Requests is the responder role's expectation of what the client sends:
	// its request packets as passes (runs of rising PSNs; a packet at or below
	// the previous PSN starts the next pass: a retransmission), in order, and
	// nothing else.
	Requests []Pass `yaml:"requests"`
	// Client is the responder role's expected end of the client: success, or
	// the work completion status it fails with (Outcomes).
	Client *Outcome `yaml:"client"`

	line int
}

// Response is one expected packet.
type Response struct {
	Opcode Opcode `yaml:"opcode"`
	// OrOpcodes are other opcodes the spec equally allows in this place, each
	// with the same headers as Opcode and the same other fields (e.g. a READ
	// restarted within its response: RC_RDMA_READ_RESPONSE_ONLY or the
	// original's RC_RDMA_READ_RESPONSE_LAST).
	OrOpcodes []Opcode  `yaml:"or_opcodes"`
	PSN       int       `yaml:"psn"` // offset from the first expected PSN
	Syndrome  *Syndrome `yaml:"syndrome"`
	MSN       *uint32   `yaml:"msn"`
	// Data is a READ response's payload; Len only its length in bytes; SameAs
	// the number (from 1) of an earlier response whose payload this one repeats
	// (a duplicate READ answered again).
	Data   *Payload `yaml:"data"`
	Len    *int     `yaml:"len"`
	SameAs int      `yaml:"same_as"`
	// Orig is an ATOMIC_ACKNOWLEDGE's original remote data (AtomicAckETH): a
	// number, or relative to an earlier response's (orig1+5), since a perftest
	// server's buffer holds whatever its allocation held.
	Orig *Expr `yaml:"orig"`

	line int
}

// allows reports whether op is the expected opcode or one of its alternatives.
func (r *Response) allows(op roce.Opcode) bool { return opcodeIn(op, r.Opcode, r.OrOpcodes) }

// opcodeIn reports whether op is first or one of or.
func opcodeIn(op roce.Opcode, first Opcode, or []Opcode) bool {
	if op == first.Opcode {
		return true
	}
	for _, o := range or {
		if op == o.Opcode {
			return true
		}
	}
	return false
}

// opcodeNames renders the expected opcode and its alternatives, e.g.
// "RDMA_READ_RESPONSE_ONLY|RDMA_READ_RESPONSE_LAST" (full names with full).
func (r *Response) opcodeNames(full bool) string {
	name := func(op roce.Opcode) string {
		if full {
			return op.String()
		}
		return shortOp(op)
	}
	out := name(r.Opcode.Opcode)
	for _, o := range r.OrOpcodes {
		out += "|" + name(o.Opcode)
	}
	return out
}

// Duration is a time.Duration written as Go spells it ("300ms", "2s").
type Duration time.Duration

// Opcode is a BTH opcode named as roce spells it.
type Opcode struct{ roce.Opcode }

// Syndrome is an expected AETH syndrome: ACK (any credit count), RNR_NAK (any
// timer), or one NAK code.
type Syndrome struct {
	Name  string
	Kind  roce.SyndromeKind
	Code  uint8 // NAK code (Table 43) when Kind is KindNAK
	Exact bool  // Code must match
}

// refs is the highest response number (from 1) whose original remote data the
// frame's expressions use (origK), 0 if none: the frame waits for that answer.
func (f *Frame) refs() int {
	n := 0
	for _, e := range f.exprs() {
		n = max(n, e.Ref)
	}
	return n
}

// exprs are the frame's expressions.
func (f *Frame) exprs() []Expr {
	var out []Expr
	if f.RETH != nil {
		out = append(out, f.RETH.VA, f.RETH.RKey)
	}
	if f.Atomic != nil {
		out = append(out, f.Atomic.VA, f.Atomic.RKey, f.Atomic.SwapAdd, f.Atomic.Compare)
	}
	if f.BTH.DestQP != nil {
		out = append(out, *f.BTH.DestQP)
	}
	return out
}

// NeedsRawLink reports whether a frame of s can only be sent on a link that puts
// frames on the wire as built (AF_XDP): a bad ICRC, another destination or source
// IP, or a BTH version other than 0. The kernel UDP link rebuilds the IP header,
// recomputes the ICRC and routes by the destination address.
func (s *Scenario) NeedsRawLink() bool {
	for i := range s.Send {
		f := &s.Send[i]
		if f.Corrupt.ICRC || f.Corrupt.DestGID != "" || f.Corrupt.SrcGID != "" || f.BTH.TVer != nil && *f.BTH.TVer != 0 {
			return true
		}
	}
	return false
}
