package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/test/captures"
	"github.com/xroce/xroce/test/testnet"
	"github.com/xroce/xroce/transport"
)

func runReplayArgs(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var b bytes.Buffer
	err := replay(args, &b)
	return b.String(), err
}

// TestReplayCaptures: `xroce replay` of the rdma_rxe side answers every request of
// the captures exactly as rdma_rxe did, with the parameters of the captured perftest
// or rc_pingpong exchange. In the hostpeer captures the rxe side is the client
// 10.77.0.12 (10.77.0.1 is a plain-UDP rc_pingpong server); the corrupted frame of
// hostpeer_bad_icrc.pcap is dropped, as rdma_rxe dropped it, and its retransmission
// ACKed.
func TestReplayCaptures(t *testing.T) {
	captures.Run(t, replayCaptures)
}

func replayCaptures(t *testing.T, s captures.Source) {
	for _, c := range []struct {
		file, as, source string
		conns            int
	}{
		{"ib_write_bw.pcap", "10.77.0.11", "perftest exchange", 2},
		{"ib_read_bw.pcap", "10.77.0.11", "perftest exchange", 2},
		{"ib_send_bw.pcap", "10.77.0.11", "perftest exchange", 2},
		{"ib_atomic_bw.pcap", "10.77.0.11", "perftest exchange", 1},
		{"ibv_rc_pingpong.pcap", "10.77.0.11", "rc_pingpong exchange", 2},
		{"hostpeer_bad_icrc.pcap", "10.77.0.12", "rc_pingpong exchange", 1},
	} {
		t.Run(c.file, func(t *testing.T) {
			out, err := runReplayArgs(t, s.Path(t, c.file), "--as", c.as)
			if err != nil || !strings.HasSuffix(out, "replay: no differences\n") {
				t.Fatalf("%v\n%s", err, out)
			}
			if n := strings.Count(out, "("+c.source+", frames "); n != c.conns {
				t.Errorf("%d connections from the %s, want %d:\n%s", n, c.source, c.conns, out)
			}
			if strings.Contains(out, " 0 compared") {
				t.Errorf("a connection compared nothing:\n%s", out)
			}
			if c.file == "hostpeer_bad_icrc.pcap" && !strings.Contains(out, "3 requests fed (1 with a bad ICRC), 1 dropped by the engine for a bad ICRC; 2 responses sent, 2 captured, 2 compared") {
				t.Errorf("the bad frame:\n%s", out)
			}
		})
	}
}

// alter writes the frames of the source's capture name, changed by edit, to a
// temporary capture.
func alter(t *testing.T, s captures.Source, name string, edit func(frames []pcap.Frame) []pcap.Frame) string {
	t.Helper()
	frames, err := pcap.ReadFile(s.Path(t, name))
	must(t, err)
	path := filepath.Join(t.TempDir(), "altered-"+name)
	writePcap(t, path, edit(frames))
	return path
}

// edit changes frame n (1-based) in place and recomputes its ICRC.
func edit(t *testing.T, frames []pcap.Frame, n int, f func(p *roce.Packet, b []byte)) {
	t.Helper()
	fr := &frames[n-1]
	fr.Data = append([]byte(nil), fr.Data...)
	var p roce.Packet
	must(t, p.Decode(fr.Data))
	f(&p, fr.Data)
	must(t, roce.FinishFrame(fr.Data))
}

var diffHead = regexp.MustCompile(`(?m)^  response \d+`)

// TestReplayAlteredCaptures: one READ response byte flipped, or one request PSN
// skipped, and replay reports exactly that difference and exits non-zero.
func TestReplayAlteredCaptures(t *testing.T) {
	captures.Run(t, replayAlteredCaptures)
}

func replayAlteredCaptures(t *testing.T, s captures.Source) {
	fs := factsOf(t, s)
	t.Run("flipped READ response byte", func(t *testing.T) {
		var orig byte
		path := alter(t, s, "ib_read_bw.pcap", func(frames []pcap.Frame) []pcap.Frame {
			edit(t, frames, fs.readMiddle, func(p *roce.Packet, b []byte) {
				if p.BTH.Opcode != roce.RC_RDMA_READ_RESPONSE_MIDDLE || p.BTH.PSN != fs.readMiddlePSN {
					t.Fatalf("frame %d: %v PSN %d", fs.readMiddle, p.BTH.Opcode, p.BTH.PSN)
				}
				orig = b[p.PayloadOff+1000]
				b[p.PayloadOff+1000] = ^orig
			})
			return frames
		})
		out, err := runReplayArgs(t, path, "--as", "10.77.0.11")
		if !errors.Is(err, errDifferences) || len(diffHead.FindAllString(out, -1)) != 1 {
			t.Fatalf("%v\n%s", err, out)
		}
		// The third READ's MIDDLE is the second connection's eighth response.
		want := fmt.Sprintf("  response 8, sent after request frame %d, captured in frame %d:\n"+
			"    - sent:     RC_RDMA_READ_RESPONSE_MIDDLE QPN 0x000014 PSN %d payload 1024\n"+
			"    + captured: RC_RDMA_READ_RESPONSE_MIDDLE QPN 0x000014 PSN %[3]d payload 1024\n"+
			"    payload byte 1000: sent 0x%02x, captured 0x%02x (1 of 1024 bytes differ)\n",
			fs.readRequest, fs.readMiddle, fs.readMiddlePSN, orig, ^orig)
		if !strings.Contains(out, want) || !strings.HasSuffix(out, "replay: 1 difference\n") {
			t.Errorf("want\n%s\nin\n%s", want, out)
		}
	})
	t.Run("skipped PSN", func(t *testing.T) {
		path := alter(t, s, "ib_send_bw.pcap", func(frames []pcap.Frame) []pcap.Frame {
			var p roce.Packet
			must(t, p.Decode(frames[fs.sendCut-1].Data))
			if p.BTH.Opcode != roce.RC_SEND_FIRST || p.BTH.PSN != fs.sendCutPSN {
				t.Fatalf("frame %d: %v PSN %d", fs.sendCut, p.BTH.Opcode, p.BTH.PSN)
			}
			return append(frames[:fs.sendCut-1:fs.sendCut-1], frames[fs.sendCut:]...)
		})
		out, err := runReplayArgs(t, path, "--as", "10.77.0.11")
		if !errors.Is(err, errDifferences) || len(diffHead.FindAllString(out, -1)) != 1 {
			t.Fatalf("%v\n%s", err, out)
		}
		// Frame numbers after the cut are one lower than in the original capture.
		// The NAK answers the SEND_MIDDLE now in the cut frame's place; the ACK it
		// is compared with is that of the third SEND's SEND_LAST.
		psn, cut := fs.sendCutPSN, fs.sendCut
		next, after, prev := roce.PSNAdd(psn, 1), roce.PSNAdd(psn, 2), roce.PSNAdd(psn, -1)
		want := fmt.Sprintf("  response 3, sent after request frame %d, captured in frame %d:\n", cut, fs.sendAckMSN3) +
			fmt.Sprintf("    - sent:     RC_ACKNOWLEDGE QPN 0x000016 PSN %d AETH 0x60 NAK PSN sequence error MSN 2\n", psn) +
			fmt.Sprintf("    + captured: RC_ACKNOWLEDGE QPN 0x000016 PSN %d AETH 0x1f ACK credits=31 MSN 3\n", after) +
			fmt.Sprintf("    PSN: sent %d, captured %d\n", psn, after) +
			"    AETH syndrome: sent 0x60 (NAK PSN sequence error), captured 0x1f (ACK credits=31)\n" +
			"    AETH MSN: sent 2, captured 3\n" +
			fmt.Sprintf("    the captured requests skip PSN %d: frame %d carries PSN %d, after frame %d with PSN %d\n", psn, cut, next, cut-1, prev) +
			"  the engine and the capture parted at response 3: 2 later captured responses not compared\n"
		if !strings.Contains(out, want) || !strings.HasSuffix(out, "replay: 1 difference\n") {
			t.Errorf("want\n%s\nin\n%s", want, out)
		}
	})
}

// TestReplayFlags: parameters from flags, and the errors of bad ones.
func TestReplayFlags(t *testing.T) {
	captures.Run(t, replayFlags)
}

func replayFlags(t *testing.T, s captures.Source) {
	fs := factsOf(t, s)
	wr := s.Path(t, "ib_write_bw.pcap")
	out, err := runReplayArgs(t, wr, "--as", "10.77.0.11", "--qpn", "0x12", "--mtu", "1024")
	if err != nil || !strings.Contains(out, "replaying 10.77.0.11: 1 connection\n") ||
		!strings.Contains(out, fmt.Sprintf("(flags and perftest exchange, frames %d-%d)", fs.writeRun2[0], fs.writeRun2[1])) {
		t.Errorf("--qpn: %v\n%s", err, out)
	}
	// A wrong PSN from the flags: the first WRITE looks like a duplicate.
	out, err = runReplayArgs(t, wr, "--as", "10.77.0.11", "--qpn", "0x11", "--psn", fmt.Sprint(roce.PSNAdd(fs.writePSN, 1)))
	if !errors.Is(err, errDifferences) || !strings.Contains(out, fmt.Sprintf("first PSN %d", roce.PSNAdd(fs.writePSN, 1))) {
		t.Errorf("--psn: %v\n%s", err, out)
	}
	// A region of 64 bytes: the second 64-byte WRITE lands outside it.
	out, err = runReplayArgs(t, wr, "--as", "10.77.0.11", "--qpn", "0x11", "--rkey", fmt.Sprintf("0x%x", fs.writeRKey),
		"--vaddr", fmt.Sprintf("0x%x", fs.writeVA), "--len", "64")
	if !errors.Is(err, errDifferences) || !strings.Contains(out, "NAK remote access error") {
		t.Errorf("--len: %v\n%s", err, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{wr}, "--as IP is required"},
		{[]string{wr, "--as", "nope"}, "--as"},
		{[]string{wr, "--as", "10.0.0.1"}, "no RoCE RC frame to or from 10.0.0.1; the capture's RoCE endpoints are 10.77.0.12, 10.77.0.11"},
		{[]string{wr, "--as", "10.77.0.11", "--psn", "5"}, "2 connections of 10.77.0.11 in the capture: choose one with --qpn"},
		{[]string{wr, "--as", "10.77.0.11", "--qpn", "0x99"}, "no RC frame of the capture goes to QPN 0x99"},
		{[]string{wr, "--as", "10.77.0.11", "--rkey", "1"}, "--rkey and --vaddr go together"},
		{[]string{wr, "--as", "10.77.0.11", "--mtu", "1000"}, "--mtu 1000"},
		{[]string{wr, "--as", "10.77.0.11", "--qpn", "0x1000000"}, "--qpn"},
		{[]string{"/no/such.pcap", "--as", "10.77.0.11"}, "no such file"},
		// The requester of the capture answered nothing: no pass for comparing nothing.
		{[]string{wr, "--as", "10.77.0.12"}, "nothing compared: 10.77.0.12 answered no request"},
		{[]string{wr, "--as", "10.77.0.11", "--max-rd-atomic", "0"}, "--max-rd-atomic 0: want 1..128"},
	} {
		if _, err := runReplayArgs(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
	}
	// Its report says so too, not "no differences".
	if out, _ := runReplayArgs(t, wr, "--as", "10.77.0.12"); !strings.HasSuffix(out, "replay: nothing compared\n") {
		t.Errorf("report of a replay that compared nothing:\n%s", out)
	}
}

// TestReplayBinary: the exit status through the binary: 0 without differences, 1
// with.
func TestReplayBinary(t *testing.T) {
	s := captures.Repo(t)
	fs := factsOf(t, s)
	out, err := exec.Command(bin, "replay", s.Path(t, "ib_atomic_bw.pcap"), "--as", "10.77.0.11").CombinedOutput()
	if err != nil {
		t.Errorf("%v\n%s", err, out)
	}
	path := alter(t, s, "ib_write_bw.pcap", func(frames []pcap.Frame) []pcap.Frame {
		edit(t, frames, fs.writeAckMSN2, func(p *roce.Packet, b []byte) {
			if p.BTH.Opcode != roce.RC_ACKNOWLEDGE || p.AETH.MSN != 2 {
				t.Fatalf("frame %d: %v MSN %d", fs.writeAckMSN2, p.BTH.Opcode, p.AETH.MSN)
			}
			b[p.BTHOff+roce.BTHLen+3] ^= 1 // the ACK's MSN: 2 → 3
		})
		return frames
	})
	out, err = exec.Command(bin, "replay", path, "--as", "10.77.0.11").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(out), "    AETH MSN: sent 2, captured 3 (later MSNs that differ by as much are not listed)\n") ||
		!strings.Contains(string(out), "xroce replay: differences found: 1") {
		t.Errorf("%v\n%s", err, out)
	}
	// A connection that cannot be set up (a region larger than replay emulates)
	// is said to be that, not a difference: nothing was compared on it.
	out, err = exec.Command(bin, "replay", s.Path(t, "ib_read_bw.pcap"), "--as", "10.77.0.11", "--qpn", "0x13",
		"--rkey", "0x412", "--vaddr", "0x55f88699b000", "--len", "99999999999999").CombinedOutput()
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.HasSuffix(string(out), "xroce replay: 1 connection of the capture could not be set up (see above); 0 differences in the others\n") ||
		strings.Contains(string(out), "differences found") {
		t.Errorf("setup failure: %v\n%s", err, out)
	}
}

// TestReplayRoundTrip: a server recording its traffic with --pcap, against an
// xroce client, replays with no differences, for each kind of traffic, with
// several QPs, and over both links.
func TestReplayRoundTrip(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	dir := t.TempDir()
	for _, link := range []string{"xdp", "udp"} {
		for _, c := range []struct {
			cmd     string
			size, q int
		}{{"write_bw", 10000, 1}, {"read_bw", 5000, 1}, {"send_bw", 3000, 1}, {"atomic_bw", 8, 1}, {"write_lat", 64, 1}, {"pingpong", 2500, 1},
			// Interleaved QPs: each connection's peer QPN from its own responses (a
			// neighbour's ACK once paired the wrong QPs).
			{"write_bw", 5000, 3}, {"read_bw", 5000, 2}} {
			t.Run(fmt.Sprintf("%s/%s/q%d", link, c.cmd, c.q), func(t *testing.T) {
				file := filepath.Join(dir, fmt.Sprintf("%s-%s-q%d.pcapng", link, c.cmd, c.q))
				args := []string{c.cmd, "--link", link, "-s", fmt.Sprint(c.size), "-n", "300"}
				if c.q > 1 {
					args = slices.Clip(append(args, "-q", fmt.Sprint(c.q))) // each side appends its own
				}
				pair(t, n, append(args, "-d", n.IfB, "--pcap", file), append(args, "-d", n.IfA, n.IPB.String()))
				frames, err := pcap.ReadFile(file)
				must(t, err)
				var rx, tx int
				for _, f := range frames {
					switch f.Dir {
					case pcap.DirRX:
						rx++
					case pcap.DirTX:
						tx++
					}
				}
				if rx == 0 || tx == 0 || rx+tx != len(frames) {
					t.Fatalf("%d frames: %d rx, %d tx", len(frames), rx, tx)
				}
				out, err := exec.Command(bin, "replay", file, "--as", n.IPB.String()).CombinedOutput()
				if err != nil || !strings.HasSuffix(string(out), "replay: no differences\n") || !strings.Contains(string(out), fmt.Sprintf("replaying 10.79.0.2: %d connection", c.q)) {
					t.Fatalf("%v\n%s", err, out)
				}
				if m := regexp.MustCompile(`(\d+) compared`).FindStringSubmatch(string(out)); m == nil || m[1] == "0" {
					t.Errorf("nothing compared:\n%s", out)
				}
				if c.cmd == "write_bw" && c.q == 1 && link == "xdp" {
					// The dump of the recording: every frame with a good ICRC.
					d, err := exec.Command(bin, "dump", file).CombinedOutput()
					if err != nil || !strings.Contains(string(d), fmt.Sprintf("%d RoCE: %d ICRC ok, 0 ICRC BAD", len(frames), len(frames))) {
						t.Errorf("dump: %v\n%s", err, lastLine(string(d)))
					}
				}
				os.Remove(file)
			})
		}
	}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndex(s, "\n")+1:]
}

// TestPcapFlags: the --pcap flags' checks, and no tap without --pcap.
func TestPcapFlags(t *testing.T) {
	for _, c := range []struct {
		o    pcapOptions
		want string
	}{
		{pcapOptions{snaplen: 100}, "need --pcap FILE"},
		{pcapOptions{path: "x", snaplen: -1}, "--pcap-snaplen -1"},
		{pcapOptions{path: "x", rotateSize: "12Q"}, "--pcap-rotate-size"},
		{pcapOptions{path: "x", rotateSize: "0"}, "--pcap-rotate-size"},
		{pcapOptions{path: "x", rotateFiles: 3}, "needs --pcap-rotate-size"},
		{pcapOptions{path: "x", rotateSize: "99999999999G"}, "--pcap-rotate-size"},
	} {
		if _, err := c.o.tapOptions(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
	o, err := pcapOptions{path: "r.pcap", rotateSize: "10M", rotateFiles: 2, snaplen: 128}.tapOptions()
	if err != nil || o.RotateSize != 10<<20 || o.Format != pcap.PCAP || o.Snaplen != 128 || o.RotateFiles != 2 {
		t.Errorf("%+v %v", o, err)
	}
	if n, err := parseSize("512K"); n != 512<<10 || err != nil {
		t.Errorf("512K: %d %v", n, err)
	}
	// Without --pcap the link is handed over as it is: nothing between it and the
	// engine.
	a, _ := transport.NewPipe(transport.PipeConfig{}, transport.PipeConfig{})
	if l, err := withTap(a, "", pcap.TapOptions{}); l != transport.Link(a) || err != nil {
		t.Errorf("without --pcap: %T %v", l, err)
	}
	if l, err := withTap(a, "/no/such/dir/x.pcapng", pcap.TapOptions{}); l != transport.Link(a) || err == nil || !strings.Contains(err.Error(), "--pcap") {
		t.Errorf("unwritable --pcap: %T %v", l, err)
	}
	out, err := exec.Command(bin, "write_bw", "-d", "lo", "--pcap-rotate-files", "2").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "need --pcap FILE") {
		t.Errorf("%v\n%s", err, out)
	}
}

// recordServer runs tool with args between namespaces B (the server, recording
// with --pcap) and A (the client) and returns the recording's path and bytes.
func recordServer(t *testing.T, n *testnet.Net, tool string, args ...string) (string, []byte) {
	t.Helper()
	rec := filepath.Join(t.TempDir(), "rec.pcapng")
	pair(t, n, append(append([]string{tool}, args...), "--pcap", rec, "-d", n.IfB), append(append([]string{tool}, args...), "-d", n.IfA, n.IPB.String()))
	b, err := os.ReadFile(rec)
	must(t, err)
	return rec, b
}

// TestTornRecording: a --pcap recording whose last block is cut short, as xroce
// killed with SIGKILL in the middle of a write leaves it, dumps and replays: the
// whole frames before the torn block, with a note, exit status 0 (replay refused
// the whole file, dump exited 1).
func TestTornRecording(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	rec, b := recordServer(t, n, "write_bw", "-n", "50", "-s", "4096")
	must(t, os.WriteFile(rec, b[:len(b)-37], 0o644)) // into the last block
	const note = "the capture ends in the middle of a record (its recorder was stopped while writing); "
	out, err := exec.Command(bin, "dump", rec).CombinedOutput()
	if err != nil || !strings.Contains(string(out), note) || !strings.Contains(string(out), " whole frames before it are shown\n") {
		t.Errorf("dump: %v\n%s", err, lastLine(string(out)))
	}
	out, err = exec.Command(bin, "replay", rec, "--as", n.IPB.String()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), note) || !strings.Contains(string(out), " whole frames before it, up to "+n.IPB.String()+"'s last answer (") {
		t.Errorf("replay: %v\n%s", err, out)
	}
	// Torn inside the endpoint's first answer: the whole frames are requests only,
	// and replay says there is nothing to compare, and why.
	must(t, os.WriteFile(rec, b[:firstAnswerBlock(t, b, rec, n.IPB)+10], 0o644))
	out, err = exec.Command(bin, "replay", rec, "--as", n.IPB.String()).CombinedOutput()
	want := fmt.Sprintf("requests to %s and no answer of %s's, so nothing can be compared: replay a recording that goes on past the endpoint's first answer\n", n.IPB, n.IPB)
	if err == nil || !strings.Contains(string(out), note) || !strings.HasSuffix(string(out), want) {
		t.Errorf("replay of requests only: %v\n%s", err, out)
	}
}

// TestTornReadRecording: a READ server's recording cut anywhere replays with no
// difference: the READs its client sent ahead of the server's last recorded answer
// (up to 16 outstanding) lost their responses with the torn end, and are left
// out with a note, as is a response torn midway (found by the trial: a cut
// recording of read_bw reported a response "captured: nothing", exit 1).
func TestTornReadRecording(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	_, b := recordServer(t, n, "read_bw", "-n", "300", "-s", "10000")
	cut := filepath.Join(t.TempDir(), "cut.pcapng")
	leftOut := 0
	for _, share := range []int{23, 41, 58, 77, 93} {
		must(t, os.WriteFile(cut, b[:len(b)*share/100], 0o644))
		out, err := exec.Command(bin, "replay", cut, "--as", n.IPB.String()).CombinedOutput()
		if err != nil || !strings.HasSuffix(string(out), "replay: no differences\n") {
			t.Errorf("cut at %d %%: %v\n%s", share, err, out)
		}
		if strings.Contains(string(out), " more requests left out: the recording lost their answers (READs the peer sent ahead of "+n.IPB.String()+"'s last answer)\n") {
			leftOut++
		}
	}
	if leftOut == 0 {
		t.Error("no cut left out a READ sent ahead of the last answer: the test does not exercise trimUnanswered")
	}
}

// firstAnswerBlock returns the offset in the pcapng file b (read from path) of the
// Enhanced Packet Block of the first RoCE frame from as.
func firstAnswerBlock(t *testing.T, b []byte, path string, as netip.Addr) int {
	t.Helper()
	frames, err := pcap.ReadFile(path) // torn at its end by the test
	if err != nil && !errors.Is(err, pcap.ErrTorn) {
		t.Fatal(err)
	}
	k := -1
	for i, f := range frames {
		var p roce.Packet
		if err := p.Decode(f.Data); err == nil && p.SrcAddr() == as {
			k = i
			break
		}
	}
	if k < 1 {
		t.Fatalf("no request before %s's first answer", as)
	}
	for off, epb := 0, 0; off+8 <= len(b); off += int(binary.LittleEndian.Uint32(b[off+4:])) {
		if binary.LittleEndian.Uint32(b[off:]) == 6 { // Enhanced Packet Block
			if epb == k {
				return off
			}
			epb++
		}
	}
	t.Fatalf("no block for frame %d", k+1)
	return 0
}

// TestReplaySnapped: a capture whose snap length cut frames is refused with the
// cause and what to do, not replayed into differences of ICRCs.
func TestReplaySnapped(t *testing.T) {
	captures.Run(t, func(t *testing.T, s captures.Source) {
		frames, err := pcap.ReadFile(s.Path(t, "ib_write_bw.pcap"))
		must(t, err)
		for i := range frames[:20] {
			if len(frames[i].Data) > 64 {
				frames[i].Data = frames[i].Data[:64]
			}
		}
		path := filepath.Join(t.TempDir(), "snapped.pcap")
		writePcap(t, path, frames)
		_, err = runReplayArgs(t, path, "--as", "10.77.0.1")
		if err == nil || !strings.HasPrefix(err.Error(), "the capture's snap length cut ") || !strings.HasSuffix(err.Error(), "frames: replay needs whole frames, to feed them to the engine and check their ICRCs (record without --pcap-snaplen; xroce dump shows the headers of a cut capture)") {
			t.Errorf("%v", err)
		}
	})
}
