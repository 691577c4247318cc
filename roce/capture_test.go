package roce_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/internal/rocetest"
)

func TestCapturesDecodeAndICRC(t *testing.T) {
	frames := rocetest.ReadRoCE(t, append(rocetest.CaptureFiles(t, "rxe"), rocetest.CaptureFiles(t, "rxe-loss")...))
	perFile := map[string]int{}
	var bad []rocetest.Frame
	for _, f := range frames {
		perFile[f.File]++
		switch {
		case f.Err == nil:
		case errors.Is(f.Err, roce.ErrBadICRC):
			bad = append(bad, f)
		default:
			t.Errorf("%s frame %d: %v", f.File, f.Index, f.Err)
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
	if len(bad) != 1 || bad[0].File != "hostpeer_bad_icrc.pcap" {
		t.Fatalf("bad ICRC frames: %+v, want exactly one in hostpeer_bad_icrc.pcap", bad)
	}
	b := bad[0]
	if got := b.Pkt.ComputeICRC(); got == b.Pkt.ICRC {
		t.Errorf("bad frame's ICRC 0x%08x recomputes equal", got)
	}
	t.Logf("%d RoCE frames in %d files; bad ICRC: %s frame %d", len(frames), len(perFile), b.File, b.Index)
}

func TestCapturesReencodeByteExact(t *testing.T) {
	frames := rocetest.ReadRoCE(t, append(rocetest.CaptureFiles(t, "rxe"), rocetest.CaptureFiles(t, "rxe-loss")...))
	buf := make([]byte, 10000)
	for _, f := range frames {
		if f.Err != nil && !errors.Is(f.Err, roce.ErrBadICRC) {
			t.Fatalf("%s frame %d: %v", f.File, f.Index, f.Err)
		}
		orig := f.Pkt.Frame()
		q := f.Pkt // copy: Encode rewrites Payload to alias buf
		q.Payload = append([]byte(nil), f.Pkt.Payload...)
		n, err := q.Encode(buf)
		if err != nil {
			t.Fatalf("%s frame %d: encode: %v", f.File, f.Index, err)
		}
		got := buf[:n]
		if f.Err != nil { // the corrupted frame: all but the ICRC must match
			if !bytes.Equal(got[:n-4], orig[:len(orig)-4]) || bytes.Equal(got[n-4:], orig[len(orig)-4:]) {
				t.Errorf("%s frame %d: re-encoding of the bad-ICRC frame", f.File, f.Index)
			}
			continue
		}
		if !bytes.Equal(got, orig) {
			t.Errorf("%s frame %d: re-encoded\n%x\nwant\n%x", f.File, f.Index, got, orig)
		}
	}
}
