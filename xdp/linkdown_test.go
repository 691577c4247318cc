package xdp_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xroce/xroce/bpf"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/test/testnet"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/xdp"
)

// TestSendWhileDown: on an interface set down, copy-mode AF_XDP's sendto answers
// ENETDOWN. The frame already on the TX ring stays there; what Send is given next
// is dropped with a *transport.NotSentError naming the interface (the engine counts
// it in send_err and goes on), and the TX chunks a dropped frame was lent are free
// again; once the interface is up the ring's frame leaves with the next one, and the
// dropped ones never do. Before, the ENETDOWN was an
// error that stopped the engine for good (a daemon then received nothing after its
// interface came back: a fresh user's trial).
func TestSendWhileDown(t *testing.T) {
	n := newTestNet(t, 1500, false)
	la, lb := openXDP(t, n, bpf.ModeNative)
	f := make([][]byte, 4)
	for i := range f {
		f[i] = flowFrame(t, la, lb, n.ipA, n.ipB, 0xC001, 100+i, uint64(i))
	}
	testnet.Sh(t, "ip", "-n", n.nsA, "link", "set", n.ifA, "down")
	if k, err := la.Send(f[:1]); k != 1 || err != nil {
		t.Fatalf("first Send while down: %d, %v; want 1, nil (the frame waits on the ring)", k, err)
	}
	lent := la.LendTx(len(f[2]), 0xC001) // the engine encodes in lent chunks
	copy(lent, f[2])
	k, err := la.Send([][]byte{f[1], lent})
	var ns *transport.NotSentError
	if k != 2 || !errors.As(err, &ns) || ns.Dropped != 2 || err.Error() != "2 frames dropped: xdp: "+n.ifA+" is down" {
		t.Fatalf("Send while down: %d, %v; want 2 and 2 frames dropped", k, err)
	}
	testnet.Sh(t, "ip", "-n", n.nsA, "link", "set", n.ifA, "up")
	if k, err := la.Send(f[3:]); k != 1 || err != nil {
		t.Fatalf("Send once up: %d, %v", k, err)
	}
	got := recvN(t, lb, 2, 3*time.Second)
	got = append(got, recvN(t, lb, 1, 200*time.Millisecond)...)
	if len(got) != 2 || !bytes.Equal(got[0], f[0]) || !bytes.Equal(got[1], f[3]) {
		t.Fatalf("received %d frames (%v); want the first and the last sent, in order", len(got), lens(got))
	}
	if n := lendAll(la); n != xdp.TxFrames {
		t.Errorf("%d TX chunks to lend after the interface came back, want all %d (TxFrames)", n, xdp.TxFrames)
	}
}

// lendAll lends l's single-chunk TX memory until none is left and returns how much
// it lent, all of it given back.
func lendAll(l *xdp.Link) int {
	var loans [][]byte
	for b := l.LendTx(64, 0xC001); b != nil; b = l.LendTx(64, 0xC001) {
		loans = append(loans, b)
	}
	for _, b := range loans {
		l.ReturnTx(b)
	}
	return len(loans)
}

// TestEngineSurvivesLinkDown: a WRITE posted while the requester's interface is down
// for 300 ms completes once it is up (its frames, dropped while down, are counted in
// send_err and sent again after the ACK timeout), with the data in place, and
// neither engine stops (run fails the test if one does).
func TestEngineSurvivesLinkDown(t *testing.T) {
	n := newTestNet(t, 1500, false)
	la, lb := openXDP(t, n, bpf.ModeNative)
	a, b := newEndpoint(t, la, 1<<16), newEndpoint(t, lb, 1<<16)
	connect(t, a, b, n.ipB, roce.MTU1024)
	connect(t, b, a, n.ipA, roce.MTU1024)
	stop := run(t, a, b)
	defer stop()
	transfer(t, a, b, "WRITE", 4096, 1)
	testnet.Sh(t, "ip", "-n", n.nsA, "link", "set", n.ifA, "down")
	up := time.AfterFunc(300*time.Millisecond, func() { testnet.Sh(t, "ip", "-n", n.nsA, "link", "set", n.ifA, "up") })
	defer up.Stop()
	transfer(t, a, b, "WRITE", 8192, 2)
	if c := a.dev.Counters().Map(); c["send_err"] == 0 {
		t.Errorf("send_err 0 after a WRITE sent while the interface was down; counters %v", nonzero(c))
	}
	transfer(t, a, b, "READ", 4096, 3)
}

func lens(fs [][]byte) []int {
	var out []int
	for _, f := range fs {
		out = append(out, len(f))
	}
	return out
}

// TestUDPSendWhileDown: the kernel UDP link on an interface set down has no route
// to the peer (ENETUNREACH): the datagram is dropped with a *transport.NotSentError,
// not an error that stops the engine.
func TestUDPSendWhileDown(t *testing.T) {
	n := newTestNet(t, 1500, false)
	la, lb := openUDPOn(t, n.ifA, n.nsA), openUDPOn(t, n.ifB, n.nsB)
	f := flowFrame(t, la, lb, n.ipA, n.ipB, 0xC001, 100, 1)
	testnet.Sh(t, "ip", "-n", n.nsA, "link", "set", n.ifA, "down")
	k, err := la.Send([][]byte{f, f})
	var ns *transport.NotSentError
	if k != 2 || !errors.As(err, &ns) || ns.Dropped != 2 || !errors.Is(err, unix.ENETUNREACH) {
		t.Fatalf("Send while down: %d, %v; want 2 and 2 frames dropped for ENETUNREACH", k, err)
	}
}
