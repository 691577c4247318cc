package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/xroce/xroce/cmd/xroce/oob"
	"github.com/xroce/xroce/test/testnet"
)

// TestMsgContent: message contents, tags and slots with exact values (computed
// apart, in Python, from the definitions): the tag in the first 4 bytes, the
// pattern after it, 1-byte messages of consecutive indexes differing, and the
// slots' offsets and the buffer half that holds them.
func TestMsgContent(t *testing.T) {
	if got := msgTag(4096, 1, 17); got != 0x769b1011 {
		t.Errorf("msgTag(4096, 1, 17) = %#x, want 0x769b1011", got)
	}
	b := make([]byte, 8)
	msgContent(b, 8, 1, 2)
	if want := "\x8a\xcd\xbb\xf0\x3b\xd3\xfa\x7f"; string(b) != want {
		t.Errorf("message 2 of QP 1 at 8 bytes: % x, want % x", b, want)
	}
	one := make([]byte, 1)
	for msg, want := range []byte{0xb1, 0xb0} {
		msgContent(one, 1, 0, msg)
		if one[0] != want {
			t.Errorf("message %d of QP 0 at 1 byte: %#02x, want %#02x", msg, one[0], want)
		}
	}
	if m, ok := tagMsg(b, 8, 1); !ok || m != 2 {
		t.Errorf("tagMsg of message 2: %d, %v", m, ok)
	}
	if _, ok := tagMsg(b[:3], 8, 1); ok {
		t.Errorf("tagMsg of 3 bytes: ok")
	}
	if m, inv := uint32(tagMul), uint32(tagMulInv); m*inv != 1 {
		t.Errorf("tagMul × tagMulInv = %#x mod 2^32, want 1", m*inv)
	}
	first := make([]byte, 4097)
	msgContent(first, 4097, 0, 0)
	if k := tagSize(first); k != 4097 {
		t.Errorf("tagSize of message 0 at 4097 bytes: %d", k)
	}
	if !sameStart(first[:1000], 4097) || sameStart(first[:1000], 4096) {
		t.Errorf("sameStart: the first 1000 bytes of message 0 at 4097 bytes are not recognised as such alone")
	}
	for _, c := range []struct{ msg, size, off int }{{0, 4097, 0}, {3, 4097, 12291}, {19, 1 << 20, 19922944}} {
		if got := slotOff(c.msg, c.size); got != c.off {
			t.Errorf("slotOff(%d, %d) = %d, want %d", c.msg, c.size, got, c.off)
		}
	}
	for _, c := range []struct{ n, size, half int }{{100, 1, 4096}, {3, 4097, 8192}, {20, 1 << 20, 10 << 20}, {1000, 4097, 2052096}} {
		if got := slotsHalf(c.n, c.size); got != c.half {
			t.Errorf("slotsHalf(%d, %d) = %d, want %d", c.n, c.size, got, c.half)
		}
	}
}

// TestSlotError: a check failure names the QP, the message, the first differing
// byte and, where it can tell, why: nothing landed, another message's content, or
// the peer's other -s.
func TestSlotError(t *testing.T) {
	want := make([]byte, 4097)
	msgContent(want, 4097, 1, 7)
	fill := append([]byte(nil), want...)
	invert(fill)
	stale := make([]byte, 4097)
	msgContent(stale, 4097, 1, 5)
	torn := append([]byte(nil), want...)
	copy(torn[2048:], stale[2048:])
	other := make([]byte, 1000)
	msgContent(other, 1000, 0, 0)
	want0 := make([]byte, 4097)
	msgContent(want0, 4097, 0, 0)
	short := append(append([]byte(nil), other...), want0[1000:]...)
	for _, c := range []struct {
		name      string
		got, want []byte
		qp, msg   int
		err       string
	}{
		{"fill", fill, want, 1, 7, "verify-all: QP 1, message 7 of 100 (4097 bytes): byte 0 differs, " + hex2(fill[0]) + " where " + hex2(want[0]) + " was expected: the slot still holds its fill, nothing landed there"},
		{"stale", stale, want, 1, 7, "verify-all: QP 1, message 7 of 100 (4097 bytes): byte 0 differs, " + hex2(stale[0]) + " where " + hex2(want[0]) + " was expected: its first 4 bytes are message 5's (a stale, duplicated or misplaced message)"},
		{"torn", torn, want, 1, 7, "verify-all: QP 1, message 7 of 100 (4097 bytes): byte 2048 differs, " + hex2(torn[2048]) + " where " + hex2(want[2048]) + " was expected"},
		{"size", short, want0, 0, 0, "verify-all: QP 0, message 0 of 100 (4097 bytes): byte 0 differs, " + hex2(short[0]) + " where " + hex2(want0[0]) + " was expected: the peer's messages are 1000 bytes and this side's -s is 4097; give both sides the same -s"},
	} {
		if err := slotError(c.got, c.want, c.qp, c.msg, 100); err == nil || err.Error() != c.err {
			t.Errorf("%s: %v\nwant %s", c.name, err, c.err)
		}
	}
}

func hex2(b byte) string { return fmt.Sprintf("%#02x", b) }

// TestVerifyAllRefused: --verify-all is refused with the tests and flags it does
// not go with, and beyond 1 GiB of slots, naming the product and the fix.
func TestVerifyAllRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		err  string
	}{
		{"write_bw", []string{"--verify-all", "-a"}, "--verify-all runs one size: it does not go with -a (each message has its own slot of -s bytes); use --verify with -a"},
		{"send_bw", []string{"--verify-all", "-b"}, "--verify-all does not go with -b: only one side sends; use --verify with -b"},
		{"read_bw", []string{"--verify-all", "-D", "3"}, "--verify-all runs -n messages, each with its own slot: it does not go with -D or --run_infinitely"},
		{"write_bw", []string{"--verify-all", "--run_infinitely"}, "--verify-all runs -n messages, each with its own slot: it does not go with -D or --run_infinitely"},
		{"atomic_bw", []string{"--verify-all"}, "--verify-all is for write_bw, read_bw and send_bw; atomic_bw has --verify"},
		{"write_lat", []string{"--verify-all"}, "--verify-all is for write_bw, read_bw and send_bw; write_lat has --verify"},
		{"write_bw", []string{"--verify-all", "-s", "1048576", "-n", "1025"}, "--verify-all: -q 1 × -n 1025 × -s 1048576 = 1074790400 bytes of message slots, more than the 1073741824 (1 GiB) allowed: each message has a slot of its own in both sides' buffers; lower -n to 1024 or less at this -s and -q, or lower -s"},
		{"read_bw", []string{"--verify-all", "-s", "4097", "-q", "3", "-n", "100000"}, "--verify-all: -q 3 × -n 100000 × -s 4097 = 1229100000 bytes of message slots, more than the 1073741824 (1 GiB) allowed: each message has a slot of its own in both sides' buffers; lower -n to 87360 or less at this -s and -q, or lower -s"},
		// Not one message fits: -n 0 is no fix (a trial was told to lower -n to 0).
		{"write_bw", []string{"--verify-all", "-s", "2147483647", "-q", "64", "-n", "2"}, "--verify-all: -q 64 × -n 2 × -s 2147483647 = 274877906816 bytes of message slots, more than the 1073741824 (1 GiB) allowed: each message has a slot of its own in both sides' buffers; lower -s or -q: not one message per QP fits at these"},
	} {
		if _, err := parsePerf(c.name, c.args, io.Discard); err == nil || err.Error() != c.err {
			t.Errorf("%s %v: %v\nwant %s", c.name, c.args, err, c.err)
		}
	}
	o, err := parsePerf("write_bw", []string{"--verify-all", "-s", "1048576", "-n", "1024"}, io.Discard)
	if err != nil || !o.verify || !o.verifyAll {
		t.Errorf("write_bw --verify-all at 1 GiB of slots: %v, %+v; want accepted, with --verify", err, o)
	}
}

// TestVerifyAllKey: the key message's SRQ number field says --verify-all and -n,
// and each side refuses a peer whose field says otherwise.
func TestVerifyAllKey(t *testing.T) {
	all := &conn{o: &perfOptions{verifyAll: true, iters: 300}}
	plain := &conn{o: &perfOptions{verify: true, iters: 300}}
	if got := all.keySRQN(); got != 0x8000012c {
		t.Errorf("keySRQN with --verify-all -n 300: %#x, want 0x8000012c", got)
	}
	if got := plain.keySRQN(); got != 0 {
		t.Errorf("keySRQN without --verify-all: %#x, want 0", got)
	}
	for _, c := range []struct {
		c    *conn
		srqn uint32
		err  string
	}{
		{all, 0x8000012c, ""},
		{plain, 0, ""},
		{all, 0, "--verify-all: the peer runs without --verify-all (its key message has no --verify-all mark): each message needs a slot of its own on both sides; give both sides --verify-all"},
		{plain, 0x8000012c, "the peer runs with --verify-all and this side without: each message needs a slot of its own on both sides; give both sides --verify-all"},
		{all, 0x80000064, "--verify-all: the peer's -n is 100 and this side's 300: each message has a slot of its own on both sides; give both sides the same -n"},
	} {
		err := c.c.checkPeerVerifyAll(oob.Dest{SRQN: c.srqn})
		if got := errString(err); got != c.err {
			t.Errorf("SRQN %#x against verifyAll %v: %q, want %q", c.srqn, c.c.o.verifyAll, got, c.err)
		}
	}
	if got := verifiedAll(2, 100, 4097); got != "every one of the 200 messages of 4097 bytes, 100 on each of the 2 QPs" {
		t.Errorf("verifiedAll(2, 100, 4097) = %q", got)
	}
	if got := verifiedAll(1, 2000, 1); got != "every one of the 2000 messages of 1 byte" {
		t.Errorf("verifiedAll(1, 2000, 1) = %q", got)
	}
	if got := verifiedAll(1, 1, 64); got != "the one message of 64 bytes" {
		t.Errorf("verifiedAll(1, 1, 64) = %q", got)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestVerifyAll: write_bw, read_bw and send_bw --verify-all over AF_XDP between two
// namespaces at 1 B, 4097 B (on 2 QPs) and 1 MiB, at 4097 B on 2 QPs with -R (the
// mark and -n go through the RDMA CM's exchange too), and at 4097 B with -l 8 (each
// work request of a post list has its own slot): the side the data goes
// to checks every message and says so, per QP with -q 2; the other side says who
// checks. send_bw's 2000 1-byte messages are more than the 512 receives posted at
// once: the later receives go to their own slots as the earlier ones complete.
func TestVerifyAll(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	for _, cmd := range []string{"write_bw", "read_bw", "send_bw"} {
		for _, c := range []struct {
			size, iters, qps int
			flags            []string
		}{{1, 2000, 1, nil}, {4097, 300, 2, nil}, {1 << 20, 20, 1, nil}, {4097, 300, 2, []string{"-R"}}, {4097, 304, 1, []string{"-l", "8"}}} {
			t.Run(fmt.Sprintf("%s/%d%s", cmd, c.size, strings.Join(c.flags, "")), func(t *testing.T) {
				args := []string{cmd, "--link", "xdp", "--verify-all", "-s", fmt.Sprint(c.size), "-n", fmt.Sprint(c.iters), "-q", fmt.Sprint(c.qps)}
				args = append(args, c.flags...)
				srv, cli := pair(t, n, append(slices.Clip(args), "-d", n.IfB), append(slices.Clip(args), "-d", n.IfA, n.IPB.String()))
				checkBW(t, "client", cli, c.size, c.qps*c.iters, false)
				checkBW(t, "server", srv, c.size, c.qps*c.iters, false)
				verifier, other, role, checker := srv, cli, "sends", "server"
				if cmd == "read_bw" {
					verifier, other, role, checker = cli, srv, "offers", "client"
				}
				want := " Data verified: " + verifiedAll(c.qps, c.iters, c.size) + "\n"
				says := " Data verification: this side " + role + " the data, each message its own content, and the " + checker + " checks every message (--verify-all)\n"
				if !strings.Contains(verifier, want) || strings.Contains(other, "Data verified") || !strings.Contains(other, says) {
					t.Errorf("want %q from the side that received the data and %q from the other:\nserver:\n%s\nclient:\n%s", want, says, srv, cli)
				}
				if slices.Contains(c.flags, "-R") && !strings.Contains(cli+srv, " Data ex. method : rdma_cm\n") {
					t.Errorf("not an rdma_cm run:\n%s", cli)
				}
			})
		}
	}
	if got := verifiedAll(2, 300, 4097); got != "every one of the 600 messages of 4097 bytes, 300 on each of the 2 QPs" {
		t.Errorf("verifiedAll(2, 300, 4097) = %q", got)
	}
}

// TestVerifyAllMismatch: --verify-all on one side only, or with -n differing,
// fails both sides before the test with what to change; -s differing is found
// in the data by the checking side, which names the peer's size.
func TestVerifyAllMismatch(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	const (
		peerLacks = "--verify-all: the peer runs without --verify-all (its key message has no --verify-all mark): each message needs a slot of its own on both sides; give both sides --verify-all"
		thisLacks = "the peer runs with --verify-all and this side without: each message needs a slot of its own on both sides; give both sides --verify-all"
	)
	for _, c := range []struct {
		name                 string
		srv, cli             []string
		srvMsg, cliMsg       string
		srvStatus, cliStatus int
	}{
		{"server-only", []string{"write_bw", "--verify-all", "-n", "100"}, []string{"write_bw", "--verify", "-n", "100"}, peerLacks, thisLacks, 1, 1},
		{"client-only", []string{"send_bw", "--verify", "-n", "100"}, []string{"send_bw", "--verify-all", "-n", "100"}, thisLacks, peerLacks, 1, 1},
		{"iters", []string{"read_bw", "--verify-all", "-n", "100"}, []string{"read_bw", "--verify-all", "-n", "200"},
			"--verify-all: the peer's -n is 200 and this side's 100: each message has a slot of its own on both sides; give both sides the same -n",
			"--verify-all: the peer's -n is 100 and this side's 200: each message has a slot of its own on both sides; give both sides the same -n", 1, 1},
		{"size", []string{"write_bw", "--verify-all", "-n", "100", "-s", "4096"}, []string{"write_bw", "--verify-all", "-n", "100", "-s", "1000"},
			"verify-all: QP 0, message 0 of 100 (4096 bytes): byte 0 differs, 0x68 where 0x00 was expected: the peer's messages are 1000 bytes and this side's -s is 4096; give both sides the same -s",
			" Data verification: this side sends the data, each message its own content, and the server checks every message (--verify-all)\n", 1, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv, cli, srvErr, cliErr := pairRaw(t, n, append(c.srv, "--link", "xdp", "-d", n.IfB), append(c.cli, "--link", "xdp", "-d", n.IfA, n.IPB.String()))
			if exitCode(srvErr) != c.srvStatus || exitCode(cliErr) != c.cliStatus || !strings.Contains(srv, c.srvMsg) || !strings.Contains(cli, c.cliMsg) {
				t.Errorf("want the server to exit %d with %q and the client %d with %q:\nserver: %v\n%s\nclient: %v\n%s",
					c.srvStatus, c.srvMsg, c.cliStatus, c.cliMsg, srvErr, srv, cliErr, cli)
			}
		})
	}
}
