package interop

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSlowHostNoRetransmit is issue 18's slow-host cell: xroce sends 1 MiB RDMA
// WRITEs and SENDs to Debian's perftest servers on rdma_rxe in the TCG guest, whose
// one emulated CPU answers slowly. Before the requester's timer started when a
// packet left (rather than when it was queued), xroce put 17-42 % more bytes on the
// wire there (local_ack_timeout_err 61, rxe's duplicate_request 7,808). Now nothing
// may be sent twice: xroce's requester counts no local ACK timeout, no adaptive
// retransmission, no go-back and no probe, and rdma_rxe's hw_counters count no
// duplicate request and no out-of-sequence packet.
func TestSlowHostNoRetransmit(t *testing.T) {
	if os.Getenv("XROCE_INTEROP") != "full" {
		t.Skip("set XROCE_INTEROP=full (make interop)")
	}
	lab, bin := rxeLab(t, 1500)
	rxeCounters := func() map[string]int64 {
		out, _, err := lab.Guest("cd /sys/class/infiniband/rxe0/ports/1/hw_counters && grep . duplicate_request out_of_seq_request")(20 * time.Second)
		if err != nil {
			t.Fatalf("rdma_rxe's hw_counters: %v\n%s", err, out)
		}
		return counterMap(regexp.MustCompile(`(?m)^(\w+):(\d+)$`), out)
	}
	for _, op := range []string{"write_bw", "send_bw"} {
		const n = 50
		before := rxeCounters()
		wait := lab.Guest(fmt.Sprintf("ib_%s -d rxe0 -x 1 -F -s 1048576 -n %d", op, n))
		lab.Guest(guestListening)(40 * time.Second)
		out, err := exec.Command("ip", "netns", "exec", lab.NS, "timeout", "120", bin, op, "-d", lab.XIf,
			"-s", "1048576", "-n", strconv.Itoa(n), "--counters", lab.GuestIP.String()).CombinedOutput()
		gout, grc, gerr := wait(60 * time.Second)
		if err != nil || gerr != nil || grc != 0 {
			t.Fatalf("%s: xroce %v, guest rc %d %v\nxroce:\n%s\nguest:\n%s", op, err, grc, gerr, tail(string(out), 2000), tail(gout, 2000))
		}
		after := rxeCounters()
		x := counterMap(regexp.MustCompile(`(?m)^  (\w+)\s+(\d+)$`), string(out))
		t.Logf("%s 1 MiB x %d, xroce -> rdma_rxe: xroce sent_pkts %d; rxe duplicate_request %d, out_of_seq_request %d",
			op, n, x["sent_pkts"], after["duplicate_request"]-before["duplicate_request"], after["out_of_seq_request"]-before["out_of_seq_request"])
		var bad []string
		for _, c := range []string{"local_ack_timeout_err", "roce_adp_retrans", "completer_retry_err", "roce_tail_probe"} {
			if x[c] != 0 {
				bad = append(bad, fmt.Sprintf("xroce %s %d", c, x[c]))
			}
		}
		for _, c := range []string{"duplicate_request", "out_of_seq_request"} {
			if d := after[c] - before[c]; d != 0 {
				bad = append(bad, fmt.Sprintf("rdma_rxe %s +%d", c, d))
			}
		}
		if want := int64(n * 1024); x["sent_pkts"] != want {
			bad = append(bad, fmt.Sprintf("xroce sent_pkts %d, want %d (1 MiB is 1024 packets at PMTU 1024)", x["sent_pkts"], want))
		}
		if len(bad) > 0 {
			t.Errorf("%s: sent again: %s\nxroce:\n%s", op, strings.Join(bad, ", "), tail(string(out), 2500))
		}
	}
}

// counterMap reads name and value pairs with re (two groups) from out.
func counterMap(re *regexp.Regexp, out string) map[string]int64 {
	m := map[string]int64{}
	for _, l := range re.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseInt(l[2], 10, 64)
		m[l[1]] += v
	}
	return m
}
