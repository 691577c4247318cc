package conform

import (
	"strings"
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
)

// goodResponder is a responder-role scenario using every field of the format.
const goodResponder = `summary: s
spec: IBTA
setup: {role: responder, client: send_bw, size: 64, iters: 5, timeout: 10, limit: 3s}
answer:
  - {packets: 1, reply: rnr_nak, timer: 14}
  - {passes: 2-3, reply: nak_psn_sequence_error, psn: -1}
  - {packets: 4-, passes: 4, reply: ghost_ack, psn: 1000, msn: 9}
  - {reply: read_partial, respond: [0, 2]}
expect:
  requests:
    - {opcode: RC_SEND_ONLY, psn: 0}
    - {opcode: RC_SEND_FIRST, or_opcodes: [RC_SEND_ONLY], psn: 1, to: 4, count: 2-, gap: {min: 1ms, max: 60ms}}
  client: RNR_RETRY_EXC_ERR
`

// TestParseResponder: the responder role's fields land where the format says,
// with the defaults filled in.
func TestParseResponder(t *testing.T) {
	s, err := Parse("r.yaml", []byte(goodResponder))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Responder() || s.PeerTool() != "send_bw" || s.Setup != (Setup{Role: RoleResponder, Client: "send_bw", Timeout: 10,
		Limit: Duration(3 * time.Second), Size: 64, MTU: 1024, Iters: 5}) {
		t.Fatalf("setup %+v", s.Setup)
	}
	a := s.Answer
	if len(a) != 4 || a[0].Reply.Kind != replyRNR || *a[0].Timer != 14 || !a[0].Packets.Has(1) || a[0].Packets.Has(2) || a[0].line != 5 {
		t.Fatalf("rule 1 %+v", a[0])
	}
	if a[1].Reply.NAK != roce.NAKPSNSequenceError || *a[1].PSN != -1 || a[1].Packets.Set || !a[1].Passes.Has(3) || a[1].Passes.Has(4) {
		t.Fatalf("rule 2 %+v", a[1])
	}
	if a[2].Reply.Kind != replyGhost || *a[2].MSN != 9 || !a[2].Packets.Has(1<<20) || a[2].Packets.Has(3) {
		t.Fatalf("rule 3 %+v", a[2])
	}
	if a[3].Reply.Kind != replyReadPartial || len(a[3].Respond) != 2 || a[3].Respond[1] != 2 {
		t.Fatalf("rule 4 %+v", a[3])
	}
	p := s.Expect.Requests[1]
	if p.Opcode.Opcode != roce.RC_SEND_FIRST || !p.allows(roce.RC_SEND_ONLY) || p.PSN != 1 || *p.To != 4 || p.Count.Min != 2 || p.Count.Max != -1 ||
		!p.Gap.Has(time.Millisecond) || p.Gap.Has(61*time.Millisecond) || p.line != 12 {
		t.Fatalf("pass 2 %+v", p)
	}
	if s.Expect.Requests[0].Count.Min != 1 || s.Expect.Requests[0].Count.Max != 1 || s.Expect.Client.Name != "RNR_RETRY_EXC_ERR" {
		t.Fatalf("pass 1 %+v, client %v", s.Expect.Requests[0], s.Expect.Client)
	}
	if got := describeExpectedPasses(s.Expect.Requests, s.Expect.Client.Name); got != "SEND_ONLY +0, SEND_FIRST|SEND_ONLY +1..+4 ×2- gap 1ms-60ms · client RNR_RETRY_EXC_ERR" {
		t.Fatalf("described as %q", got)
	}
}

// TestParseResponderErrors: a broken responder-role file gets an error naming
// the file, the line and the fix.
func TestParseResponderErrors(t *testing.T) {
	for _, c := range []struct{ name, edit, want string }{
		{"role", "role: responder|role: server", `r.yaml: setup.role "server": want requester`},
		{"client", "client: send_bw|client: ib_send_bw", `r.yaml: setup.client "ib_send_bw": want one of write_bw, read_bw, send_bw, atomic_bw`},
		{"no client", "client: send_bw, |", "r.yaml: setup.client is missing"},
		{"server", "client: send_bw|client: send_bw, server: write_bw", "r.yaml: setup.server is the requester role's"},
		{"responder fields in the requester role", "role: responder, |", "r.yaml: setup.client, timeout, limit, answer, expect.requests and expect.client are the responder role's"},
		{"timeout", "timeout: 10|timeout: 32", "r.yaml: setup.timeout 32: the client's -u, 1 to 31"},
		{"limit", "limit: 3s|limit: 2m", "r.yaml: setup.limit 2m0s: at most 60s"},
		{"reply", "reply: rnr_nak|reply: rnr", `r.yaml: line 5: reply "rnr": want one of ack_lost, duplicate_ack, ghost_ack,`},
		{"range", "packets: 1,|packets: 0,", `r.yaml: line 5: "0": want N, N-M or N- (N onwards), counted from 1`},
		{"range order", "passes: 2-3|passes: 3-2", `r.yaml: line 6: "3-2": want N, N-M or N-`},
		{"ghost without psn", "psn: 1000, |", "r.yaml: line 7: ghost_ack needs psn"},
		{"psn on rnr", "timer: 14}|timer: 14, psn: 3}", "r.yaml: line 5: psn is the PSN a NAK or ghost ACK names, not for rnr_nak"},
		{"timer", "timer: 14|timer: 32", "r.yaml: line 5: timer is an RNR NAK's timer code, 0 to 31"},
		{"respond", "respond: [0, 2]|respond: [2, 0]", "r.yaml: line 8: respond [2 0]: rising packet numbers from 0"},
		{"read_partial without respond", ", respond: [0, 2]|", "r.yaml: line 8: read_partial needs respond"},
		{"pass opcode", "{opcode: RC_SEND_ONLY, psn: 0}|{opcode: RC_ACKNOWLEDGE, psn: 0}", "r.yaml: line 11: opcode RC_ACKNOWLEDGE: a pass starts with a request the client sends"},
		{"to below psn", "to: 4|to: 0", "r.yaml: line 12: psn and to: offsets from the client's first PSN, to ≥ psn"},
		{"psn_max beyond to", "to: 4|to: 4, psn_max: 5", "r.yaml: line 12: psn_max: above psn, and at most to"},
		{"gap", "max: 60ms|max: 0.5ms", "r.yaml: line 12: gap: max below min"},
		{"client outcome", "RNR_RETRY_EXC_ERR|12", `r.yaml: line 13: client "12": want one of`},
		{"no outcome", "  client: RNR_RETRY_EXC_ERR\n|", "r.yaml: line 10: expect.client is missing"},
		{"send in the responder role", "answer:|send: [{opcode: RC_SEND_ONLY}]\nanswer:", "r.yaml: send is the requester role's"},
		{"usable in the responder role", "  client: RNR|  usable: true\n  client: RNR", "r.yaml: line 10: expect.responses, usable and probe_psn are the requester role's"},
		{"unknown field", "timer: 14|timr: 14", "r.yaml: line 5: field timr not found in rule (docs/conform.md lists the fields)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := parseEdited(t, "r.yaml", goodResponder, c.edit)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("error %v\nwant one starting %q", err, c.want)
			}
		})
	}
}

// TestPasses: request packets group into passes by the PSN after each request
// (a READ's takes its response packets), alike passes merge in the rendering,
// and the judge takes counts and gaps as the expectation says.
func TestPasses(t *testing.T) {
	ms := time.Millisecond
	reqs := []Request{
		{At: 0, Opcode: roce.RC_RDMA_READ_REQUEST, PSN: 0, PSNs: 4},
		{At: 1 * ms, Opcode: roce.RC_RDMA_READ_REQUEST, PSN: 4, PSNs: 4},
		{At: 2 * ms, Opcode: roce.RC_RDMA_READ_REQUEST, PSN: 1, PSNs: 3}, // inside the first READ: a new pass
		{At: 3 * ms, Opcode: roce.RC_RDMA_READ_REQUEST, PSN: 4, PSNs: 4},
		{At: 20 * ms, Opcode: roce.RC_RDMA_READ_REQUEST, PSN: 1, PSNs: 3},
		{At: 40 * ms, Opcode: roce.RC_RDMA_READ_REQUEST, PSN: 1, PSNs: 3},
	}
	ps := passes(reqs)
	if len(ps) != 4 || ps[0].From != 0 || ps[0].To != 4 || ps[1].From != 1 || ps[1].To != 4 || ps[1].Gap != ms || ps[2].Gap != 17*ms || ps[3].Gap != 20*ms {
		t.Fatalf("passes %+v", ps)
	}
	if got := describePasses(ps); got != "RDMA_READ_REQUEST +0..+4, RDMA_READ_REQUEST +1..+4 (gap 1.0ms), RDMA_READ_REQUEST +1 ×2 (gap 17ms-20ms)" {
		t.Fatalf("described as %q", got)
	}
	op := func(o roce.Opcode) Opcode { return Opcode{o} }
	four := 4
	want := []Pass{
		{Opcode: op(roce.RC_RDMA_READ_REQUEST), PSN: 0, To: &four, Count: Count{1, 1, true, "1"}},
		{Opcode: op(roce.RC_RDMA_READ_REQUEST), PSN: 1, Count: Count{2, -1, true, "2-"}, Gap: &Span{Max: Duration(30 * ms)}},
	}
	if bad := judgePasses(want, ps); len(bad) != 0 {
		t.Fatalf("judged %v", bad)
	}
	want[1].Gap.Min = Duration(10 * ms) // the second pass came after 1 ms
	if bad := judgePasses(want, ps); len(bad) != 1 || bad[0] != "expected pass 2 (RDMA_READ_REQUEST +1 ×2- gap 10ms-30ms): 0 alike, then pass 2 is RDMA_READ_REQUEST +1..+4: after a gap of 1ms" {
		t.Fatalf("judged %q", bad)
	}
	want[1] = Pass{Opcode: op(roce.RC_RDMA_READ_REQUEST), PSN: 1, Count: Count{1, 2, true, "1-2"}}
	if bad := judgePasses(want, ps); len(bad) != 1 || bad[0] != "unexpected passes from pass 4: RDMA_READ_REQUEST +1" {
		t.Fatalf("judged %q", bad)
	}
	if bad := judgePasses(append(want, want[1]), ps[:3]); len(bad) != 1 || bad[0] != "expected pass 3 (RDMA_READ_REQUEST +1 ×1-2): 0 alike, then nothing more came" {
		t.Fatalf("judged %q", bad)
	}
	// psn_max: an optional tail resend whose first PSN depends on the answers
	// that came first (resp-ack-timeout's third pass).
	two, three := 2, 3
	tail := []Pass{
		{Opcode: op(roce.RC_RDMA_READ_REQUEST), PSN: 0, To: &four, Count: Count{1, 1, true, "1"}},
		{Opcode: op(roce.RC_RDMA_READ_REQUEST), PSN: 1, PSNMax: &two, To: &four, Count: Count{0, 1, true, "0-1"}},
	}
	if bad := judgePasses(tail, ps[:2]); len(bad) != 0 {
		t.Fatalf("tail +1 judged %v", bad)
	}
	if bad := judgePasses(tail, ps[:1]); len(bad) != 0 {
		t.Fatalf("no tail judged %v", bad)
	}
	late := []observedPass{ps[0], {Opcode: roce.RC_RDMA_READ_REQUEST, From: 3, To: 4, Gap: ms}}
	if bad := judgePasses(tail, late); len(bad) != 1 || bad[0] != "unexpected passes from pass 2: RDMA_READ_REQUEST +3..+4" {
		t.Fatalf("tail +3 judged %q", bad)
	}
	tail[1].PSNMax = &three
	if bad := judgePasses(tail, late); len(bad) != 0 {
		t.Fatalf("tail +3 within psn_max judged %v", bad)
	}
	if got := tail[1].describe(); got != "RDMA_READ_REQUEST +1…+3..+4 ×0-1" {
		t.Fatalf("described as %q", got)
	}
}

// TestOutcome: the client's end from its exit and output: perftest's
// "Failed status N" and xroce's status names.
func TestOutcome(t *testing.T) {
	fail := errTest("exit status 1")
	for _, c := range []struct {
		err    error
		out    string
		killed bool
		want   string
	}{
		{nil, "", false, "success"},
		{fail, " Completion with error at client\n Failed status 12: wr_id 0 syndrom 0x81\n", false, "RETRY_EXC_ERR"},
		{fail, " Failed status 13: wr_id 0 syndrom 0x0\n", false, "RNR_RETRY_EXC_ERR"},
		{fail, " Failed status 5: wr_id 0\n", false, "status 5"},
		{fail, "xroce write_bw: completion IBV_WC_RETRY_EXC_ERR (IBV_WC_RDMA_WRITE): the peer did not answer", false, "RETRY_EXC_ERR"},
		{fail, "xroce send_bw: completion IBV_WC_RNR_RETRY_EXC_ERR (IBV_WC_SEND)", false, "RNR_RETRY_EXC_ERR"},
		{fail, "Couldn't connect", false, "failed"},
		{fail, "", true, "running"},
	} {
		if got := outcome(c.err, c.out, c.killed); got != c.want {
			t.Errorf("%v %q killed %v: %q, want %q", c.err, c.out, c.killed, got, c.want)
		}
	}
}

type errTest string

func (e errTest) Error() string { return string(e) }
