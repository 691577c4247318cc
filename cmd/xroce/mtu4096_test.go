package main

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/xroce/xroce/test/testnet"
	"github.com/xroce/xroce/xdp"
)

// TestPathMTU4096: write_bw, read_bw and send_bw with -m 4096 --verify over AF_XDP
// between two namespaces on MTU-9000 veths (multi-buffer AF_XDP: a full frame is
// 4170 bytes, more than a UMEM chunk), at sizes on both sides of one packet. Both
// sides report path MTU 4096, the receiver of the data checks it, and the server's
// capture of the 64 KiB WRITE shows 4096-byte payloads with good ICRCs.
func TestPathMTU4096(t *testing.T) {
	n := testnet.New(t, testnet.Options{MTU: 9000})
	for _, cmd := range []string{"write_bw", "read_bw", "send_bw"} {
		for _, size := range []int{1, 4096, 4097, 65536, 1 << 20} {
			t.Run(fmt.Sprintf("%s/%d", cmd, size), func(t *testing.T) {
				iters := 100
				if size == 1<<20 {
					iters = 20
				}
				args := []string{cmd, "--link", "xdp", "--verify", "-m", "4096", "-s", fmt.Sprint(size), "-n", fmt.Sprint(iters)}
				srvArgs := append(args, "-d", n.IfB)
				pcap := ""
				if cmd == "write_bw" && size == 65536 {
					pcap = filepath.Join(t.TempDir(), "srv.pcapng")
					srvArgs = append(srvArgs, "--pcap", pcap)
				}
				srv, cli := pair(t, n, srvArgs, append(args, "-d", n.IfA, n.IPB.String()))
				for who, out := range map[string]string{"server": srv, "client": cli} {
					if !strings.Contains(out, " Mtu             : 4096[B]\n") {
						t.Errorf("%s: not at path MTU 4096:\n%s", who, out)
					}
					// The server records --pcap: the header tells the tapped link's mode.
					if !strings.Contains(out, " xroce link      : xdp native, copy, multi-buffer, 1 queue\n") {
						t.Errorf("%s: the header does not say how the link runs:\n%s", who, out)
					}
				}
				checkBW(t, "client", cli, size, iters, false)
				checkBW(t, "server", srv, size, iters, false)
				verifier, other := srv, cli // the side the data went to checks it
				if cmd == "read_bw" {
					verifier, other = cli, srv
				}
				want := fmt.Sprintf(" Data verified: the %d bytes of the last message\n", size)
				if !strings.Contains(verifier, want) || strings.Contains(other, "Data verified") {
					t.Errorf("want %q from the side that received the data:\nserver:\n%s\nclient:\n%s", want, srv, cli)
				}
				if pcap != "" {
					out := testnet.Sh(t, bin, "dump", pcap)
					full := regexp.MustCompile(`(?m) RC_RDMA_WRITE_(FIRST|MIDDLE) .* payload 4096 ICRC ok$`).FindAllString(out, -1)
					if len(full) < 15*iters || !strings.Contains(out, " ICRC ok, 0 ICRC BAD, 0 malformed") {
						t.Errorf("capture: %d WRITE FIRST/MIDDLE packets with a 4096-byte payload and good ICRC, want at least %d; summary %s",
							len(full), 15*iters, grepLines(out, " RoCE: ", 1))
					}
				}
			})
		}
	}
}

// TestPingpongMTU4096: pingpong with -m 4096 over AF_XDP at netdev MTU 9000; 8 KiB
// messages are two full 4096-byte packets each, which the capture shows.
func TestPingpongMTU4096(t *testing.T) {
	n := testnet.New(t, testnet.Options{MTU: 9000})
	pcap := filepath.Join(t.TempDir(), "srv.pcapng")
	srv, cli := pair(t, n, []string{"pingpong", "--link", "xdp", "-d", n.IfB, "-m", "4096", "-n", "200", "-s", "8192", "--pcap", pcap},
		[]string{"pingpong", "--link", "xdp", "-d", n.IfA, "-m", "4096", "-n", "200", "-s", "8192", n.IPB.String()})
	re := regexp.MustCompile(`(?m)^3276800 bytes in [\d.]+ seconds = [\d.]+ Mbit/sec\n200 iters in [\d.]+ seconds = [\d.]+ usec/iter$`)
	for who, out := range map[string]string{"server": srv, "client": cli} {
		if !re.MatchString(out) {
			t.Errorf("%s output:\n%s", who, out)
		}
	}
	out := testnet.Sh(t, bin, "dump", pcap)
	for _, op := range []string{"RC_SEND_FIRST", "RC_SEND_LAST"} {
		// 200 received and 200 sent by the server.
		if got := len(regexp.MustCompile(`(?m) `+op+` .* payload 4096 ICRC ok$`).FindAllString(out, -1)); got != 400 {
			t.Errorf("capture: %d %s packets with a 4096-byte payload and good ICRC, want 400", got, op)
		}
	}
	if !strings.Contains(out, " ICRC ok, 0 ICRC BAD, 0 malformed") {
		t.Errorf("capture: %s", grepLines(out, " RoCE: ", 1))
	}
}

// checkBW is checkTable for a bandwidth table, except that below 64 bytes, where
// perftest's MB/s rounds to 0.00, the message rate must be positive instead.
func checkBW(t *testing.T, who, out string, size, iters int, verify bool) {
	t.Helper()
	if size >= 64 {
		checkTable(t, who, out, false, size, iters, verify)
		return
	}
	m := bwLine.FindStringSubmatch(out)
	if m == nil || m[1] != fmt.Sprint(size) || m[2] != fmt.Sprint(iters) {
		t.Fatalf("%s: no table row for %d bytes, %d iterations in\n%s", who, size, iters, out)
	}
	if r, _ := strconv.ParseFloat(m[5], 64); r <= 0 {
		t.Errorf("%s: message rate %s is not positive", who, m[5])
	}
	if verify && !strings.Contains(out, " Data verified: ") {
		t.Errorf("%s: no data verification in\n%s", who, out)
	}
}

// grepLines returns up to max lines of out that contain s.
func grepLines(out, s string, max int) string {
	var b strings.Builder
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) && max > 0 {
			b.WriteString(l + "\n")
			max--
		}
	}
	return b.String()
}

// TestDevinfoNoCapNote: on a kernel with multi-buffer AF_XDP, devinfo at netdev MTU
// 9000 shows active_mtu 4096 without the note that AF_XDP stops at 2048.
func TestDevinfoNoCapNote(t *testing.T) {
	if ok, rel := xdp.KernelHasMultiBuffer(); !ok {
		t.Skipf("Linux %s has no multi-buffer AF_XDP", rel)
	}
	n := testnet.New(t, testnet.Options{MTU: 9000})
	out := testnet.Sh(t, "ip", "netns", "exec", n.NsA, bin, "devinfo", "-d", n.IfA)
	if !strings.Contains(out, "active_mtu:\t\t4096 (5)") || strings.Contains(out, "2048") {
		t.Errorf("devinfo:\n%s", out)
	}
}
