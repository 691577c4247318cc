package interop

import (
	"fmt"
	"regexp"
	"strings"
)

// qperf lib cells: Debian's qperf on the host through the verbs library against
// qperf on rdma_rxe, rc_bw and rc_lat over the RDMA CM (-cm1: on RoCE qperf's own
// exchange sets no GRH, so -cm1 is how qperf runs on rdma_rxe too). qperf's server
// never exits by itself: the guest's runs for qperfServe seconds, the host's is
// stopped once the guest's client is done.

const (
	qperfPort  = 19765 // qperf's control port (TCP)
	qperfServe = 40    // seconds the guest's server stays up
)

// qperfTests are what each cell's client runs, each for 3 s.
var qperfTests = []string{"rc_bw", "rc_lat"}

var qperfRes = map[string]*regexp.Regexp{
	"rc_bw":  regexp.MustCompile(`(?m)^rc_bw:\n    bw  =  [0-9.]+ [KMG]B/sec$`),
	"rc_lat": regexp.MustCompile(`(?m)^rc_lat:\n    latency  =  [0-9.]+ (us|ms)$`),
}

// qperfClientOpts are the client's options: the RDMA CM, 3 s per test.
var qperfClientOpts = []string{"-cm1", "-t", "3"}

// qperfRxeCommand is the guest's qperf (its server bounded by qperfServe).
func qperfRxeCommand(server bool, xroceIP string) string {
	if server {
		return fmt.Sprintf("timeout %d qperf; true", qperfServe)
	}
	return strings.Join(append(append(append([]string{"qperf"}, qperfClientOpts...), xroceIP), qperfTests...), " ")
}

// checkQperf checks the client's result lines.
func (c cell) checkQperf(xout, gout string) error {
	out, who := gout, "guest"
	if c.xroceClient {
		out, who = xout, "host"
	}
	for _, t := range qperfTests {
		if !qperfRes[t].MatchString(out) {
			return fmt.Errorf("%s's qperf client: no %s result:\n%s", who, t, tail(out, 1500))
		}
	}
	return nil
}

// qperfFigure is the client's rc_bw and rc_lat for the results table.
func qperfFigure(out string) (string, bool) {
	bw := regexp.MustCompile(`bw  =  ([0-9.]+ [KMG]B/sec)`).FindStringSubmatch(out)
	lat := regexp.MustCompile(`latency  =  ([0-9.]+ (us|ms))`).FindStringSubmatch(out)
	if bw == nil || lat == nil {
		return "", false
	}
	return bw[1] + ", " + lat[1], true
}
