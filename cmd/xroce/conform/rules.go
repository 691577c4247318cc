package conform

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/xroce/xroce/roce"
)

// The responder role's scenario parts: the answer rules, the expected passes of
// the client's requests, and its expected end (docs/conform.md, "The responder
// role").

// Rule says how the suite answers the client's request packets: those whose
// number (from 1, in arrival order, retransmissions counted) is in Packets and
// whose pass (from 1: a packet below the PSN after the previous request starts
// the next pass, a retransmission; see observedPass) is in Passes. The first
// rule that matches a packet decides; a packet no rule matches is answered
// normally.
type Rule struct {
	Packets Range `yaml:"packets"` // e.g. 1, 2-5, 3- (default: every packet)
	Passes  Range `yaml:"passes"`  // e.g. 1, 1-10 (default: every pass)
	Reply   Reply `yaml:"reply"`
	// PSN is the PSN offset (from the client's first PSN) the answer names:
	// the expected PSN of a NAK (default: the packet's own) or a ghost ACK's
	// PSN (required).
	PSN *int `yaml:"psn"`
	// MSN is a ghost ACK's MSN (default: the suite's MSN + 1).
	MSN *uint32 `yaml:"msn"`
	// Timer is an RNR NAK's timer code (IBTA Vol 1 Table 45: 1 is 0.01 ms, 0 is
	// 655.36 ms; default 1).
	Timer *uint8 `yaml:"timer"`
	// Respond are the response packets (from 0) of a READ that read_partial
	// sends; the others are "lost".
	Respond []int `yaml:"respond"`

	line int
}

// Reply is what a Rule does with a request packet.
type Reply struct {
	Name string
	Kind replyKind
	NAK  uint8 // the NAK code of replyNAK (Table 43)
}

type replyKind int

const (
	// replyNormal answers as a correct responder does (IBTA Vol 1 §9.7.5):
	// executes a request in sequence and ACKs it (when AckReq is set), answers
	// a READ with the data of the suite's buffer and an atomic with its
	// original value; ACKs a duplicate with the latest PSN, answers a
	// duplicate READ again and a duplicate atomic from the saved result; NAKs
	// the first packet beyond a gap with PSN sequence error and drops the rest
	// until the expected PSN comes.
	replyNormal replyKind = iota
	// replySilence drops the packet: it never arrived.
	replySilence
	// replyNAK sends a NAK (PSN sequence error, or another code) naming
	// Rule.PSN, without executing the packet; after a sequence error the suite
	// expects that PSN next.
	replyNAK
	// replyRNR sends an RNR NAK for the packet (Rule.Timer), without executing
	// it, when it is the packet expected; another is answered as normal does
	// (beyond the RNR-NAKed one: dropped).
	replyRNR
	// replyGhost drops the packet and sends an ACK for Rule.PSN, a PSN the
	// client never sent (a ghost ACK): a requester must ignore it.
	replyGhost
	// replyDuplicate answers normally, then sends the ACK before it again (a
	// stale ACK) and this one again (a duplicate).
	replyDuplicate
	// replyReadPartial executes a READ but sends only the response packets in
	// Rule.Respond: a gap draws an implied NAK, a missing tail a timeout.
	replyReadPartial
	// replyAckLost executes the packet as normal does but sends nothing: its
	// answer was lost, so the client's retransmission is a duplicate.
	replyAckLost
)

// replies are the names a rule's reply may take.
var replies = map[string]Reply{
	"normal":                       {Kind: replyNormal},
	"silence":                      {Kind: replySilence},
	"nak_psn_sequence_error":       {Kind: replyNAK, NAK: roce.NAKPSNSequenceError},
	"nak_invalid_request":          {Kind: replyNAK, NAK: roce.NAKInvalidRequest},
	"nak_remote_access_error":      {Kind: replyNAK, NAK: roce.NAKRemoteAccessError},
	"nak_remote_operational_error": {Kind: replyNAK, NAK: roce.NAKRemoteOperationalError},
	"rnr_nak":                      {Kind: replyRNR},
	"ghost_ack":                    {Kind: replyGhost},
	"duplicate_ack":                {Kind: replyDuplicate},
	"read_partial":                 {Kind: replyReadPartial},
	"ack_lost":                     {Kind: replyAckLost},
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// UnmarshalYAML reads a reply name.
func (r *Reply) UnmarshalYAML(n *yaml.Node) error {
	v, ok := replies[n.Value]
	if n.Kind != yaml.ScalarNode || !ok {
		return fmt.Errorf("line %d: reply %q: want one of %s", n.Line, n.Value, strings.Join(sortedKeys(replies), ", "))
	}
	v.Name = n.Value
	*r = v
	return nil
}

// Range is a closed range of counts, written N, N-M or N- (no upper bound).
// The zero Range (not given) is Set false.
type Range struct {
	Min, Max int // Max < 0: no upper bound
	Set      bool
	Text     string
}

// Has reports whether n is in the range (an unset range holds everything).
func (r Range) Has(n int) bool {
	return !r.Set || n >= r.Min && (r.Max < 0 || n <= r.Max)
}

// String is the range as written.
func (r Range) String() string { return r.Text }

// UnmarshalYAML reads N, N-M or N-, from 1.
func (r *Range) UnmarshalYAML(n *yaml.Node) error { return r.parse(n, 1) }

// Count is a pass's count: a Range that may start at 0 (0-1: an optional pass).
type Count Range

// UnmarshalYAML reads N, N-M or N-, from 0.
func (c *Count) UnmarshalYAML(n *yaml.Node) error { return (*Range)(c).parse(n, 0) }

// parse reads N, N-M or N-, N from lowest on.
func (r *Range) parse(n *yaml.Node, lowest int) error {
	bad := fmt.Errorf("line %d: %q: want N, N-M or N- (N onwards), counted from %d", n.Line, n.Value, lowest)
	if n.Kind != yaml.ScalarNode {
		return bad
	}
	lo, hi, dash := strings.Cut(strings.TrimSpace(n.Value), "-")
	a, err := strconv.Atoi(lo)
	if err != nil || a < lowest || a > 1<<20 || a == 0 && !dash {
		return bad
	}
	b := a
	switch {
	case dash && hi == "":
		b = -1
	case dash:
		if b, err = strconv.Atoi(hi); err != nil || b < a || b > 1<<20 {
			return bad
		}
	}
	*r = Range{Min: a, Max: b, Set: true, Text: n.Value}
	return nil
}

// Pass is one expected pass of the client's requests: a run of packets with
// rising PSNs, whose first packet has Opcode (or one of OrOpcodes) at PSN
// offset PSN. Count passes alike in a row (default 1).
type Pass struct {
	Opcode    Opcode   `yaml:"opcode"`
	OrOpcodes []Opcode `yaml:"or_opcodes"`
	PSN       int      `yaml:"psn"` // the first packet's offset from the client's first PSN
	// PSNMax, when set, lets the first packet's offset be anything from PSN to
	// PSNMax: a resend of what is still unacknowledged, which depends on how many
	// answers arrived first.
	PSNMax *int `yaml:"psn_max"`
	// To is the last packet's PSN offset (default: any).
	To *int `yaml:"to"`
	// Count is how many such passes come in a row: N, N-M or N- (default 1;
	// 0-1: an optional pass).
	Count Count `yaml:"count"`
	// Gap bounds the time from the previous pass's last packet to this pass's
	// first (each of the Count passes): the client's retransmission delay.
	Gap *Span `yaml:"gap"`

	line int
}

// Span bounds a duration: Min and Max (0: no bound).
type Span struct {
	Min Duration `yaml:"min"`
	Max Duration `yaml:"max"`
}

// Has reports whether d is within the span.
func (s *Span) Has(d time.Duration) bool {
	return s == nil || d >= time.Duration(s.Min) && (s.Max == 0 || d <= time.Duration(s.Max))
}

// String renders the span, e.g. "gap 10ms-1s".
func (s *Span) String() string {
	if s.Max == 0 {
		return fmt.Sprintf("gap ≥%v", time.Duration(s.Min))
	}
	if s.Min == 0 {
		return fmt.Sprintf("gap ≤%v", time.Duration(s.Max))
	}
	return fmt.Sprintf("gap %v-%v", time.Duration(s.Min), time.Duration(s.Max))
}

// allows reports whether op is the pass's opcode or one of its alternatives.
func (p *Pass) allows(op roce.Opcode) bool { return opcodeIn(op, p.Opcode, p.OrOpcodes) }

// Outcome is how the client ends: "success" (exit status 0), the work
// completion status it fails with (Outcomes), or "running" (still running at
// setup.limit, when the suite ends it).
type Outcome struct{ Name string }

// Outcomes are the client ends a scenario may expect, with the ibv_wc_status
// numbers perftest prints ("Failed status 12").
var Outcomes = map[string]int{
	"success":           0,
	"RETRY_EXC_ERR":     12,
	"RNR_RETRY_EXC_ERR": 13,
	"REM_ACCESS_ERR":    10,
	"REM_INV_REQ_ERR":   9,
	"REM_OP_ERR":        11,
	"running":           -1,
}

// UnmarshalYAML reads an outcome name.
func (o *Outcome) UnmarshalYAML(n *yaml.Node) error {
	if _, ok := Outcomes[n.Value]; n.Kind != yaml.ScalarNode || !ok {
		return fmt.Errorf("line %d: client %q: want one of %s", n.Line, n.Value, strings.Join(sortedKeys(Outcomes), ", "))
	}
	o.Name = n.Value
	return nil
}

// requestOp reports whether op is an RC request a requester sends.
func requestOp(op roce.Opcode) bool {
	return op.Service() == roce.ServiceRC && op.Is(roce.ClassRequest)
}

// checkResponder checks a responder-role scenario (Scenario.check did the
// setup fields both roles share).
func (s *Scenario) checkResponder() error {
	st := &s.Setup
	if st.Client == "" {
		return errors.New("setup.client is missing: name the peer's perftest client, one of " + strings.Join(Servers, ", "))
	}
	if !contains(Servers, st.Client) {
		return fmt.Errorf("setup.client %q: want one of %s", st.Client, strings.Join(Servers, ", "))
	}
	if st.Server != "" {
		return errors.New("setup.server is the requester role's: a responder-role scenario names its peer's client (setup.client)")
	}
	if st.Timeout == 0 {
		st.Timeout = 14
	}
	if st.Timeout < 1 || st.Timeout > 31 {
		return fmt.Errorf("setup.timeout %d: the client's -u, 1 to 31 (4.096 µs × 2^u)", st.Timeout)
	}
	if st.Limit == 0 {
		st.Limit = Duration(10 * time.Second)
	}
	if time.Duration(st.Limit) > time.Minute {
		return fmt.Errorf("setup.limit %v: at most 60s", time.Duration(st.Limit))
	}
	if len(s.Send) > 0 {
		return errors.New("send is the requester role's: a responder-role scenario says how to answer (answer:)")
	}
	e := &s.Expect
	if len(e.Responses) > 0 || e.Usable != nil || e.ProbePSN != nil {
		return fmt.Errorf("line %d: expect.responses, usable and probe_psn are the requester role's: expect requests and client", e.line)
	}
	if e.Client == nil {
		return fmt.Errorf("line %d: expect.client is missing: say how the client ends (%s)", e.line, strings.Join(sortedKeys(Outcomes), ", "))
	}
	if len(e.Requests) == 0 {
		return fmt.Errorf("line %d: expect.requests is empty: list the passes of the client's requests", e.line)
	}
	for i := range s.Answer {
		r := &s.Answer[i]
		if err := r.check(); err != nil {
			return fmt.Errorf("line %d: %w", r.line, err)
		}
	}
	for i := range e.Requests {
		p := &e.Requests[i]
		if err := p.check(); err != nil {
			return fmt.Errorf("line %d: %w", p.line, err)
		}
	}
	return nil
}

func (r *Rule) check() error {
	if r.Reply.Name == "" {
		return fmt.Errorf("reply is missing: one of %s", strings.Join(sortedKeys(replies), ", "))
	}
	k := r.Reply.Kind
	if r.PSN != nil && k != replyNAK && k != replyGhost {
		return fmt.Errorf("psn is the PSN a NAK or ghost ACK names, not for %s", r.Reply.Name)
	}
	if r.PSN != nil && (*r.PSN < -(1<<22) || *r.PSN > 1<<22) {
		return fmt.Errorf("psn %d: an offset within ±4194304 of the client's first PSN", *r.PSN)
	}
	if k == replyGhost && r.PSN == nil {
		return errors.New("ghost_ack needs psn: the PSN offset of a packet the client never sent, e.g. psn: 1000")
	}
	if r.MSN != nil && (k != replyGhost || *r.MSN > 0xFFFFFF) {
		return errors.New("msn is a ghost ACK's (0 to 16777215)")
	}
	if r.Timer != nil && (k != replyRNR || *r.Timer > 31) {
		return errors.New("timer is an RNR NAK's timer code, 0 to 31")
	}
	if len(r.Respond) > 0 && k != replyReadPartial {
		return errors.New("respond lists the READ response packets read_partial sends")
	}
	if k == replyReadPartial && len(r.Respond) == 0 {
		return errors.New("read_partial needs respond: the READ response packets to send, from 0, e.g. respond: [0, 2]")
	}
	for i, x := range r.Respond {
		if x < 0 || x > 1<<15 || i > 0 && x <= r.Respond[i-1] {
			return fmt.Errorf("respond %v: rising packet numbers from 0", r.Respond)
		}
	}
	return nil
}

func (p *Pass) check() error {
	op := p.Opcode.Opcode
	if !requestOp(op) {
		return fmt.Errorf("opcode %v: a pass starts with a request the client sends (RC_SEND_*, RC_RDMA_WRITE_*, RC_RDMA_READ_REQUEST, RC_FETCH_ADD, RC_COMPARE_SWAP)", op)
	}
	for _, o := range p.OrOpcodes {
		if !requestOp(o.Opcode) || o.Opcode == op {
			return fmt.Errorf("or_opcodes: %v is not another request opcode", o.Opcode)
		}
	}
	if p.PSN < -(1<<22) || p.PSN > 1<<22 || p.To != nil && (*p.To < p.PSN || *p.To > 1<<22) {
		return errors.New("psn and to: offsets from the client's first PSN, to ≥ psn")
	}
	if p.PSNMax != nil && (*p.PSNMax <= p.PSN || *p.PSNMax > 1<<22 || p.To != nil && *p.To < *p.PSNMax) {
		return errors.New("psn_max: above psn, and at most to")
	}
	if !p.Count.Set {
		p.Count = Count{Min: 1, Max: 1, Set: true, Text: "1"}
	}
	if p.Gap != nil && p.Gap.Max != 0 && p.Gap.Max < p.Gap.Min {
		return errors.New("gap: max below min")
	}
	return nil
}
