package conform

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/xroce/xroce/roce"
)

// observedPass is a run of the client's request packets with rising PSNs: a
// packet whose PSN is below the PSN after the previous request (the previous
// packet's PSN + 1, or past a READ's response PSNs) starts the next pass (a
// retransmission from there). Gap is the time from the previous pass's last packet to this
// one's first (0 for the first pass).
type observedPass struct {
	Opcode   roce.Opcode
	From, To int // PSN offsets of the first and last packet
	Packets  int
	Gap      time.Duration
	first    time.Duration
	last     time.Duration
	next     int // the PSN after the last request's
}

// passes groups the requests into passes.
func passes(reqs []Request) []observedPass {
	var out []observedPass
	for _, q := range reqs {
		next := q.PSN + max(q.PSNs, 1)
		if n := len(out); n > 0 && q.PSN >= out[n-1].next {
			p := &out[n-1]
			p.To, p.Packets, p.last, p.next = q.PSN, p.Packets+1, q.At, next
			continue
		}
		p := observedPass{Opcode: q.Opcode, From: q.PSN, To: q.PSN, Packets: 1, first: q.At, last: q.At, next: next}
		if n := len(out); n > 0 {
			p.Gap = q.At - out[n-1].last
		}
		out = append(out, p)
	}
	return out
}

// span renders a pass's PSNs: "+0" or "+0..+3".
func psnSpan(from, to int) string {
	if from == to {
		return fmt.Sprintf("%+d", from)
	}
	return fmt.Sprintf("%+d..%+d", from, to)
}

// describePasses renders observed passes, alike ones in a row merged with ×N
// and the gaps before them (ms) when there was more than one pass:
// "RDMA_WRITE_ONLY +0, RDMA_WRITE_ONLY +0 ×7 (gaps 17-18ms)".
func describePasses(ps []observedPass) string {
	if len(ps) == 0 {
		return "no request"
	}
	var parts []string
	for i := 0; i < len(ps); {
		j := i + 1
		for j < len(ps) && i > 0 && ps[j].Opcode == ps[i].Opcode && ps[j].From == ps[i].From && ps[j].To == ps[i].To {
			j++
		}
		s := shortOp(ps[i].Opcode) + " " + psnSpan(ps[i].From, ps[i].To)
		if j-i > 1 {
			s += fmt.Sprintf(" ×%d", j-i)
		}
		if i > 0 {
			lo, hi := ps[i].Gap, ps[i].Gap
			for _, p := range ps[i:j] {
				lo, hi = min(lo, p.Gap), max(hi, p.Gap)
			}
			s += " (gap " + ms(lo)
			if hi != lo {
				s += "-" + ms(hi)
			}
			s += ")"
		}
		parts = append(parts, s)
		i = j
	}
	return strings.Join(parts, ", ")
}

// ms renders a duration in milliseconds, to 0.1 ms below 10 ms.
func ms(d time.Duration) string {
	if d < 10*time.Millisecond {
		return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) + "ms"
	}
	return fmt.Sprintf("%dms", d.Milliseconds())
}

// describe renders an expected pass: "RDMA_WRITE_ONLY +0 ×8 gap 2ms-100ms".
func (p *Pass) describe() string {
	names := shortOp(p.Opcode.Opcode)
	for _, o := range p.OrOpcodes {
		names += "|" + shortOp(o.Opcode)
	}
	s := names + " " + fmt.Sprintf("%+d", p.PSN)
	switch {
	case p.PSNMax != nil && p.To != nil:
		s = names + " " + fmt.Sprintf("%+d…%+d..%+d", p.PSN, *p.PSNMax, *p.To)
	case p.PSNMax != nil:
		s = names + " " + fmt.Sprintf("%+d…%+d", p.PSN, *p.PSNMax)
	case p.To != nil:
		s = names + " " + psnSpan(p.PSN, *p.To)
	}
	if p.Count.Text != "1" {
		s += " ×" + p.Count.Text
	}
	if p.Gap != nil {
		s += " " + p.Gap.String()
	}
	return s
}

// describeExpectedPasses renders the expected passes and outcome.
func describeExpectedPasses(ps []Pass, client string) string {
	var parts []string
	for i := range ps {
		parts = append(parts, ps[i].describe())
	}
	return strings.Join(parts, ", ") + " · client " + client
}

// matchPass reports what differs between an expected pass and an observed one
// (nothing: they match).
func (p *Pass) matchPass(o *observedPass, first bool) []string {
	var bad []string
	if !p.allows(o.Opcode) {
		bad = append(bad, fmt.Sprintf("opcode %v", o.Opcode))
	}
	if o.From != p.PSN && (p.PSNMax == nil || o.From < p.PSN || o.From > *p.PSNMax) {
		bad = append(bad, fmt.Sprintf("from PSN %+d", o.From))
	}
	if p.To != nil && o.To != *p.To {
		bad = append(bad, fmt.Sprintf("to PSN %+d", o.To))
	}
	if p.Gap != nil && !first && !p.Gap.Has(o.Gap) {
		bad = append(bad, fmt.Sprintf("after a gap of %v", o.Gap.Round(100*time.Microsecond)))
	}
	return bad
}

// judgePasses compares the observed passes with the expected ones, in order:
// each expected pass takes as many alike observed passes in a row as its
// Count allows (at least its minimum), and none may be left over.
func judgePasses(want []Pass, got []observedPass) []string {
	var bad []string
	i := 0
	for k := range want {
		p := &want[k]
		n := 0
		var why []string
		for i < len(got) && (p.Count.Max < 0 || n < p.Count.Max) {
			if why = p.matchPass(&got[i], i == 0); len(why) > 0 {
				break
			}
			n++
			i++
		}
		if n < p.Count.Min {
			if i < len(got) {
				bad = append(bad, fmt.Sprintf("expected pass %d (%s): %d alike, then pass %d is %s %s: %s", k+1, p.describe(), n, i+1,
					shortOp(got[i].Opcode), psnSpan(got[i].From, got[i].To), strings.Join(why, ", ")))
			} else {
				bad = append(bad, fmt.Sprintf("expected pass %d (%s): %d alike, then nothing more came", k+1, p.describe(), n))
			}
			return bad
		}
	}
	if i < len(got) {
		bad = append(bad, fmt.Sprintf("unexpected passes from pass %d: %s", i+1, describePasses(got[i:])))
	}
	return bad
}

// statusRe finds the failed work completion in a client's output: perftest's
// "Failed status 12:" or xroce's "IBV_WC_RETRY_EXC_ERR".
var statusRe = regexp.MustCompile(`Failed status (\d+)|IBV_WC_([A-Z_]+ERR)\b`)

// outcome names how the client ended from its exit error and output:
// "success", a status name of Outcomes ("RETRY_EXC_ERR"), "status N" for
// another one, "running" when the suite ended it at setup.limit, or "failed"
// with no status in its output.
func outcome(exitErr error, out string, killed bool) string {
	if killed {
		return "running"
	}
	if exitErr == nil {
		return "success"
	}
	m := statusRe.FindStringSubmatch(out)
	switch {
	case m == nil:
		return "failed"
	case m[2] != "":
		if _, ok := Outcomes[m[2]]; ok {
			return m[2]
		}
		return m[2]
	}
	n, _ := strconv.Atoi(m[1])
	for name, v := range Outcomes {
		if v == n && n > 0 {
			return name
		}
	}
	return "status " + m[1]
}
