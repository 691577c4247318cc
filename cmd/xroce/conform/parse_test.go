package conform

import (
	"strings"
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
)

// TestBuiltin: every embedded scenario parses, names a server, and there are at
// least 40 of them; names are the file names.
func TestBuiltin(t *testing.T) {
	all, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 40 {
		t.Fatalf("%d built-in scenarios, want at least 40", len(all))
	}
	seen := map[string]bool{}
	var raw []string
	for _, s := range all {
		if s.NeedsRawLink() {
			raw = append(raw, s.Name)
		}
		if seen[s.Name] || s.File != "scenarios/"+s.Name+".yaml" {
			t.Errorf("scenario %q from %s: duplicate or misnamed", s.Name, s.File)
		}
		seen[s.Name] = true
		if s.Summary == "" || s.Spec == "" {
			t.Errorf("%s: summary and spec are required of a built-in scenario", s.Name)
		}
	}
	if strings.Join(raw, ",") != "bad-icrc,spoofed-src-gid,tver-nonzero,wrong-dest-gid" {
		t.Errorf("scenarios that need a raw link: %v", raw)
	}
}

const goodScenario = `summary: s
spec: IBTA
setup: {server: read_bw, size: 100, mtu: 2048}
send:
  - opcode: RC_RDMA_READ_REQUEST
    psn: -2
    reth: {va: end-8, rkey: rkey^0x10, len: 8}
    bth: {migreq: true, pad_count: 2, dest_qp: qpn+1}
    delay: 5ms
    repeat: 3
expect:
  responses:
    - {opcode: RC_RDMA_READ_RESPONSE_ONLY, psn: -2, syndrome: NAK_PSN_SEQUENCE_ERROR, msn: 7, len: 8}
  quiet: 50ms
  usable: false
  probe_psn: 4
`

// TestParse: the fields land where the format says, with the defaults filled in.
func TestParse(t *testing.T) {
	s, err := Parse("dir/x.yaml", []byte(goodScenario))
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "x" || s.Setup != (Setup{Role: RoleRequester, Server: "read_bw", Size: 100, MTU: 2048, Iters: 5}) {
		t.Fatalf("name %q setup %+v", s.Name, s.Setup)
	}
	f := s.Send[0]
	if f.Opcode.Opcode != roce.RC_RDMA_READ_REQUEST || f.PSN != -2 || f.Repeat != 3 || time.Duration(f.Delay) != 5*time.Millisecond || f.line != 5 {
		t.Fatalf("frame %+v", f)
	}
	p := Peer{QPN: 0x11, RKey: 0x101, Base: 0x1000, RegionLen: 8192}
	if va, rk := f.RETH.VA.Eval(p), f.RETH.RKey.Eval(p); va != 0x1000+8192-8 || rk != 0x111 || f.RETH.Len != 8 {
		t.Fatalf("RETH va %#x rkey %#x len %d", va, rk, f.RETH.Len)
	}
	if *f.BTH.PadCnt != 2 || !*f.BTH.MigReq || f.BTH.DestQP.Eval(p) != 0x12 {
		t.Fatalf("bth %+v", f.BTH)
	}
	e := s.Expect
	r := e.Responses[0]
	if *e.Usable || *e.ProbePSN != 4 || time.Duration(e.Quiet) != 50*time.Millisecond || r.line != 13 {
		t.Fatalf("expect %+v", e)
	}
	if r.Opcode.Opcode != roce.RC_RDMA_READ_RESPONSE_ONLY || r.PSN != -2 || *r.MSN != 7 || *r.Len != 8 ||
		!r.Syndrome.Match(roce.SyndromeNAKPSNSequenceError) || r.Syndrome.Match(roce.SyndromeNAKInvalidRequest) {
		t.Fatalf("response %+v", r)
	}
}

// TestParseErrors: a broken file gets an error naming the file, the line and
// the fix; never a panic.
func TestParseErrors(t *testing.T) {
	for _, c := range []struct{ name, edit, want string }{
		{"unknown field", "    repeat: 3\n|    repaet: 3\n", "x.yaml: line 10: field repaet not found in frame (docs/conform.md lists the fields)"},
		{"opcode", "RC_RDMA_READ_REQUEST\n|RC_READ\n", `x.yaml: line 5: opcode "RC_READ": want a name from IBTA Vol 1 Table 38`},
		{"server", "read_bw,|ib_read,", `x.yaml: setup.server "ib_read": want one of write_bw, read_bw, send_bw, atomic_bw`},
		{"expression", "rkey^0x10|rkey*2", `x.yaml: line 7: "rkey*2": after rkey comes +N, -N or ^N`},
		{"number", "end-8|end-eight", `x.yaml: line 7: "end-eight" is not a number`},
		{"missing reth", "    reth: {va: end-8, rkey: rkey^0x10, len: 8}\n|", "x.yaml: line 5: RC_RDMA_READ_REQUEST carries a RETH: add reth: {va: base, rkey: rkey, len: N}"},
		{"payload on read", "    delay: 5ms|    payload: {size: 3}\n    delay: 5ms", "x.yaml: line 5: RC_RDMA_READ_REQUEST carries no payload: remove payload"},
		{"syndrome", "NAK_PSN_SEQUENCE_ERROR|NAK_SEQ", `x.yaml: line 13: syndrome "NAK_SEQ": want one of ACK,`},
		{"usable", "  usable: false\n|", "x.yaml: line 12: expect.usable is missing"},
		{"duration", "50ms|fast", `x.yaml: line 14: duration "fast": want e.g. 300ms or 2s`},
		{"imm", "    delay: 5ms|    imm: 7\n    delay: 5ms", "x.yaml: line 5: RC_RDMA_READ_REQUEST carries no ImmDt: remove imm, or use a WITH_IMMEDIATE opcode"},
		{"pad count", "pad_count: 2|pad_count: 4", "x.yaml: line 5: bth.pad_count 4: want 0 to 3"},
		{"mtu", "mtu: 2048|mtu: 1500", "x.yaml: setup.mtu 1500: want 256, 512, 1024, 2048 or 4096"},
		{"response opcode", "RC_RDMA_READ_RESPONSE_ONLY|RC_SEND_ONLY", "x.yaml: line 13: a responder answers with RC_ACKNOWLEDGE, RC_ATOMIC_ACKNOWLEDGE or RC_RDMA_READ_RESPONSE_*, not RC_SEND_ONLY"},
		{"same_as", "msn: 7, len: 8}|msn: 7, same_as: 1}", "x.yaml: line 13: same_as 1: the number (from 1) of an earlier response"},
		{"or_opcodes headers", "RC_RDMA_READ_RESPONSE_ONLY,|RC_RDMA_READ_RESPONSE_ONLY, or_opcodes: [RC_RDMA_READ_RESPONSE_MIDDLE],", "x.yaml: line 13: or_opcodes: RC_RDMA_READ_RESPONSE_MIDDLE is not another opcode with RC_RDMA_READ_RESPONSE_ONLY's headers"},
		{"or_opcodes request", "RC_RDMA_READ_RESPONSE_ONLY,|RC_RDMA_READ_RESPONSE_ONLY, or_opcodes: [RC_SEND_LAST_WITH_IMMEDIATE],", "x.yaml: line 13: or_opcodes: RC_SEND_LAST_WITH_IMMEDIATE is not another opcode"},
		{"aeth missing", "RC_RDMA_READ_REQUEST\n    psn: -2\n    reth: {va: end-8, rkey: rkey^0x10, len: 8}\n|RC_ACKNOWLEDGE\n    psn: -2\n", "x.yaml: line 5: RC_ACKNOWLEDGE carries an AETH: add aeth: {syndrome: 0x1f, msn: N}"},
		{"aeth on a request", "len: 8}\n|len: 8}\n    aeth: {syndrome: 0x1f}\n", "x.yaml: line 5: RC_RDMA_READ_REQUEST carries no AETH: remove aeth"},
		{"atomic ack", "RC_RDMA_READ_REQUEST\n    psn: -2\n    reth: {va: end-8, rkey: rkey^0x10, len: 8}\n|RC_ATOMIC_ACKNOWLEDGE\n    psn: -2\n", "x.yaml: line 5: RC_ATOMIC_ACKNOWLEDGE: the suite sends requests"},
		{"yaml syntax", "summary: s|summary: [s", "x.yaml: line 1: did not find expected ',' or ']'"},
		{"two documents", "summary: s|---\nsummary: s\n---\nsummary: t", "x.yaml: "},
		{"hex", "RC_RDMA_READ_REQUEST\n    psn: -2\n    reth: {va: end-8, rkey: rkey^0x10, len: 8}\n|RC_SEND_ONLY\n    psn: -2\n    payload: {hex: abc}\n", "x.yaml: line 5: payload.hex: encoding/hex: odd length hex string: want an even number of hex digits"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := parseEdited(t, "x.yaml", goodScenario, c.edit)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("error %v\nwant one starting %q", err, c.want)
			}
		})
	}
}

// parseEdited parses scenario with edit ("from|to": the first from replaced by
// to) applied, as file name; from must occur.
func parseEdited(t *testing.T, name, scenario, edit string) error {
	t.Helper()
	from, to, _ := strings.Cut(edit, "|")
	if !strings.Contains(scenario, from) {
		t.Fatalf("%q not in the scenario", from)
	}
	_, err := Parse(name, []byte(strings.Replace(scenario, from, to, 1)))
	return err
}

// atomicScenario learns a value with a FETCH_ADD and swaps relative to it.
const atomicScenario = `setup: {server: atomic_bw}
send:
  - {opcode: RC_FETCH_ADD, atomic: {va: base, rkey: rkey, swap_add: 0}}
  - {opcode: RC_COMPARE_SWAP, psn: 1, atomic: {va: base, rkey: rkey, swap_add: orig1+7, compare: orig1}}
expect:
  usable: true
  responses:
    - {opcode: RC_ATOMIC_ACKNOWLEDGE, psn: 0, syndrome: ACK}
    - {opcode: RC_ATOMIC_ACKNOWLEDGE, psn: 1, syndrome: ACK, orig: orig1}
`

// TestParseOrigRefs: origK names an earlier expected ATOMIC_ACKNOWLEDGE (a
// frame: any expected one); anything else is an error naming the line.
func TestParseOrigRefs(t *testing.T) {
	s, err := Parse("a.yaml", []byte(atomicScenario))
	if err != nil {
		t.Fatal(err)
	}
	if s.Send[0].refs() != 0 || s.Send[1].refs() != 1 || s.Expect.Responses[1].Orig.Ref != 1 {
		t.Fatalf("refs %d %d, orig %+v", s.Send[0].refs(), s.Send[1].refs(), s.Expect.Responses[1].Orig)
	}
	for _, c := range []struct{ name, edit, want string }{
		{"later response", "orig: orig1}|orig: orig2}", "a.yaml: line 9: orig: orig2: orig2 is not one of the 1 expected responses before it"},
		{"frame past the responses", "compare: orig1|compare: orig3", "a.yaml: line 4: orig3: orig3 is not one of the 2 expected responses before it"},
		{"not an atomic ACK", "RC_ATOMIC_ACKNOWLEDGE, psn: 0, syndrome: ACK}|RC_ACKNOWLEDGE, psn: 0, syndrome: ACK}", "a.yaml: line 9: orig: orig1: response 1 is RC_ACKNOWLEDGE; origK names an RC_ATOMIC_ACKNOWLEDGE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := parseEdited(t, "a.yaml", atomicScenario, c.edit)
			if err == nil || err.Error() != c.want {
				t.Fatalf("error %v\nwant %q", err, c.want)
			}
		})
	}
}

// TestParseNotMapping: a file that is not a mapping says what a scenario is.
func TestParseNotMapping(t *testing.T) {
	for _, data := range []string{"- a\n- b\n", "", "just text"} {
		_, err := Parse("y.yaml", []byte(data))
		if err == nil || !strings.HasPrefix(err.Error(), "y.yaml: line 1: a scenario is a mapping") {
			t.Errorf("%q: %v", data, err)
		}
	}
}

// TestExpr: symbols, operators and numbers.
func TestExpr(t *testing.T) {
	p := Peer{QPN: 0x123, RKey: 0xabc, Base: 0x10000, RegionLen: 0x2000, Orig: []uint64{0xfffffffffffffffe, 7}}
	for in, want := range map[string]uint64{
		"0": 0, "42": 42, "0x10": 16, "base": 0x10000, "base+64": 0x10040, "base - 64": 0xFFC0,
		"end": 0x12000, "end-1": 0x11FFF, "rkey^0xff": 0xa43, "qpn+1": 0x124, "0xffffffffffffffff": ^uint64(0),
		"orig1": 0xfffffffffffffffe, "orig1+5": 3, "orig2-1": 0x6, "orig3": 0,
	} {
		e, err := ParseExpr(in)
		if err != nil || e.Eval(p) != want {
			t.Errorf("%q: %#x, %v; want %#x", in, e.Eval(p), err, want)
		}
	}
	for _, in := range []string{"", "base*2", "rkey+", "x", "0x", "-1", "baseline", "orig", "orig0", "orig+1", "orig01", "origx"} {
		if _, err := ParseExpr(in); err == nil {
			t.Errorf("%q parsed", in)
		}
	}
}
