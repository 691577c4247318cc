package pcap

import (
	"fmt"
	"io"
	"net/netip"
	"strings"
)

// Report is what Replay found, connection by connection.
type Report struct {
	As    netip.Addr
	Conns []ConnReport
}

// ConnReport is the outcome of one connection.
type ConnReport struct {
	Conn    Conn // as replayed: with the inferred MTU
	Fed     int  // peer request frames fed to the engine
	BadICRC int  // of which the capture carries with a bad ICRC
	// DroppedICRC and DroppedOther count the frames the engine dropped: for a bad
	// ICRC (as rdma_rxe drops them, silently), and as malformed or not for its QP.
	DroppedICRC, DroppedOther int
	Sent                      int // responses the engine sent
	Captured                  int // responses the emulated endpoint sent in the capture
	Compared                  int // response pairs compared
	// OwnRequests counts the requests the emulated endpoint sent (it was a requester
	// too, as in rc_pingpong); they are not compared.
	OwnRequests int
	Diffs       []Diff
	// NotCompared counts the captured responses after the point where the engine
	// and the capture parted (an opcode, PSN or syndrome kind differed, or a
	// response was missing or extra): the engine's state differs from there on, so
	// comparing further would only repeat the first difference.
	NotCompared int
	Notes       []string
	Err         error // the connection could not be set up
}

// Diff is one difference: a response pair whose fields differ, a response the
// engine sent that the capture lacks, or a captured response the engine did not send.
type Diff struct {
	Response int    // 1-based position among the connection's responses
	Frame    int    // the captured response's frame; 0 when the capture has none here
	After    int    // the request frame the engine had just been fed when it sent its response; 0 when it sent none
	Sent     string // the engine's response (Describe); "" when it sent none
	Captured string // the captured response (Describe); "" when the capture has none
	Fields   []FieldDiff
	Note     string
}

// FieldDiff is one field that differs.
type FieldDiff struct {
	Field, Sent, Captured string
}

// SetupFailures counts the connections that could not be set up (Conn.Err).
func (r *Report) SetupFailures() int {
	n := 0
	for _, c := range r.Conns {
		if c.Err != nil {
			n++
		}
	}
	return n
}

// Differences counts the differences and the connections that failed to set up.
func (r *Report) Differences() int {
	n := r.SetupFailures()
	for _, c := range r.Conns {
		n += len(c.Diffs)
	}
	return n
}

// Write prints the report: per connection its parameters, what was fed and
// compared, and every difference with both packets and the fields that differ.
func (r *Report) Write(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "replaying %s: %d connection%s\n", r.As, len(r.Conns), plural(len(r.Conns)))
	for i := range r.Conns {
		c := &r.Conns[i]
		k := &c.Conn
		fmt.Fprintf(&b, "connection %d: QPN 0x%06x at %s ← QPN 0x%06x at %s, first PSN %d, path MTU %d", i+1, k.QPN, r.As, k.PeerQPN, k.Peer, k.PSN, k.MTU.Bytes())
		if k.Source != "" {
			fmt.Fprintf(&b, " (%s)", k.Source)
		}
		b.WriteString("\n")
		if c.Err != nil {
			fmt.Fprintf(&b, "  error: %v\n", c.Err)
			continue
		}
		for _, n := range c.Notes {
			fmt.Fprintf(&b, "  note: %s\n", n)
		}
		fmt.Fprintf(&b, "  %d request%s fed", c.Fed, plural(c.Fed))
		if c.BadICRC > 0 {
			fmt.Fprintf(&b, " (%d with a bad ICRC)", c.BadICRC)
		}
		if c.DroppedICRC > 0 {
			fmt.Fprintf(&b, ", %d dropped by the engine for a bad ICRC", c.DroppedICRC)
		}
		if c.DroppedOther > 0 {
			fmt.Fprintf(&b, ", %d dropped by the engine as malformed or not for its QP", c.DroppedOther)
		}
		fmt.Fprintf(&b, "; %d response%s sent, %d captured, %d compared", c.Sent, plural(c.Sent), c.Captured, c.Compared)
		if c.OwnRequests > 0 {
			fmt.Fprintf(&b, "; %d request%s of %s's own not compared", c.OwnRequests, plural(c.OwnRequests), r.As)
		}
		if len(c.Diffs) == 0 {
			b.WriteString(": no differences\n")
			continue
		}
		fmt.Fprintf(&b, ": %d difference%s\n", len(c.Diffs), plural(len(c.Diffs)))
		for _, d := range c.Diffs {
			fmt.Fprintf(&b, "  response %d", d.Response)
			if d.After > 0 {
				fmt.Fprintf(&b, ", sent after request frame %d", d.After)
			}
			if d.Frame > 0 {
				fmt.Fprintf(&b, ", captured in frame %d", d.Frame)
			}
			b.WriteString(":\n")
			sent, capt := d.Sent, d.Captured
			if sent == "" {
				sent = "nothing"
			}
			if capt == "" {
				capt = "nothing"
			}
			fmt.Fprintf(&b, "    - sent:     %s\n    + captured: %s\n", sent, capt)
			for _, f := range d.Fields {
				fmt.Fprintf(&b, "    %s: sent %s, captured %s\n", f.Field, f.Sent, f.Captured)
			}
			if d.Note != "" {
				fmt.Fprintf(&b, "    %s\n", d.Note)
			}
		}
		if c.NotCompared > 0 {
			fmt.Fprintf(&b, "  the engine and the capture parted at response %d: %d later captured response%s not compared\n",
				c.Diffs[len(c.Diffs)-1].Response, c.NotCompared, plural(c.NotCompared))
		}
	}
	n, failed := r.Differences(), r.SetupFailures()
	compared := 0
	for _, c := range r.Conns {
		compared += c.Compared
	}
	switch {
	case failed > 0:
		fmt.Fprintf(&b, "replay: failed: %d connection%s could not be set up (the error above); %d difference%s in the others\n", failed, plural(failed), n-failed, plural(n-failed))
	case n == 0 && compared == 0:
		b.WriteString("replay: nothing compared\n")
	case n == 0:
		b.WriteString("replay: no differences\n")
	default:
		fmt.Fprintf(&b, "replay: %d difference%s\n", n, plural(n))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
