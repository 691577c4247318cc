package roce_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/test/captures"
)

// allCaptureFiles returns the captures under sub ("rxe" or "rxe-loss") of every
// source: the repository's and, when present, the shared ones.
func allCaptureFiles(t testing.TB, sub string) []string {
	var files []string
	for _, s := range captures.Sources(t) {
		files = append(files, s.Files(t, sub)...)
	}
	return files
}

// roceFrame is a decoded RoCE frame of a capture.
type roceFrame struct {
	file  string
	index int
	time  time.Time
	data  []byte
	pkt   roce.Packet
	err   error
}

// readRoCE decodes every UDP/4791 frame of the capture files.
func readRoCE(t testing.TB, files []string) []roceFrame {
	var out []roceFrame
	for _, file := range files {
		frames, err := pcap.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, fr := range frames {
			var p roce.Packet
			err := p.Decode(fr.Data)
			if errors.Is(err, roce.ErrNotRoCE) {
				continue
			}
			out = append(out, roceFrame{filepath.Base(file), fr.Index, fr.Time, fr.Data, p, err})
		}
	}
	return out
}

// roceFrameCounts is each source's number of RoCE frames (UDP/4791) per capture:
// tshark -r FILE -Y udp.dstport==4791 | wc -l.
var roceFrameCounts = map[string]map[string]int{
	captures.Shared: {
		"hostpeer_bad_icrc.pcap": 9, "hostpeer_rc_pingpong.pcap": 20, "hostpeer_rc_pingpong_s2500.pcap": 24,
		"ib_atomic_bw.pcap": 10, "ib_read_bw.pcap": 30, "ib_send_bw.pcap": 30, "ib_write_bw.pcap": 30,
		"ib_write_bw_rdmacm.pcap": 178, "ib_write_bw_tclass106.pcap": 10, "ib_write_lat.pcap": 60,
		"ibv_rc_pingpong.pcap": 60, "loss5_write.pcap": 659, "loss5_read.pcap": 480, "loss5_send.pcap": 821,
	},
	captures.Testdata: {
		"hostpeer_bad_icrc.pcap": 9, "hostpeer_rc_pingpong.pcap": 20, "hostpeer_rc_pingpong_s2500.pcap": 24,
		"ib_atomic_bw.pcap": 10, "ib_read_bw.pcap": 30, "ib_send_bw.pcap": 30, "ib_write_bw.pcap": 30,
		"ib_write_bw_rdmacm.pcap": 180, "ib_write_bw_tclass106.pcap": 10, "ib_write_lat.pcap": 60,
		"ibv_rc_pingpong.pcap": 60, "loss5_write.pcap": 287, "loss5_read.pcap": 596, "loss5_send.pcap": 932,
	},
}

// TestCapturesDecodeAndICRC: every RoCE frame of every capture decodes with a good
// ICRC, except one frame of hostpeer_bad_icrc.pcap whose ICRC the host peer's
// nftables rule (or, in the shared set, the host peer itself) corrupted.
func TestCapturesDecodeAndICRC(t *testing.T) {
	captures.Run(t, decodeAndICRC)
}

func decodeAndICRC(t *testing.T, s captures.Source) {
	frames := readRoCE(t, append(s.Files(t, "rxe"), s.Files(t, "rxe-loss")...))
	perFile := map[string]int{}
	var bad []roceFrame
	for _, f := range frames {
		perFile[f.file]++
		switch {
		case f.err == nil:
		case errors.Is(f.err, roce.ErrBadICRC):
			bad = append(bad, f)
		default:
			t.Errorf("%s frame %d: %v", f.file, f.index, f.err)
		}
	}
	want := roceFrameCounts[s.Name]
	for file, n := range want {
		if perFile[file] != n {
			t.Errorf("%s: %d RoCE frames, want %d", file, perFile[file], n)
		}
	}
	if len(perFile) != len(want) {
		t.Errorf("RoCE frames found in %d files, want %d: %v", len(perFile), len(want), perFile)
	}
	if len(bad) != 1 || bad[0].file != "hostpeer_bad_icrc.pcap" {
		t.Fatalf("bad ICRC frames: %+v, want exactly one in hostpeer_bad_icrc.pcap", bad)
	}
	b := bad[0]
	if got := b.pkt.ComputeICRC(); got == b.pkt.ICRC {
		t.Errorf("bad frame's ICRC 0x%08x recomputes equal", got)
	}
	t.Logf("%d RoCE frames in %d files; bad ICRC: %s frame %d", len(frames), len(perFile), b.file, b.index)
}

// TestCapturesReencodeByteExact: every captured RoCE frame, decoded and encoded
// again, gives the captured bytes (the corrupted frame: all but its ICRC).
func TestCapturesReencodeByteExact(t *testing.T) {
	captures.Run(t, reencodeByteExact)
}

// partialChecksums is, per source, how many frames carry the partial UDP checksum
// of a kernel UDP socket (encodedForm): the host peer's frames in testdata's
// hostpeer_ captures.
var partialChecksums = map[string]int{captures.Shared: 0, captures.Testdata: 27}

func reencodeByteExact(t *testing.T, s captures.Source) {
	frames := readRoCE(t, append(s.Files(t, "rxe"), s.Files(t, "rxe-loss")...))
	buf := make([]byte, 10000)
	partial := 0
	for _, f := range frames {
		if f.err != nil && !errors.Is(f.err, roce.ErrBadICRC) {
			t.Fatalf("%s frame %d: %v", f.file, f.index, f.err)
		}
		orig, normalised := encodedForm(t, &f)
		if normalised {
			partial++
		}
		q := f.pkt // copy: Encode rewrites Payload to alias buf
		q.Payload = append([]byte(nil), f.pkt.Payload...)
		n, err := q.Encode(buf)
		if err != nil {
			t.Fatalf("%s frame %d: encode: %v", f.file, f.index, err)
		}
		got := buf[:n]
		if f.err != nil { // the corrupted frame: all but the ICRC must match
			if !bytes.Equal(got[:n-4], orig[:len(orig)-4]) || bytes.Equal(got[n-4:], orig[len(orig)-4:]) {
				t.Errorf("%s frame %d: re-encoding of the bad-ICRC frame", f.file, f.index)
			}
			continue
		}
		if !bytes.Equal(got, orig) {
			t.Errorf("%s frame %d: re-encoded\n%x\nwant\n%x", f.file, f.index, got, orig)
		}
	}
	if partial != partialChecksums[s.Name] {
		t.Errorf("%d frames with a kernel socket's partial UDP checksum, want %d", partial, partialChecksums[s.Name])
	}
}

// encodedForm returns what Encode writes for a captured frame: the frame itself,
// except for a frame of the host peer (10.77.0.1) whose IPv4 UDP checksum is the
// partial sum a kernel UDP socket leaves for TX offload (the one's-complement sum
// of the pseudo-header: addresses, protocol 17, UDP length), as the frames that
// xroce's kernel UDP link sent in testdata's hostpeer_ captures carry it over
// veth. The ICRC does not cover the UDP checksum, and Encode writes 0 there for
// IPv4 as rdma_rxe does: that frame comes back with the checksum 0, and true says
// so. Any other non-zero checksum is left as it is, and fails the comparison.
func encodedForm(t *testing.T, f *roceFrame) ([]byte, bool) {
	t.Helper()
	p := &f.pkt
	b := p.Frame()
	if p.IsIPv6 || p.UDP.Checksum == 0 || p.SrcAddr().String() != hostPeer {
		return b, false
	}
	src, dst := p.SrcAddr().As4(), p.DstAddr().As4()
	sum := uint32(17) + uint32(binary.BigEndian.Uint16(b[p.L4Off+4:]))
	for i := 0; i < 4; i += 2 {
		sum += uint32(src[i])<<8 | uint32(src[i+1])
		sum += uint32(dst[i])<<8 | uint32(dst[i+1])
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	if p.UDP.Checksum != uint16(sum) {
		t.Errorf("%s frame %d: UDP checksum 0x%04x, neither 0 nor the pseudo-header's partial sum 0x%04x", f.file, f.index, p.UDP.Checksum, sum)
		return b, false
	}
	b = append([]byte(nil), b...)
	b[p.L4Off+6], b[p.L4Off+7] = 0, 0
	return b, true
}
