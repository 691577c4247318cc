package interop

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// guestPeerScript runs a perftest server in the guest for `xroce conform
// --peer-cmd`: its arguments are {server} {size} {iters} {port} {mtu}; it hands the
// command to the guest through the 9p share (as VM.Guest does), waits for it and
// exits with its status. ib_atomic_bw takes no -s.
const guestPeerScript = `#!/bin/sh
share=%s
server=$1 size=$2 iters=$3 port=$4 mtu=$5
cmd="ib_$server -d rxe0 -x 1 -F -n $iters -m $mtu -p $port"
[ "$server" = atomic_bw ] || cmd="$cmd -s $size"
run="timeout 60 $cmd"
` + guestRunScript

// guestClientScript runs a perftest client in the guest for `xroce conform
// --client-cmd` (the responder role): its arguments are {client} {size} {iters}
// {port} {mtu} {timeout} {limit} {addr}; like guestPeerScript it hands the
// command to the guest and exits with its status. The guest's `timeout` ends a
// client the suite gave up on (setup.limit) a little after the limit; the
// suite has killed this script by then.
const guestClientScript = `#!/bin/sh
share=%s
client=$1 size=$2 iters=$3 port=$4 mtu=$5 qptimeout=$6 limit=$7 addr=$8
cmd="ib_$client -d rxe0 -x 1 -F -n $iters -m $mtu -p $port -u $qptimeout"
[ "$client" = atomic_bw ] || cmd="$cmd -s $size"
run="timeout $((limit + 3)) $cmd $addr"
` + guestRunScript

// guestRunScript ends both scripts: it hands $run to the guest through the 9p
// share $share, waits for its exit status (80 s at most), prints its output and
// exits with its status.
const guestRunScript = `id=conform$$
printf '%%s\n' "$run" > $share/tmp.$id && mv $share/tmp.$id $share/cmd.$id
i=0
while [ ! -e $share/rc.$id ]; do
	sleep 0.05; i=$((i+1))
	[ $i -lt 1600 ] || { echo "the guest did not finish: $run"; exit 124; }
done
cat $share/out.$id
exit $(cat $share/rc.$id)
`

// conformSummary is the part of `xroce conform --json` this test reads.
type conformSummary struct {
	Passed, Failed int
	Error          string
	Results        []struct {
		Name, Role, Expected, Observed, Spec string
		Pass                                 bool
		Problems                             []string
		PeerOutput                           string `json:"peer_output"`
	} `json:"scenarios"`
}

// TestConformRxe runs `xroce conform` in both roles against rdma_rxe in the
// guest: as requester against Debian's perftest servers, a fresh server per
// scenario, and as responder (the server) of Debian's perftest clients, a
// fresh client per scenario; it writes rdma_rxe's tables (scenario, expected,
// observed, verdict), one per role, to captures/conform-rxe.md. Every scenario
// must end in a verdict; each departure from the spec must be one
// rxeDepartures explains, with its reason, and every departure listed there
// must still happen (of the scenarios run: XROCE_CONFORM_RUN, a --run pattern
// list, runs fewer).
func TestConformRxe(t *testing.T) {
	if os.Getenv("XROCE_INTEROP") == "" {
		t.Skip("set XROCE_INTEROP=full (make interop)")
	}
	lab, bin := rxeLab(t, 1500)
	dir := t.TempDir()
	script := filepath.Join(dir, "guest-peer")
	if err := os.WriteFile(script, []byte(fmt.Sprintf(guestPeerScript, lab.Share)), 0o755); err != nil {
		t.Fatal(err)
	}
	client := filepath.Join(dir, "guest-client")
	if err := os.WriteFile(client, []byte(fmt.Sprintf(guestClientScript, lab.Share)), 0o755); err != nil {
		t.Fatal(err)
	}
	js := filepath.Join(dir, "run.json")
	args := []string{"netns", "exec", lab.NS, "timeout", "1500", bin, "conform", "-d", lab.XIf,
		"--peer-cmd", script + " {server} {size} {iters} {port} {mtu}",
		"--client-cmd", client + " {client} {size} {iters} {port} {mtu} {timeout} {limit} {addr}",
		"--connect-timeout", "30s", "--json", js, "--pcap", filepath.Join(keepDir(t), "conform-rxe")}
	if run := os.Getenv("XROCE_CONFORM_RUN"); run != "" {
		args = append(args, "--run", run)
	}
	cmd := exec.Command("ip", append(args, lab.GuestIP.String())...)
	out, err := cmd.CombinedOutput()
	t.Logf("xroce conform against rdma_rxe (exit %v):\n%s", err, out)
	b, rerr := os.ReadFile(js)
	if rerr != nil {
		t.Fatalf("no JSON summary: %v", rerr)
	}
	var s conformSummary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s.Error != "" {
		t.Errorf("the run stopped: %s", s.Error)
	}
	var md strings.Builder
	departed, ran := map[string]bool{}, map[string]bool{}
	for _, role := range []string{"requester", "responder"} {
		fmt.Fprintf(&md, "%s role:\n\n| scenario | expected | rdma_rxe | verdict |\n| --- | --- | --- | --- |\n", role)
		passed, n := 0, 0
		for _, r := range s.Results {
			if r.Role != role {
				continue
			}
			ran[r.Name] = true
			n++
			v := "pass"
			if r.Pass {
				passed++
			} else {
				v = "departs"
				departed[r.Name] = true
				why, known := rxeDepartures[r.Name]
				if !known {
					t.Errorf("%s: rdma_rxe departs from the spec, unexplained: expected %s, observed %s %v\n%s", r.Name, r.Expected, r.Observed, r.Problems, tail(r.PeerOutput, 600))
				} else {
					v += ": " + why
				}
			}
			fmt.Fprintf(&md, "| %s | %s | %s | %s |\n", r.Name, mdCell(r.Expected), mdCell(r.Observed), mdCell(v))
		}
		fmt.Fprintf(&md, "\n%d of %d %s-role scenarios as the spec says, %s\n\n", passed, n, role, time.Now().UTC().Format("2006-01-02"))
	}
	for name := range rxeDepartures {
		if ran[name] && !departed[name] {
			t.Errorf("%s: listed as a departure of rdma_rxe, but it passed", name)
		}
		if !ran[name] && os.Getenv("XROCE_CONFORM_RUN") == "" {
			t.Errorf("%s: listed as a departure of rdma_rxe, but it did not run", name)
		}
	}
	_ = os.WriteFile(filepath.Join(keepDir(t), "conform-rxe.md"), []byte(md.String()), 0o644)
	t.Log("\n" + md.String())
}

// rxeDepartures are the scenarios in which rdma_rxe (Debian 12's kernel 6.1) does
// not answer as IBTA Vol 1 chapter 9 says, with the reason from its source
// (drivers/infiniband/sw/rxe). The requester role: none, 2026-12-01 (the five
// scenarios the first run saw differ were the scenarios' faults or answers the
// spec allows either way: docs/conform.md, "Against rdma_rxe"). The responder
// role (its requester, under perftest's clients): two.
var rxeDepartures = map[string]string{
	"resp-ghost-ack":       "rxe's requester takes an ACK for a PSN it never sent (+1000, five WRITEs +0..+4 outstanding) as acknowledging every WQE before it: rxe_comp.c check_psn completes the oldest WQE when the ACK's PSN is past its last PSN (psn_compare(pkt->psn, wqe->last_psn) > 0 and wqe_state_pending: reset_retry_counters, COMPST_COMP_WQE), and goes on to the next, without checking the PSN against what was sent (req.psn); so perftest reports 5 WRITEs done that the responder never executed",
	"resp-retry-exhausted": "rxe treats retry_cnt 7 (perftest's, hard-coded in ctx_modify_qp_to_rts) as infinite, like rnr_retry 7: rxe_comp.c COMPST_ERROR_RETRY decrements comp.retry_cnt only `if (qp->comp.retry_cnt != 7)`, so IBV_WC_RETRY_EXC_ERR never comes and the client resends for ever (hundreds of passes in 5 s, until the suite ends it); the spec's 7 means seven retries, only rnr_retry 7 means for ever (IBTA Vol 1 11.2.4.2, from memory). Its passes also come sooner than the 4.2 ms timeout at times (rxe's timer is kicked down the road, not reset: the comment above COMPST_ERROR_RETRY)",
}

// mdCell escapes a Markdown table cell's pipes (or_opcodes alternatives such as
// READ_RESPONSE_ONLY|READ_RESPONSE_LAST).
func mdCell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// keepDir is test/interop/captures, where failed cells' captures and the tables
// are kept.
func keepDir(t *testing.T) string {
	t.Helper()
	keep, err := filepath.Abs("captures")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(keep, 0o755); err != nil {
		t.Fatal(err)
	}
	return keep
}
