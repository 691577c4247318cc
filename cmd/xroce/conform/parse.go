package conform

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"path"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/xroce/xroce/roce"
)

// Servers are the perftest servers a scenario can name in setup.server.
var Servers = []string{"write_bw", "read_bw", "send_bw", "atomic_bw"}

// syndromeNames are the names an expected syndrome may take (IBTA Vol 1 Tables
// 42 and 43).
var syndromeNames = map[string]Syndrome{
	"ACK":                          {Kind: roce.KindACK},
	"RNR_NAK":                      {Kind: roce.KindRNRNAK},
	"NAK_PSN_SEQUENCE_ERROR":       {Kind: roce.KindNAK, Code: roce.NAKPSNSequenceError, Exact: true},
	"NAK_INVALID_REQUEST":          {Kind: roce.KindNAK, Code: roce.NAKInvalidRequest, Exact: true},
	"NAK_REMOTE_ACCESS_ERROR":      {Kind: roce.KindNAK, Code: roce.NAKRemoteAccessError, Exact: true},
	"NAK_REMOTE_OPERATIONAL_ERROR": {Kind: roce.KindNAK, Code: roce.NAKRemoteOperationalError, Exact: true},
}

// UnmarshalYAML reads a syndrome name.
func (s *Syndrome) UnmarshalYAML(n *yaml.Node) error {
	v, ok := syndromeNames[n.Value]
	if n.Kind != yaml.ScalarNode || !ok {
		names := make([]string, 0, len(syndromeNames))
		for k := range syndromeNames {
			names = append(names, k)
		}
		sort.Strings(names)
		return fmt.Errorf("line %d: syndrome %q: want one of %s", n.Line, n.Value, strings.Join(names, ", "))
	}
	v.Name = n.Value
	*s = v
	return nil
}

// Match reports whether a received syndrome is the expected one.
func (s Syndrome) Match(got roce.Syndrome) bool {
	return got.Kind() == s.Kind && (!s.Exact || got.Value() == s.Code)
}

// UnmarshalYAML reads an opcode name (roce.ParseOpcode).
func (o *Opcode) UnmarshalYAML(n *yaml.Node) error {
	op, ok := roce.ParseOpcode(n.Value)
	if n.Kind != yaml.ScalarNode || !ok {
		return fmt.Errorf("line %d: opcode %q: want a name from IBTA Vol 1 Table 38 as roce spells it, e.g. RC_RDMA_WRITE_ONLY, RC_SEND_FIRST, RC_RDMA_READ_REQUEST, RC_FETCH_ADD", n.Line, n.Value)
	}
	o.Opcode = op
	return nil
}

// UnmarshalYAML reads a duration ("300ms").
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if n.Kind != yaml.ScalarNode || err != nil || v < 0 {
		return fmt.Errorf("line %d: duration %q: want e.g. 300ms or 2s", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

// Bytes returns the payload's bytes.
func (p *Payload) Bytes() []byte {
	if p == nil {
		return nil
	}
	if p.Hex != "" {
		b, _ := hex.DecodeString(p.Hex) // checked by Parse
		return b
	}
	return bytes.Repeat([]byte{p.Fill}, p.Size)
}

// maxPayload bounds a payload: a jumbo frame's worth.
const maxPayload = 9000

// maxFrames bounds the frames one scenario sends (repeats counted).
const maxFrames = 4096

// Parse reads one scenario. name is its file's name (for messages and the
// scenario's name). Errors name the file and the line and say what to write.
func Parse(name string, data []byte) (*Scenario, error) {
	s, err := parse(name, data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return s, nil
}

func parse(name string, data []byte) (*Scenario, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, cleanYAMLErr(err)
	}
	if len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("line 1: a scenario is a mapping with summary, spec, setup, send (or answer) and expect")
	}
	s := &Scenario{Name: strings.TrimSuffix(path.Base(name), path.Ext(name)), File: name}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(s); err != nil {
		return nil, cleanYAMLErr(err)
	}
	if err := dec.Decode(new(yaml.Node)); err != io.EOF {
		return nil, errors.New("more than one YAML document: one scenario per file")
	}
	doc := root.Content[0]
	for i := range s.Send {
		s.Send[i].line = itemLine(doc, i, "send")
	}
	s.Expect.line = itemLine(doc, -1, "expect")
	for i := range s.Expect.Responses {
		s.Expect.Responses[i].line = itemLine(doc, i, "expect", "responses")
	}
	for i := range s.Answer {
		s.Answer[i].line = itemLine(doc, i, "answer")
	}
	for i := range s.Expect.Requests {
		s.Expect.Requests[i].line = itemLine(doc, i, "expect", "requests")
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	return s, nil
}

// cleanYAMLErr drops the library's "yaml: unmarshal errors:" prefix and the Go
// type names, so the message speaks of the file.
func cleanYAMLErr(err error) error {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: unmarshal errors:\n")
	msg = strings.TrimPrefix(msg, "yaml: ")
	msg = strings.ReplaceAll(msg, "  line", "line")
	for _, t := range []string{"conform.Scenario", "conform.Setup", "conform.Frame", "conform.RETH", "conform.Atomic", "conform.Payload", "conform.BTHEdit", "conform.Corrupt", "conform.Expect", "conform.Response", "conform.Rule", "conform.Pass", "conform.Span"} {
		msg = strings.ReplaceAll(msg, "in type "+t, "in "+strings.ToLower(strings.TrimPrefix(t, "conform."))+" (docs/conform.md lists the fields)")
	}
	return errors.New(msg)
}

// itemLine finds the line of doc[keys...][i] (i < 0: of the last key's value).
func itemLine(n *yaml.Node, i int, keys ...string) int {
	for _, k := range keys {
		var next *yaml.Node
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Kind == yaml.MappingNode && n.Content[j].Value == k {
				next = n.Content[j+1]
			}
		}
		if next == nil {
			return n.Line
		}
		n = next
	}
	if i >= 0 && n.Kind == yaml.SequenceNode && i < len(n.Content) {
		return n.Content[i].Line
	}
	return n.Line
}

func (s *Scenario) check() error {
	st := &s.Setup
	switch st.Role {
	case "":
		st.Role = RoleRequester
	case RoleRequester, RoleResponder:
	default:
		return fmt.Errorf("setup.role %q: want requester (the suite drives a perftest server) or responder (the suite serves a perftest client)", st.Role)
	}
	if st.Role == RoleRequester {
		if st.Client != "" || st.Timeout != 0 || st.Limit != 0 || len(s.Answer) > 0 || len(s.Expect.Requests) > 0 || s.Expect.Client != nil {
			return errors.New("setup.client, timeout, limit, answer, expect.requests and expect.client are the responder role's: add setup.role: responder, or remove them")
		}
		if st.Server == "" {
			return errors.New("setup.server is missing: name the peer's perftest server, one of " + strings.Join(Servers, ", "))
		}
		if !contains(Servers, st.Server) {
			return fmt.Errorf("setup.server %q: want one of %s", st.Server, strings.Join(Servers, ", "))
		}
	}
	if st.Size == 0 {
		st.Size = 65536
	}
	if st.Size < 1 || st.Size > 1<<23 {
		return fmt.Errorf("setup.size %d: want the server's -s, 1 to 8388608 bytes", st.Size)
	}
	if st.MTU == 0 {
		st.MTU = 1024
	}
	if _, err := roce.MTUFromBytes(st.MTU); err != nil {
		return fmt.Errorf("setup.mtu %d: want 256, 512, 1024, 2048 or 4096", st.MTU)
	}
	if st.Iters == 0 {
		st.Iters = 5
	}
	if st.Iters < 1 || st.Iters > 512 {
		return fmt.Errorf("setup.iters %d: want 1 to 512", st.Iters)
	}
	if st.Role == RoleResponder {
		return s.checkResponder()
	}
	if len(s.Send) == 0 {
		return errors.New("send is empty: list at least one frame")
	}
	total := 0
	for i := range s.Send {
		f := &s.Send[i]
		if f.Repeat == 0 {
			f.Repeat = 1
		}
		if f.Repeat < 1 {
			return fmt.Errorf("line %d: repeat %d: want 1 or more", f.line, f.Repeat)
		}
		total += f.Repeat
		if err := f.check(); err != nil {
			return fmt.Errorf("line %d: %w", f.line, err)
		}
	}
	if total > maxFrames {
		return fmt.Errorf("send: %d frames with repeats, at most %d", total, maxFrames)
	}
	e := &s.Expect
	if e.Usable == nil {
		return fmt.Errorf("line %d: expect.usable is missing: say whether the peer's QP must still work afterwards (true) or be in the error state (false), as the spec says", e.line)
	}
	if e.Quiet == 0 {
		e.Quiet = Duration(300 * time.Millisecond)
	}
	if time.Duration(e.Quiet) > 10*time.Second {
		return fmt.Errorf("line %d: expect.quiet %v: at most 10s", e.line, time.Duration(e.Quiet))
	}
	for i := range e.Responses {
		r := &e.Responses[i]
		if err := r.check(); err != nil {
			return fmt.Errorf("line %d: %w", r.line, err)
		}
		if r.SameAs < 0 || r.SameAs > i {
			return fmt.Errorf("line %d: same_as %d: the number (from 1) of an earlier response", r.line, r.SameAs)
		}
		if r.Orig != nil && r.Orig.Ref > 0 {
			if err := e.origRef(r.Orig, i); err != nil {
				return fmt.Errorf("line %d: orig: %w", r.line, err)
			}
		}
	}
	for i := range s.Send {
		f := &s.Send[i]
		for _, x := range f.exprs() {
			if x.Ref == 0 {
				continue
			}
			if err := e.origRef(&x, len(e.Responses)); err != nil {
				return fmt.Errorf("line %d: %w", f.line, err)
			}
		}
	}
	return nil
}

// origRef checks that x's origK names one of the first n expected responses and
// that it is an ATOMIC_ACKNOWLEDGE.
func (e *Expect) origRef(x *Expr, n int) error {
	if x.Ref > n {
		return fmt.Errorf("%s: orig%d is not one of the %d expected responses before it", x.Text, x.Ref, n)
	}
	if op := e.Responses[x.Ref-1].Opcode.Opcode; op != roce.RC_ATOMIC_ACKNOWLEDGE {
		return fmt.Errorf("%s: response %d is %v; origK names an RC_ATOMIC_ACKNOWLEDGE", x.Text, x.Ref, op)
	}
	return nil
}

func (f *Frame) check() error {
	op := f.Opcode.Opcode
	info := op.Info()
	if info.Name == "" {
		return errors.New("opcode is missing: give the BTH opcode, e.g. opcode: RC_RDMA_WRITE_ONLY")
	}
	h := info.Headers
	if h&roce.HdrRETH != 0 && f.RETH == nil {
		return fmt.Errorf("%v carries a RETH: add reth: {va: base, rkey: rkey, len: N}", op)
	}
	if h&roce.HdrRETH == 0 && f.RETH != nil {
		return fmt.Errorf("%v carries no RETH: remove reth", op)
	}
	if h&roce.HdrAtomicETH != 0 && f.Atomic == nil {
		return fmt.Errorf("%v carries an AtomicETH: add atomic: {va: base, rkey: rkey, swap_add: N}", op)
	}
	if h&roce.HdrAtomicETH == 0 && f.Atomic != nil {
		return fmt.Errorf("%v carries no AtomicETH: remove atomic", op)
	}
	if h&(roce.HdrDETH|roce.HdrFETH|roce.HdrAtomicAckETH|roce.HdrIETH) != 0 {
		return fmt.Errorf("%v: the suite sends requests (SEND, WRITE, READ request, atomics), ACKs, READ responses and CNPs; other opcodes are not supported yet", op)
	}
	if h&roce.HdrAETH != 0 && f.AETH == nil {
		return fmt.Errorf("%v carries an AETH: add aeth: {syndrome: 0x1f, msn: N}", op)
	}
	if h&roce.HdrAETH == 0 && f.AETH != nil {
		return fmt.Errorf("%v carries no AETH: remove aeth", op)
	}
	if f.AETH != nil && f.AETH.MSN > 0xFFFFFF {
		return fmt.Errorf("aeth.msn %d: 24 bits, want 0 to 16777215", f.AETH.MSN)
	}
	if f.Imm != 0 && h&roce.HdrImmDt == 0 {
		return fmt.Errorf("%v carries no ImmDt: remove imm, or use a WITH_IMMEDIATE opcode", op)
	}
	if f.Payload != nil && !info.Payload {
		return fmt.Errorf("%v carries no payload: remove payload", op)
	}
	if err := f.Payload.check(); err != nil {
		return err
	}
	for _, a := range []string{f.Corrupt.DestGID, f.Corrupt.SrcGID} {
		if a == "" {
			continue
		}
		if ip, err := netip.ParseAddr(a); err != nil || !ip.Is4() {
			return fmt.Errorf("corrupt: %q is not an IPv4 address (the suite runs RoCEv2 over IPv4)", a)
		}
	}
	if f.BTH.PadCnt != nil && *f.BTH.PadCnt > 3 {
		return fmt.Errorf("bth.pad_count %d: want 0 to 3", *f.BTH.PadCnt)
	}
	if f.BTH.TVer != nil && *f.BTH.TVer > 15 {
		return fmt.Errorf("bth.tver %d: want 0 to 15", *f.BTH.TVer)
	}
	if f.BTH.Resv6 != nil && *f.BTH.Resv6 > 0x3F {
		return fmt.Errorf("bth.resv6 %d: 6 bits, want 0 to 63", *f.BTH.Resv6)
	}
	if f.BTH.Resv7 != nil && *f.BTH.Resv7 > 0x7F {
		return fmt.Errorf("bth.resv7 %d: 7 bits, want 0 to 127", *f.BTH.Resv7)
	}
	if f.PSN < -(1<<22) || f.PSN > 1<<22 {
		return fmt.Errorf("psn %d: an offset within ±4194304 of the expected PSN", f.PSN)
	}
	return nil
}

func (p *Payload) check() error {
	if p == nil {
		return nil
	}
	if p.Hex != "" && (p.Size != 0 || p.Fill != 0) {
		return errors.New("payload: give either hex or size and fill")
	}
	if p.Hex != "" {
		b, err := hex.DecodeString(p.Hex)
		if err != nil {
			return fmt.Errorf("payload.hex: %v: want an even number of hex digits", err)
		}
		if len(b) > maxPayload {
			return fmt.Errorf("payload.hex: %d bytes, at most %d", len(b), maxPayload)
		}
	}
	if p.Size < 0 || p.Size > maxPayload {
		return fmt.Errorf("payload.size %d: want 0 to %d bytes", p.Size, maxPayload)
	}
	return nil
}

func (r *Response) check() error {
	op := r.Opcode.Opcode
	info := op.Info()
	if !responseOp(op) {
		if info.Name == "" {
			return errors.New("opcode is missing: e.g. opcode: RC_ACKNOWLEDGE")
		}
		return fmt.Errorf("a responder answers with RC_ACKNOWLEDGE, RC_ATOMIC_ACKNOWLEDGE or RC_RDMA_READ_RESPONSE_*, not %v", op)
	}
	for _, o := range r.OrOpcodes {
		oi := o.Info()
		if !responseOp(o.Opcode) || oi.Headers != info.Headers || oi.Payload != info.Payload || o.Opcode == op {
			return fmt.Errorf("or_opcodes: %v is not another opcode with %v's headers", o.Opcode, op)
		}
	}
	hasAETH := info.Headers&roce.HdrAETH != 0
	if !hasAETH && (r.Syndrome != nil || r.MSN != nil) {
		return fmt.Errorf("%v carries no AETH: remove syndrome and msn", op)
	}
	if hasAETH && r.Syndrome == nil {
		return fmt.Errorf("%v carries an AETH: add syndrome (ACK, NAK_PSN_SEQUENCE_ERROR, NAK_INVALID_REQUEST, NAK_REMOTE_ACCESS_ERROR, ...)", op)
	}
	if (r.Data != nil || r.Len != nil || r.SameAs != 0) && !info.Payload {
		return fmt.Errorf("%v carries no data: remove data, len and same_as", op)
	}
	if r.Data != nil && r.Len != nil {
		return errors.New("give data or len, not both")
	}
	if r.Orig != nil && op != roce.RC_ATOMIC_ACKNOWLEDGE {
		return fmt.Errorf("orig is the AtomicAckETH of RC_ATOMIC_ACKNOWLEDGE, not of %v", op)
	}
	return r.Data.check()
}

// responseOp reports whether a responder answers with op.
func responseOp(op roce.Opcode) bool {
	switch op {
	case roce.RC_ACKNOWLEDGE, roce.RC_ATOMIC_ACKNOWLEDGE, roce.RC_RDMA_READ_RESPONSE_FIRST,
		roce.RC_RDMA_READ_RESPONSE_MIDDLE, roce.RC_RDMA_READ_RESPONSE_LAST, roce.RC_RDMA_READ_RESPONSE_ONLY:
		return true
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Load reads every *.yaml scenario in fsys's root, sorted by name. Names must be
// unique.
func Load(fsys fs.FS, dir string) ([]*Scenario, error) {
	ents, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []*Scenario
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		p := path.Join(dir, e.Name())
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, err
		}
		s, err := Parse(p, data)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
