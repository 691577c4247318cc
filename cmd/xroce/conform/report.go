package conform

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
)

// PrintTable writes one row per result: scenario, expected, observed, verdict;
// under a failed row, what differed.
func PrintTable(w io.Writer, results []Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\texpected\tobserved\tverdict")
	pass := 0
	for i := range results {
		r := &results[i]
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, r.Expected, r.Observed, r.Verdict())
		if r.Pass {
			pass++
		}
		for _, p := range r.Problems {
			fmt.Fprintf(tw, "  ! %s\t\t\t\n", p)
		}
		if !r.Pass && r.PeerOutput != "" {
			for _, l := range strings.Split(tail(r.PeerOutput, 8), "\n") {
				fmt.Fprintf(tw, "  | %s\t\t\t\n", l)
			}
		}
	}
	tw.Flush()
	fmt.Fprintf(w, "%d of %d scenarios passed\n", pass, len(results))
}

// Summary is the machine-readable record of a run (--json).
type Summary struct {
	Peer    string   `json:"peer"`
	Passed  int      `json:"passed"`
	Failed  int      `json:"failed"`
	Results []Result `json:"scenarios"`
	Error   string   `json:"error,omitempty"` // why the run stopped early
}

// WriteJSON writes the summary of a run to path.
func WriteJSON(path, peer string, results []Result, runErr error) error {
	s := Summary{Peer: peer, Results: results}
	if s.Results == nil {
		s.Results = []Result{}
	}
	for i := range results {
		if results[i].Pass {
			s.Passed++
		} else {
			s.Failed++
		}
	}
	if runErr != nil {
		s.Error = runErr.Error()
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// PrintList writes one line per scenario: its name, role, peer tool (the
// server it drives, or the client it serves) and summary.
func PrintList(w io.Writer, scenarios []*Scenario) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\trole\tpeer\tsummary")
	for _, s := range scenarios {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Name, s.Setup.Role, s.PeerTool(), s.Summary)
	}
	tw.Flush()
}
