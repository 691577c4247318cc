package xdp_test

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xroce/xroce/bpf"
)

// kernelAtLeast reports whether the running kernel is major.minor or later.
func kernelAtLeast(t *testing.T, major, minor int) bool {
	t.Helper()
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	var ma, mi int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &ma, &mi); err != nil {
		t.Fatalf("kernel release %q: %v", u.Release[:], err)
	}
	return ma > major || ma == major && mi >= minor
}

// TestTxBudget: on Linux 6.17 and later the link's copy-mode sockets take 256 TX
// descriptors a sendto (XDP_MAX_TX_SKB_BUDGET), so 200 frames handed to Send in
// one call leave with one sendto; on older kernels the budget is the kernel's 32
// and the same send takes seven (six answered EAGAIN). Every frame arrives.
func TestTxBudget(t *testing.T) {
	n := newTestNet(t, 1500, false)
	la, lb := openXDP(t, n, bpf.ModeNative)
	budget, kicks := uint32(256), uint64(1)
	if !kernelAtLeast(t, 6, 17) {
		budget, kicks = 32, 7
	}
	if b := la.TxBudget(); b != budget {
		t.Fatalf("TxBudget() = %d, want %d", b, budget)
	}
	frames := make([][]byte, 200)
	for i := range frames {
		frames[i] = writeFrame(t, la, lb, n.ipA, n.ipB, 100, uint64(i))
	}
	before := la.Kicks()
	if k, err := la.Send(frames); k != len(frames) || err != nil {
		t.Fatalf("Send: %d, %v", k, err)
	}
	if k := la.Kicks() - before; k != kicks {
		t.Errorf("%d sendto calls for %d frames, want %d (budget %d)", k, len(frames), kicks, budget)
	}
	if got := recvN(t, lb, len(frames), 5*time.Second); len(got) != len(frames) {
		t.Fatalf("received %d of %d frames", len(got), len(frames))
	}
}
