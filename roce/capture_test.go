package roce_test

import (
	"bytes"
	"errors"
	"github.com/xroce/xroce/test/captures"
	"path/filepath"
	"testing"
	"time"

	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/roce"
)

func pcapDir(t testing.TB) string { return captures.Dir(t) }

func captureFiles(t testing.TB, sub string) []string {
	files, err := filepath.Glob(filepath.Join(pcapDir(t), sub, "*.pcap"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no captures in %s: %v", sub, err)
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

func TestCapturesDecodeAndICRC(t *testing.T) {
	frames := readRoCE(t, append(captureFiles(t, "rxe"), captureFiles(t, "rxe-loss")...))
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
	// Frame counts from the captures' README and tshark's "udp.dstport==4791".
	want := map[string]int{
		"hostpeer_bad_icrc.pcap": 9, "hostpeer_rc_pingpong.pcap": 20, "hostpeer_rc_pingpong_s2500.pcap": 24,
		"ib_atomic_bw.pcap": 10, "ib_read_bw.pcap": 30, "ib_send_bw.pcap": 30, "ib_write_bw.pcap": 30,
		"ib_write_bw_rdmacm.pcap": 178, "ib_write_bw_tclass106.pcap": 10, "ib_write_lat.pcap": 60,
		"ibv_rc_pingpong.pcap": 60, "loss5_write.pcap": 659, "loss5_read.pcap": 480, "loss5_send.pcap": 821,
	}
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

func TestCapturesReencodeByteExact(t *testing.T) {
	frames := readRoCE(t, append(captureFiles(t, "rxe"), captureFiles(t, "rxe-loss")...))
	buf := make([]byte, 10000)
	for _, f := range frames {
		if f.err != nil && !errors.Is(f.err, roce.ErrBadICRC) {
			t.Fatalf("%s frame %d: %v", f.file, f.index, f.err)
		}
		orig := f.pkt.Frame()
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
}
