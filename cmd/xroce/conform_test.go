package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xroce/xroce/cmd/xroce/conform"
	"github.com/xroce/xroce/test/testnet"
)

// TestConformSelf is issue 16's self-run: `xroce conform` in namespace A against
// fresh xroce servers in namespace B (started by --peer-cmd, one per scenario,
// each with --guard 8192) and, in the responder role, as the server of fresh
// xroce clients in namespace B (--client-cmd, also with --guard 8192) passes
// every built-in scenario; every server and client reports the 8192 bytes on
// each side of its registered region unchanged after its scenario; the JSON
// summary and each scenario's capture are written; and a few verdicts are
// checked exactly.
func TestConformSelf(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	dir := t.TempDir()
	sum := filepath.Join(dir, "run.json")
	peer := fmt.Sprintf("ip netns exec %s %s {server} -d %s --link xdp -s {size} -n {iters} -m {mtu} -p {port} --guard 8192", n.NsB, bin, n.IfB)
	client := fmt.Sprintf("ip netns exec %s %s {client} -d %s --link xdp -s {size} -n {iters} -m {mtu} -p {port} -u {timeout} --guard 8192 {addr}", n.NsB, bin, n.IfB)
	p := startIn(t, n.NsA, 10*time.Minute, "conform", "-d", n.IfA, "--peer-cmd", peer, "--client-cmd", client, "--json", sum, "--pcap", dir, n.IPB.String())
	err := p.wait(10 * time.Minute)
	out := p.out.String()
	if err != nil {
		t.Fatalf("xroce conform: %v\n%s", err, out)
	}
	all, err := conform.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	var s conform.Summary
	b, err := os.ReadFile(sum)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s.Passed != len(all) || s.Failed != 0 || len(s.Results) != len(all) || s.Peer != n.IPB.String() {
		t.Fatalf("summary: %d passed, %d failed of %d, peer %q; want all %d\n%s", s.Passed, s.Failed, len(s.Results), s.Peer, len(all), out)
	}
	if !strings.Contains(out, fmt.Sprintf("\n%d of %d scenarios passed\n", len(all), len(all))) {
		t.Errorf("no tally line in\n%s", out)
	}
	const guard = " Guard: the 8192 bytes on each side of the registered region are unchanged\n"
	for _, r := range s.Results {
		if !r.Pass || !strings.Contains(r.PeerOutput, guard) {
			t.Errorf("%s: pass %v, server output:\n%s", r.Name, r.Pass, r.PeerOutput)
		}
		if fi, err := os.Stat(r.Pcap); err != nil || fi.Size() == 0 {
			t.Errorf("%s: capture %s: %v", r.Name, r.Pcap, err)
		}
	}
	exact := map[string][2]string{
		"psn-sequence-error-write": {"ACKNOWLEDGE +0 NAK_PSN_SEQUENCE_ERROR msn=0 · usable", ""},
		"write-past-end":           {"ACKNOWLEDGE +0 NAK_REMOTE_ACCESS_ERROR msn=0 · QP in error", ""},
		"atomic-duplicate":         {"ATOMIC_ACKNOWLEDGE +0 ACK msn=1 orig=0x0, ATOMIC_ACKNOWLEDGE +0 ACK msn=1 orig=0x0, ATOMIC_ACKNOWLEDGE +1 ACK msn=2 orig=0x5 · usable", ""},
		"bad-icrc":                 {"silence · usable", ""},
		"ghost-ack":                {"silence · usable", ""},
		"compare-swap":             {"ATOMIC_ACKNOWLEDGE +0 ACK msn=1 orig=0x0, ATOMIC_ACKNOWLEDGE +1 ACK msn=2 orig=0x0, ATOMIC_ACKNOWLEDGE +2 ACK msn=3 orig=0x7, ATOMIC_ACKNOWLEDGE +3 ACK msn=4 orig=0x7 · usable", ""},
		// xroce answers a READ restarted within its response as a READ of its own.
		"read-duplicate-tail": {"RDMA_READ_RESPONSE_FIRST +0 ACK msn=1 1024B, RDMA_READ_RESPONSE_MIDDLE +1 1024B, RDMA_READ_RESPONSE_LAST +2 ACK msn=1 952B, RDMA_READ_RESPONSE_ONLY +2 ACK msn=1 952B · usable", ""},
	}
	for _, r := range s.Results {
		if w, ok := exact[r.Name]; ok && r.Observed != w[0] {
			t.Errorf("%s observed %q, want %q", r.Name, r.Observed, w[0])
		}
	}
	checkResponderRuns(t, s.Results)
	// The capture of the bad-ICRC scenario holds the bad frame and the probe's
	// exchange: three frames, one with a bad ICRC.
	d := testnet.Sh(t, bin, "dump", filepath.Join(dir, "bad-icrc.pcapng"))
	if !strings.Contains(d, "3 frames; 3 RoCE: 2 ICRC ok, 1 ICRC BAD, 0 malformed") {
		t.Errorf("bad-icrc capture:\n%s", d)
	}
}

// checkResponderRuns checks the responder role's records exactly where they
// do not depend on timing: the client's request packets (PSN offsets, in
// order) and how it ended.
func checkResponderRuns(t *testing.T, results []conform.Result) {
	t.Helper()
	want := map[string]struct{ psns, end, again string }{
		// Five WRITEs; the first timeout halves xroce's window (still five
		// packets of 64 B), the later ones drop it to one packet (transport/
		// cwnd.go timeout), so six more retries resend +0 alone: 1 + retry_cnt
		// (7) passes, and the WR fails.
		"resp-retry-exhausted": {"0 1 2 3 4 0 1 2 3 4 0 0 0 0 0 0", "IBV_WC_RETRY_EXC_ERR", ""},
		// Five WRITEs lost, a ghost ACK ignored, all five again after the timeout.
		"resp-ghost-ack": {"0 1 2 3 4 0 1 2 3 4", "", ""},
		// Five 4-packet READ requests, then again from the gap at +1. On a
		// starved CPU the adaptive retransmit timer (which spends no retry_cnt,
		// transport/requester.go) may fire before the answers to that pass are
		// taken in, and ask from +1 again: seen once under a loaded make test.
		// Such a pass may only repeat the go-back's PSNs.
		"resp-read-gap": {"0 4 8 12 16 1 4 8 12 16", "", "1 4 8 12 16"},
	}
	seen := 0
	for _, r := range results {
		if r.Role != conform.RoleResponder {
			continue
		}
		seen++
		w, ok := want[r.Name]
		if !ok {
			continue
		}
		var psns []string
		for _, q := range r.Requests {
			psns = append(psns, fmt.Sprint(q.PSN))
		}
		if got := strings.Join(psns, " "); !psnsMatch(got, w.psns, w.again) {
			t.Errorf("%s: the client's PSN offsets %s, want %s", r.Name, got, w.psns)
		} else if got != w.psns {
			t.Logf("%s: the client's PSN offsets %s: the go-back pass repeated after %s", r.Name, got, w.psns)
		}
		if !strings.Contains(r.PeerOutput, w.end) {
			t.Errorf("%s: the client's output lacks %q:\n%s", r.Name, w.end, r.PeerOutput)
		}
	}
	if seen < 8 {
		t.Errorf("%d responder-role scenarios ran, want at least 8", seen)
	}
}

// psnsMatch says whether got is want, followed by nothing or by PSNs of again only.
func psnsMatch(got, want, again string) bool {
	rest, ok := strings.CutPrefix(got, want)
	if !ok || rest != "" && rest[0] != ' ' {
		return false
	}
	for _, p := range strings.Fields(rest) {
		if !slices.Contains(strings.Fields(again), p) {
			return false
		}
	}
	return true
}

// TestConformErrors: a server that is not there is named within seconds; a
// broken scenario file is named with its line; --run needs a match; --list
// lists the built-in scenarios.
func TestConformErrors(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	start := time.Now()
	p := startIn(t, n.NsA, time.Minute, "conform", "-d", n.IfA, "--connect-timeout", "2s", "--run", "bad-icrc", n.IPB.String())
	err := p.wait(time.Minute)
	want := fmt.Sprintf("xroce conform: scenario bad-icrc: cannot reach the perftest server at %s:18515 within 2s: oob: %s:18515 refused the connection", n.IPB, n.IPB)
	if exitCode(err) != 1 || !strings.Contains(p.out.String(), want) || time.Since(start) > 10*time.Second {
		t.Errorf("unreachable server: %v after %v:\n%s\nwant %q", err, time.Since(start), p.out.String(), want)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "broken.yaml"), []byte("summary: s\nsetup: {server: write_bw}\nsend:\n  - opcode: RC_WRITE_ONLY\nexpect: {usable: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runXroce("conform", "--list", "--scenarios", dir)
	if exitCode(err) != 1 || !strings.Contains(out, `xroce conform: broken.yaml: line 4: opcode "RC_WRITE_ONLY": want a name from IBTA Vol 1 Table 38`) {
		t.Errorf("broken scenario: %v\n%s", err, out)
	}
	missing := filepath.Join(dir, "missing")
	out, err = runXroce("conform", "--list", "--scenarios", missing)
	if want := "xroce conform: --scenarios " + missing + ": no such file or directory (give a directory of *.yaml scenarios)\n"; exitCode(err) != 1 || out != want {
		t.Errorf("--scenarios missing: %v\n%q\nwant %q", err, out, want)
	}
	file := filepath.Join(dir, "broken.yaml")
	out, err = runXroce("conform", "--list", "--scenarios", file)
	if want := "xroce conform: --scenarios " + file + ": not a directory (give a directory of *.yaml scenarios)\n"; exitCode(err) != 1 || out != want {
		t.Errorf("--scenarios a file: %v\n%q\nwant %q", err, out, want)
	}
	out, err = runXroce("conform", "--list", "--run", "no-such-*")
	if exitCode(err) != 1 || !strings.Contains(out, `--run "no-such-*" matches no scenario`) {
		t.Errorf("--run without a match: %v\n%s", err, out)
	}
	out, err = runXroce("conform", "--list")
	all, _ := conform.Builtin()
	if err != nil || strings.Count(out, "\n") != len(all)+1 || !strings.Contains(out, "\nwrite-rkey-violation ") {
		t.Errorf("--list: %v\n%s", err, out)
	}
}

// runXroce runs xroce with args here and returns its combined output.
func runXroce(args ...string) (string, error) {
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

// TestConformDefaultRoles: without --run, a run with a server and no --client-cmd
// keeps the requester-role scenarios only, one with --client-cmd and no server the
// responder-role ones, and one with both keeps all.
func TestConformDefaultRoles(t *testing.T) {
	all, err := conform.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	count := func(ss []*conform.Scenario) (req, resp int) {
		for _, s := range ss {
			if s.Responder() {
				resp++
			} else {
				req++
			}
		}
		return
	}
	wantReq, wantResp := count(all)
	if wantReq != 46 || wantResp != 11 {
		t.Fatalf("built in: %d requester-role, %d responder-role; want 46 and 11", wantReq, wantResp)
	}
	for _, c := range []struct {
		server, client bool
		req, resp      int
	}{{true, false, 46, 0}, {false, true, 0, 11}, {true, true, 46, 11}} {
		if req, resp := count(defaultRoles(all, c.server, c.client)); req != c.req || resp != c.resp {
			t.Errorf("server %v, client %v: %d and %d kept, want %d and %d", c.server, c.client, req, resp, c.req, c.resp)
		}
	}
}

// TestPSNsMatch: the responder-role check takes the exact PSNs, then only repeats
// of the allowed ones.
func TestPSNsMatch(t *testing.T) {
	for _, c := range []struct {
		got  string
		want bool
	}{
		{"0 4 8 12 16 1 4 8 12 16", true},
		{"0 4 8 12 16 1 4 8 12 16 1 4 8 12 16", true},
		{"0 4 8 12 16 1 4 8 12 16 8 12 16", true},
		{"0 4 8 12 16 1 4 8 12 16 0 4", false},
		{"0 4 8 12 16 1 4 8 12 160", false},
		{"0 4 8 12 16 1 4 8 12", false},
	} {
		if got := psnsMatch(c.got, "0 4 8 12 16 1 4 8 12 16", "1 4 8 12 16"); got != c.want {
			t.Errorf("psnsMatch(%q) = %v, want %v", c.got, got, c.want)
		}
	}
	if psnsMatch("0 1 2 3 4 0 1 2 3 4 0", "0 1 2 3 4 0 1 2 3 4", "") {
		t.Error("a repeat matched with none allowed")
	}
}
