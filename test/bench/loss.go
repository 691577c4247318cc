package main

import (
	"context"
	"fmt"
	"os/exec"
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

// lossMissing says why the loss section cannot run, or "".
func lossMissing() string {
	if _, err := exec.LookPath("nft"); err != nil {
		return "no nft (apt-get install nftables)"
	}
	return ""
}

// lossPlan is the loss section's measurements.
func lossPlan(scale float64) []measurement {
	var p []measurement
	for _, op := range []string{"write", "read", "send"} {
		for _, loss := range lossRates {
			n := min(scaleN(lossIters[loss], scale), lossMaxIters)
			key := lossKey(op, loss)
			label := fmt.Sprintf("xroce xdp %s 1 MiB through a bridge, %d %% random loss, -n %d", strings.ToUpper(op), loss, n)
			p = append(p, measurement{key, label, func(ctx context.Context, b *bench, pass int) (result, error) {
				if err := b.setLoss(loss); err != nil {
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
			}})
		}
	}
	return p
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

// setLoss makes the bridge drop loss % of the RoCE frames at random (none for 0).
func (b *bench) setLoss(loss int) error {
	cmds := [][]string{{"nft", "flush", "chain", "bridge", "chaos", "fw"}}
	if loss > 0 {
		cmds = append(cmds, []string{"nft", "add", "rule", "bridge", "chaos", "fw", "udp", "dport", "4791",
			"numgen", "random", "mod", "100", "<", fmt.Sprint(loss), "drop"})
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
	t := table{title: fmt.Sprintf("Goodput through a bridge with random loss, MiB/s, and its share of the lossless row (1 MiB, AF_XDP, PMTU %d, --verify-all; %s)", sweepPMTU, med),
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
	t.notes = append(t.notes, "Every run is --verify-all: each message has content and a buffer slot of its own, and the side it went to (WRITE and SEND: the server, READ: the client) checks every message's bytes after the run; a wrong, missing, stale or duplicated message fails the run.")
	t.notes = append(t.notes, "Namespaces A and B each have a veth into a bridge in a third namespace, whose nftables bridge-family forward chain drops that share of the UDP/4791 frames at random (`numgen random mod 100 < N drop`), both directions. Issue 18's targets: at least 50 % of the lossless row at 2 %, 25 % at 5 %. READ keeps less: a lost response costs the rest of its segment, half the window (bounded READ retransmission, docs/congestion.md), and waits for the READs queued behind it at the responder.")
	return t
}
