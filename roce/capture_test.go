package roce_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/internal/rocetest"
	"github.com/xroce/xroce/test/captures"
)

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
	frames := rocetest.ReadRoCE(t, append(s.Files(t, "rxe"), s.Files(t, "rxe-loss")...))
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
	want := roceFrameCounts[s.Name]
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
	frames := rocetest.ReadRoCE(t, append(s.Files(t, "rxe"), s.Files(t, "rxe-loss")...))
	buf := make([]byte, 10000)
	partial := 0
	for _, f := range frames {
		if f.Err != nil && !errors.Is(f.Err, roce.ErrBadICRC) {
			t.Fatalf("%s frame %d: %v", f.File, f.Index, f.Err)
		}
		orig, normalised := rocetest.EncodedForm(t, &f)
		if normalised {
			partial++
		}
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
	if partial != partialChecksums[s.Name] {
		t.Errorf("%d frames with a kernel socket's partial UDP checksum, want %d", partial, partialChecksums[s.Name])
	}
}
