package main

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/test/captures"
	"github.com/xroce/xroce/transport"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		must(t, os.MkdirAll(filepath.Dir(path), 0o755))
		must(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run %s -update to create it)", err, t.Name())
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(gl) || i < len(wl); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s differs from line %d:\n got: %s\nwant: %s", path, i+1, g, w)
			}
		}
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func runDumpArgs(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var b bytes.Buffer
	err := dump(args, &b)
	return b.String(), err
}

// TestDumpGolden: every rdma_rxe capture of each source, one line per RoCE frame,
// each with ICRC ok except the corrupted frame of hostpeer_bad_icrc.pcap. The golden
// files are testdata/dump/SOURCE/.
func TestDumpGolden(t *testing.T) {
	captures.Run(t, dumpGolden)
}

func dumpGolden(t *testing.T, s captures.Source) {
	names := s.Files(t, "rxe")
	if len(names) != 11 {
		t.Fatalf("%d captures in %s, want the 11 of its README", len(names), filepath.Join(s.Dir, "rxe"))
	}
	for _, path := range names {
		name := filepath.Base(path)
		t.Run(name, func(t *testing.T) {
			out, err := runDumpArgs(t, path)
			must(t, err)
			golden(t, filepath.Join("dump", s.Name, strings.TrimSuffix(name, ".pcap")+".txt"), out)
			bad := strings.Count(out, " ICRC BAD (")
			ok := strings.Count(out, " ICRC ok\n")
			want := 0
			if name == "hostpeer_bad_icrc.pcap" {
				want = 1
				if line := factsOf(t, s).badICRCLine; !strings.Contains(out, line) {
					t.Errorf("the corrupted frame not reported as Wireshark shows it:\n%s", line)
				}
			}
			lines := strings.Count(out, "\n") - 1
			if bad != want || ok+bad != lines || strings.Contains(out, "malformed RoCE") {
				t.Errorf("%d BAD (want %d), %d ok of %d lines", bad, want, ok, lines)
			}
		})
	}
}

// TestDumpFilters: by QPN and opcode (exact, prefix, number), absolute times. In
// both sources the second run of ib_read_bw uses QPN 0x14, and ib_write_bw's runs
// 0x11 and 0x12.
func TestDumpFilters(t *testing.T) {
	captures.Run(t, func(t *testing.T, s captures.Source) {
		out, err := runDumpArgs(t, "--qpn", "0x14", "--opcode", "RDMA_READ_RESPONSE,RC_RDMA_READ_REQUEST", s.Path(t, "ib_read_bw.pcap"))
		must(t, err)
		golden(t, "dump/"+s.Name+"/filter_read_qpn14.txt", out)
		out, err = runDumpArgs(t, "--opcode", "0x11", "--qpn", "17,0x12", "--abs", s.Path(t, "ib_write_bw.pcap"))
		must(t, err)
		golden(t, "dump/"+s.Name+"/filter_ack_abs.txt", out)
	})
	for _, bad := range [][]string{{"--qpn", "0x1000000"}, {"--opcode", "NOPE"}, {"--qpn", "x"}, {}, {"a", "b"}} {
		if _, err := runDumpArgs(t, bad...); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := runDumpArgs(t, "/no/such/file.pcap"); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
}

// writePcap writes frames as a classic pcap file.
func writePcap(t *testing.T, path string, frames []pcap.Frame) {
	t.Helper()
	f, err := os.Create(path)
	must(t, err)
	defer f.Close()
	w := pcapgo.NewWriterNanos(f)
	must(t, w.WriteFileHeader(65535, layers.LinkTypeEthernet))
	for _, fr := range frames {
		l := fr.Len
		if l < len(fr.Data) {
			l = len(fr.Data)
		}
		must(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: fr.Time, CaptureLength: len(fr.Data), Length: l}, fr.Data))
	}
}

// TestDumpMalformed: a RoCE frame snapped after its headers is shown with its
// ICRC not checked, one snapped inside them is counted in a note, a garbage
// UDP/4791 datagram is reported as malformed, non-RoCE frames are skipped, and a
// capture that ends mid-record prints what it holds and fails.
func TestDumpMalformed(t *testing.T) {
	captures.Run(t, dumpMalformed)
}

func dumpMalformed(t *testing.T, s captures.Source) {
	frames, err := pcap.ReadFile(s.Path(t, "hostpeer_bad_icrc.pcap"))
	must(t, err)
	good := frames[11] // frame 12, in both sources rdma_rxe's first SEND_ONLY; frame 13 is its ACK
	snapped := good
	snapped.Data = good.Data[:60]
	cutHdrs := good
	cutHdrs.Data = good.Data[:40]
	cutBTH := good // inside the BTH: UDP to port 4791, its transport headers cut
	cutBTH.Data = good.Data[:50]
	garbage := good
	garbage.Data = append([]byte(nil), good.Data[:42]...)
	garbage.Data = append(garbage.Data, 0x77, 0x40, 0xFF, 0xFF, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
	binary.BigEndian.PutUint16(garbage.Data[16:], uint16(len(garbage.Data)-14)) // IP total length
	binary.BigEndian.PutUint16(garbage.Data[38:], uint16(len(garbage.Data)-34)) // UDP length
	garbage.Len = len(garbage.Data)
	dir := t.TempDir()
	path := filepath.Join(dir, "m.pcap")
	writePcap(t, path, []pcap.Frame{frames[0], good, snapped, cutHdrs, cutBTH, garbage, frames[12]})
	out, err := runDumpArgs(t, path)
	must(t, err)
	golden(t, "dump/"+s.Name+"/malformed.txt", out)

	b, err := os.ReadFile(path)
	must(t, err)
	must(t, os.WriteFile(path, b[:len(b)-20], 0o644))
	// A capture whose last record is cut short (its recorder killed while it
	// wrote) shows the frames before it, says so, and is no error.
	out, err = runDumpArgs(t, path)
	if err != nil || !strings.HasSuffix(out, "6 frames; 4 RoCE: 1 ICRC ok, 0 ICRC BAD, 1 malformed, 1 cut short (ICRC not checked), 1 cut in their headers\n"+
		"note: the capture's snap length cut 1 RoCE frame short: the headers are shown; the rest of the payload and the ICRC were not recorded\n"+
		"note: the capture's snap length cut 1 frame inside the IP or UDP header, so whether they are RoCE cannot be told: record with a snap length of at least 106 bytes (--pcap-snaplen) to keep every RoCE header\n"+
		"note: the capture's snap length cut 1 RoCE frame inside the transport headers (a RETH, an AtomicETH): record with a snap length of at least 106 bytes (--pcap-snaplen) to keep every RoCE header\n"+
		"note: pcap: "+path+": frame 7: unexpected EOF: the capture ends in the middle of a record (its recorder was stopped while writing); the 6 whole frames before it are shown\n") {
		t.Errorf("truncated capture: %v\n%q", err, out)
	}
	must(t, os.WriteFile(path, []byte("not a capture at all"), 0o644))
	if _, err := runDumpArgs(t, path); err == nil {
		t.Error("a text file dumped")
	}
}

// TestDumpTapCapture: a capture written by the tap shows each frame's direction.
func TestDumpTapCapture(t *testing.T) {
	captures.Run(t, dumpTapCapture)
}

func dumpTapCapture(t *testing.T, s captures.Source) {
	fs := factsOf(t, s)
	frames, err := pcap.ReadFile(s.Path(t, "ib_read_bw.pcap"))
	must(t, err)
	a, b := transport.NewPipe(transport.PipeConfig{Addrs: []netip.Addr{netip.MustParseAddr("10.77.0.11")}}, transport.PipeConfig{})
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "tap.pcapng")
	tap, err := pcap.NewTap(a, path, pcap.TapOptions{Now: func() time.Time { now = now.Add(time.Millisecond); return now }})
	must(t, err)
	for _, i := range fs.tapRequests { // READ requests arrive together
		_, err := b.Send([][]byte{frames[i].Data})
		must(t, err)
	}
	rx := make([][]byte, 8)
	n, err := tap.Recv(rx)
	if n != 3 || err != nil {
		t.Fatalf("recv %d %v", n, err)
	}
	for _, i := range fs.tapResponses { // the responses, one Send each
		_, err := tap.Send([][]byte{frames[i].Data})
		must(t, err)
	}
	must(t, tap.Close())
	out, err := runDumpArgs(t, path)
	must(t, err)
	golden(t, "dump/"+s.Name+"/tap.txt", out)
}

// TestDumpBinary: the command through the binary: exit status and output.
func TestDumpBinary(t *testing.T) {
	out, err := exec.Command(bin, "dump", "--opcode", "ATOMIC_ACKNOWLEDGE", captures.Repo(t).Path(t, "ib_atomic_bw.pcap")).CombinedOutput()
	if err != nil || strings.Count(string(out), "RC_ATOMIC_ACKNOWLEDGE") != 5 {
		t.Errorf("%v\n%s", err, out)
	}
	out, err = exec.Command(bin, "dump").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "usage: xroce dump") {
		t.Errorf("no file: %v\n%s", err, out)
	}
}

// TestDumpTrafficClassMigReq: dump shows the IP traffic class with its DSCP and
// ECN codepoint (CE: a congested switch marked the frame) and the BTH MigReq bit.
func TestDumpTrafficClassMigReq(t *testing.T) {
	frames, err := pcap.ReadFile(captures.Repo(t).Path(t, "ib_write_bw.pcap"))
	must(t, err)
	var p roce.Packet
	var fr pcap.Frame
	for _, f := range frames {
		if p.Decode(f.Data) == nil && p.BTH.Opcode == roce.RC_RDMA_WRITE_ONLY {
			fr = f
			break
		}
	}
	if fr.Data == nil {
		t.Fatal("no RDMA_WRITE_ONLY frame in the capture")
	}
	p.IPv4.TOS = 0x6b // DSCP 26, ECN CE
	p.BTH.MigReq = true
	buf := make([]byte, p.Len())
	n, err := p.Encode(buf)
	must(t, err)
	fr.Data, fr.Len, fr.Index = buf[:n], n, 1
	path := filepath.Join(t.TempDir(), "ce.pcap")
	writePcap(t, path, []pcap.Frame{fr})
	out, err := runDumpArgs(t, path)
	must(t, err)
	want := fmt.Sprintf(" → %s TOS 0x6b (DSCP 26, ECN CE) RC_RDMA_WRITE_ONLY QPN 0x%06x PSN %d AckReq MigReq RETH ", p.DstAddr().String()+":4791", p.BTH.DestQP, p.BTH.PSN)
	if !strings.Contains(out, want) || !strings.Contains(out, " ICRC ok\n") {
		t.Errorf("no %q with a good ICRC in\n%s", want, out)
	}
}

// TestDumpNoTimestamp: a frame without a timestamp (a pcapng Simple Packet Block)
// shows "-" in the time column, relative or absolute, and the others count from
// the first frame that has one (it showed -9223372036.854776, or year 1, and made
// every later frame 9223372036.854776 when it came first).
func TestDumpNoTimestamp(t *testing.T) {
	frames, err := pcap.ReadFile(captures.Repo(t).Path(t, "ib_write_bw.pcap"))
	must(t, err)
	var roceFrames []pcap.Frame
	var p roce.Packet
	for _, f := range frames {
		if p.Decode(f.Data) == nil && len(roceFrames) < 2 {
			roceFrames = append(roceFrames, f)
		}
	}
	if len(roceFrames) != 2 {
		t.Fatal("no two RoCE frames in the capture")
	}
	roceFrames[0].Time = time.Time{}
	for _, abs := range []bool{false, true} {
		var b strings.Builder
		writeDump(&b, roceFrames, dumpFilter{}, abs)
		lines := strings.Split(b.String(), "\n")
		first, second := fmt.Sprintf("%5d %11s ", roceFrames[0].Index, "-"), fmt.Sprintf("%5d    0.000000 ", roceFrames[1].Index)
		if abs {
			first = fmt.Sprintf("%5d %30s ", roceFrames[0].Index, "-")
			second = fmt.Sprintf("%5d %s ", roceFrames[1].Index, roceFrames[1].Time.UTC().Format("2006-01-02T15:04:05.000000000Z"))
		}
		if len(lines) < 2 || !strings.HasPrefix(lines[0], first) || !strings.HasPrefix(lines[1], second) {
			t.Errorf("abs %v:\n%s\nwant lines starting %q and %q", abs, b.String(), first, second)
		}
	}
}
