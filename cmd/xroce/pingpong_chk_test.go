package main

import (
	"strings"
	"testing"

	"github.com/xroce/xroce/test/testnet"
)

// TestChkReceived: the pattern is rc_pingpong's (0 at each page start, 0x7b
// elsewhere); a message equal to it passes and is scrubbed, so that the same
// bytes left in the buffer fail the next look; the first differing byte is named,
// and a message shorter than -s is named as such.
func TestChkReceived(t *testing.T) {
	want := chkPattern(10000)
	if want[0] != 0 || want[1] != 0x7b || want[4095] != 0x7b || want[4096] != 0 || want[8192] != 0 || want[9999] != 0x7b {
		t.Fatalf("pattern bytes 0 1 4095 4096 8192 9999: % x", []byte{want[0], want[1], want[4095], want[4096], want[8192], want[9999]})
	}
	got := append([]byte(nil), want...)
	if err := chkReceived(got, want, 1, 10000); err != nil {
		t.Fatal(err)
	}
	err := chkReceived(got, want, 2, 10000)
	if err == nil || !strings.HasPrefix(err.Error(), "invalid data in page 0: message 2, byte 0 is 0xff, want 0x00") {
		t.Fatalf("a stale buffer: %v", err)
	}
	copy(got, want)
	got[8200] = 1
	err = chkReceived(got, want, 3, 10000)
	if err == nil || err.Error() != "invalid data in page 2: message 3, byte 8200 is 0x01, want 0x7b" {
		t.Fatalf("one byte off: %v", err)
	}
	copy(got, want)
	err = chkReceived(got, want, 4, 4096)
	if err == nil || err.Error() != "message 4 was 4096 bytes where -s is 10000: give both sides the same -s" {
		t.Fatalf("a short message: %v", err)
	}
}

// TestPingpongChk: pingpong -c over each connection type at path MTU 4096 passes
// with every message checked; a -c server against a client without -c (all
// zeros) runs to the end, as rc_pingpong does (its peer would wait for ever), and
// fails naming the first byte that differs; against a smaller -s (whose side then
// refuses this side's longer message) its error adds the short message -c saw.
func TestPingpongChk(t *testing.T) {
	n := testnet.New(t, testnet.Options{MTU: 9000})
	for _, c := range []struct{ conn, size string }{{"RC", "10000"}, {"UC", "10000"}, {"UD", "4000"}} {
		args := []string{"pingpong", "--connection", c.conn, "-m", "4096", "-c", "-n", "200", "-s", c.size}
		srv, cli := pair(t, n, append(args, "-d", n.IfB), append(args, "-d", n.IfA, n.IPB.String()))
		for who, out := range map[string]string{"server": srv, "client": cli} {
			if !strings.Contains(out, "200 iters in ") {
				t.Errorf("%s %s:\n%s", c.conn, who, out)
			}
		}
	}
	srv, cli, srvErr, cliErr := pairRaw(t, n, []string{"pingpong", "-c", "-n", "20", "-s", "10000", "-d", n.IfB},
		[]string{"pingpong", "-n", "20", "-s", "10000", "-d", n.IfA, n.IPB.String()})
	if srvErr == nil || cliErr != nil || !strings.Contains(srv, "20 iters in ") || !strings.Contains(srv, "xroce pingpong: -c: 20 of the 20 messages received were not what the peer's -c sends (does it run with -c, or another tool?); the first: invalid data in page 0: message 1, byte 1 is 0x00, want 0x7b\n") {
		t.Fatalf("server: %v\n%s\nclient: %v\n%s", srvErr, srv, cliErr, cli)
	}
	srv, _, srvErr, _ = pairRaw(t, n, []string{"pingpong", "-c", "-n", "20", "-s", "8192", "-d", n.IfB},
		[]string{"pingpong", "-c", "-n", "20", "-s", "4096", "-d", n.IfA, n.IPB.String()})
	if srvErr == nil || !strings.Contains(srv, "IBV_WC_REM_INV_REQ_ERR") || !strings.Contains(srv, "; before it, -c found: message 1 was 4096 bytes where -s is 8192: give both sides the same -s\n") {
		t.Fatalf("server against a smaller -s: %v\n%s", srvErr, srv)
	}
}
