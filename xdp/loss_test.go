package xdp_test

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/xroce/xroce/bpf"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// TestLossThroughBridge: A and B are joined through a bridge in a third namespace
// that drops 2 % of UDP/4791 frames at random (nftables, bridge family, forward hook:
// this kernel has no netem, and AF_XDP bypasses qdiscs on its own interfaces). Every
// transfer still completes with the right data, and both the drop counter and the
// engines' retry counters show the loss happened.
func TestLossThroughBridge(t *testing.T) {
	n := newTestNet(t, 1500, true)
	sh(t, "ip", "netns", "exec", n.nsBr, "nft", "add", "table", "bridge", "chaos")
	sh(t, "ip", "netns", "exec", n.nsBr, "nft", "add", "chain", "bridge", "chaos", "fw", "{ type filter hook forward priority 0; }")
	sh(t, "ip", "netns", "exec", n.nsBr, "nft", "add", "rule", "bridge", "chaos", "fw", "udp", "dport", "4791",
		"numgen", "random", "mod", "100", "<", "2", "counter", "drop")
	la, lb := openXDP(t, n, bpf.ModeNative)
	a, b := newEndpoint(t, la, 16<<20+4096), newEndpoint(t, lb, 16<<20+4096)
	connect(t, a, b, n.ipB, roce.MTU1024)
	connect(t, b, a, n.ipA, roce.MTU1024)
	stop := run(t, a, b)
	defer stop()
	for i, size := range []int{1, 4096, 65536, 1 << 20, 8 << 20} {
		for j, op := range []string{"SEND", "WRITE", "READ"} {
			transfer(t, a, b, op, size, byte(3*i+j))
		}
	}
	out := sh(t, "ip", "netns", "exec", n.nsBr, "nft", "list", "chain", "bridge", "chaos", "fw")
	m := regexp.MustCompile(`counter packets (\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no nft counter in\n%s", out)
	}
	dropped, _ := strconv.Atoi(m[1])
	retries := a.dev.Counters().Get(transport.CntCompleterRetryErr) + b.dev.Counters().Get(transport.CntCompleterRetryErr)
	if dropped == 0 || retries == 0 {
		t.Errorf("dropped %d frames, %d retries: the loss path was not exercised", dropped, retries)
	}
	t.Logf("bridge dropped %d RoCE frames; A %v; B %v", dropped, nonzero(a.dev.Counters().Map()), nonzero(b.dev.Counters().Map()))
}
