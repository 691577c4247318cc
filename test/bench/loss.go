package main

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"

	"github.com/xroce/xroce/test/testnet"
)

// The loss section (issue 18): xroce WRITE, READ and SEND of 1 MiB over AF_XDP
// through a bridge in a third namespace that drops a share of the RoCE frames at
// random (nftables, bridge family, forward hook: this kernel has no netem, and AF_XDP
// bypasses qdiscs and netfilter on its own interfaces), with --verify-all (every
// message's data checked by the side it went to), and each loss row's ratio to the
// lossless row of the same run (docs/congestion.md).

// lossRates are the loss section's rates in percent; 0 is the reference row.
var lossRates = []int{0, 2, 5}

// lossIters is -n of a loss row: about a second without loss; fewer messages with
// loss, where READ still runs at a few MiB/s (its window cannot bound one READ).
var lossIters = map[int]int{0: 300, 2: 100, 5: 40}

// lossMaxIters caps -n whatever the scale: --verify-all gives every 1 MiB message a
// slot of its own, -n × 1 MiB at most 1 GiB (maxSlotBytes in cmd/xroce).
const lossMaxIters = 1024

const lossSize = 1 << 20

func lossKey(op string, loss int) string { return fmt.Sprintf("loss %s %d", op, loss) }

// The rate-mismatch rows: a tbf on the bridge port towards the side the data goes
// to, at about a tenth of what the engine sends on this machine, with a shallow
// queue (tbfLimit bytes: about 28 frames of 1082 bytes).
const (
	tbfRate  = "100mbit"
	tbfLimit = "30000"
	tbfIters = 20
)

// tbfMiBs is tbfRate in MiB/s: what the rows' shares are of.
const tbfMiBs = 100e6 / 8 / (1 << 20)

// tbfOps are the operations measured through the tbf (issue 18 asks for WRITE and READ).
var tbfOps = []string{"write", "read"}

func tbfKey(op string) string { return "loss " + op + " tbf" }

// lossMissing says why the loss section cannot run, or "".
func lossMissing() string {
	if _, err := exec.LookPath("nft"); err != nil {
		return "no nft (apt-get install nftables)"
	}
	if _, err := exec.LookPath("tc"); err != nil {
		return "no tc (apt-get install iproute2)"
	}
	return ""
}

// lossPlan is the loss section's measurements.
func lossPlan(scale float64) []measurement {
	var p []measurement
	for _, op := range []string{"write", "read", "send"} {
		for _, loss := range lossRates {
			n := min(scaleN(lossIters[loss], scale), lossMaxIters)
			label := fmt.Sprintf("xroce xdp %s 1 MiB through a bridge, %d %% random loss, -n %d", strings.ToUpper(op), loss, n)
			p = append(p, lossRun(lossKey(op, loss), label, op, n, func(b *bench) error { return b.setFault(loss, "") }))
		}
	}
	for _, op := range tbfOps {
		n := min(scaleN(tbfIters, scale), lossMaxIters)
		label := fmt.Sprintf("xroce xdp %s 1 MiB through a bridge, tbf %s towards the receiver (queue %s bytes), -n %d", strings.ToUpper(op), tbfRate, tbfLimit, n)
		p = append(p, lossRun(tbfKey(op), label, op, n, func(b *bench) error {
			port := b.lossNet.PortB // WRITE: the server receives the data
			if op == "read" {
				port = b.lossNet.PortA // READ: the client does
			}
			return b.setFault(0, port)
		}))
	}
	return append(p, dcqcnPlan()...)
}

// lossRun is one measurement of the section: op_bw of n 1 MiB messages with
// --verify-all, after fault sets up the bridge.
func lossRun(key, label, op string, n int, fault func(*bench) error) measurement {
	return measurement{key: key, label: label, run: func(ctx context.Context, b *bench, pass int) (result, error) {
		if err := fault(b); err != nil {
			return result{}, err
		}
		args := []string{op + "_bw", "--link", "xdp", "-s", fmt.Sprint(lossSize), "-n", fmt.Sprint(n), "-m", fmt.Sprint(sweepPMTU), "--verify-all"}
		out, err := b.xroceOn(ctx, b.lossNet, key, pass, args, false)
		if err != nil {
			return result{}, err
		}
		if want := fmt.Sprintf(" Data verified: every one of the %d messages of %d bytes\n", n, lossSize); !strings.Contains(out.client+out.server, want) {
			return result{}, fmt.Errorf("neither side says %q:\n%s\n%s", want, out.client, out.server)
		}
		return bwFigures(out, lossSize, n)
	}}
}

// newLossNet creates the bridged network of the loss section and its nftables chain.
func newLossNet() (*testnet.Net, func(), error) {
	n, remove, err := testnet.Create(testnet.Options{Bridge: true})
	if err != nil {
		return nil, nil, err
	}
	for _, c := range [][]string{
		{"nft", "add", "table", "bridge", "chaos"},
		{"nft", "add", "chain", "bridge", "chaos", "fw", "{ type filter hook forward priority 0; }"},
	} {
		if out, err := exec.Command("ip", append([]string{"netns", "exec", n.NsBr}, c...)...).CombinedOutput(); err != nil {
			remove()
			return nil, nil, fmt.Errorf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	return n, remove, nil
}

// setFault makes the bridge drop loss % of the RoCE frames at random (none for 0),
// and puts the tbf on port (none for ""), after removing the last run's.
func (b *bench) setFault(loss int, port string) error {
	for _, p := range []string{b.lossNet.PortA, b.lossNet.PortB} {
		_ = exec.Command("tc", "-n", b.lossNet.NsBr, "qdisc", "del", "dev", p, "root").Run() // none there: fine
	}
	cmds := [][]string{{"nft", "flush", "chain", "bridge", "chaos", "fw"}}
	if loss > 0 {
		cmds = append(cmds, []string{"nft", "add", "rule", "bridge", "chaos", "fw", "udp", "dport", "4791",
			"numgen", "random", "mod", "100", "<", fmt.Sprint(loss), "drop"})
	}
	if port != "" {
		cmds = append(cmds, []string{"tc", "qdisc", "add", "dev", port, "root", "tbf", "rate", tbfRate, "burst", "32k", "limit", tbfLimit})
	}
	for _, c := range cmds {
		if out, err := exec.Command("ip", append([]string{"netns", "exec", b.lossNet.NsBr}, c...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	return nil
}

// lossTable is the loss section's table: goodput, and the ratio to the lossless row.
func lossTable(r results, med string) table {
	t := table{title: fmt.Sprintf("Goodput through a bridge with random loss or a %s bottleneck, MiB/s, and its share of the lossless row or of the bottleneck (1 MiB, AF_XDP, PMTU %d, --verify-all; %s)", tbfRate, sweepPMTU, med),
		header: []string{"loss", "WRITE", "READ", "SEND"}}
	for _, loss := range lossRates {
		row := []string{fmt.Sprintf("%d %%", loss)}
		for _, op := range []string{"write", "read", "send"} {
			s := r.fmtFig(lossKey(op, loss), figGoodput, mibs)
			if loss > 0 {
				q := ratio{num: figRef{lossKey(op, loss), figGoodput}, den: figRef{lossKey(op, 0), figGoodput}, factor: 1}
				if v, ok := q.value(r); ok {
					s += fmt.Sprintf(" (%.0f %%)", 100*v)
				}
			}
			row = append(row, s)
		}
		t.rows = append(t.rows, row)
	}
	row := []string{"tbf " + tbfRate}
	for _, op := range []string{"write", "read", "send"} {
		s := "not measured"
		if slices.Contains(tbfOps, op) {
			s = r.fmtFig(tbfKey(op), figGoodput, mibs)
			if v, ok := r.get(tbfKey(op), figGoodput); ok {
				s += fmt.Sprintf(" (%.0f %% of %.2f)", 100*v/(tbfMiBs*(1<<20)), tbfMiBs)
			}
		}
		row = append(row, s)
	}
	t.rows = append(t.rows, row)
	if !r.anyPrefix("loss write ", "loss read ", "loss send ") {
		t.notes = append(t.notes, notMeasured)
		return t
	}
	t.notes = append(t.notes, "Every run is --verify-all: each message has content and a buffer slot of its own, and the side it went to (WRITE and SEND: the server, READ: the client) checks every message's bytes after the run; a wrong, missing, stale or duplicated message fails the run.")
	t.notes = append(t.notes, "Namespaces A and B each have a veth into a bridge in a third namespace, whose nftables bridge-family forward chain drops that share of the UDP/4791 frames at random (`numgen random mod 100 < N drop`), both directions. Issue 18's targets: at least 50 % of the lossless row at 2 %, 25 % at 5 %. The tbf row: no random loss; the bridge port towards the side the data goes to (B for WRITE, A for READ) is `tbf rate 100mbit burst 32k limit 30000` (a shallow queue of about 28 frames), a tenth of what the engine sends here; the share is of 100 Mbit/s in MiB/s (the frames' headers included, so 94.6 % is the most 1024-byte payloads can have). Issue 18's target: at least 85 %.")
	return t
}
