package pcap_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/test/captures"
)

func TestReadFile(t *testing.T) {
	captures.Run(t, func(t *testing.T, s captures.Source) {
		frames, err := pcap.ReadFile(capture(t, s, "ib_write_bw.pcap"))
		if err != nil {
			t.Fatal(err)
		}
		// tshark -r ib_write_bw.pcap | wc -l
		fs := factsOf(t, s)
		if len(frames) != fs.writeFrames {
			t.Fatalf("%d frames, want %d", len(frames), fs.writeFrames)
		}
		// The first RDMA_WRITE_FIRST: 1098 bytes, BTH opcode 0x06.
		f := frames[fs.writeFirst-1]
		if f.Index != fs.writeFirst || len(f.Data) != 1098 || f.Len != 1098 || f.Data[42] != 0x06 {
			t.Errorf("frame %d: index %d, %d bytes, opcode 0x%02x", fs.writeFirst, f.Index, len(f.Data), f.Data[42])
		}
		for _, g := range frames[:fs.writeFirst-1] {
			if len(g.Data) > 42 && g.Data[42] == 0x06 && g.Data[23] == 17 {
				t.Errorf("frame %d: an earlier RDMA_WRITE_FIRST", g.Index)
			}
		}
	})
}

// TestReadPcapng writes the same frames as pcapng and reads them back.
func TestReadPcapng(t *testing.T) {
	captures.Run(t, readPcapng)
}

func readPcapng(t *testing.T, s captures.Source) {
	frames, err := pcap.ReadFile(capture(t, s, "ib_atomic_bw.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := pcapgo.NewNgWriter(&buf, layers.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frames {
		ci := gopacket.CaptureInfo{Timestamp: f.Time, CaptureLength: len(f.Data), Length: f.Len}
		if err := w.WritePacket(ci, f.Data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	back, err := pcap.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(frames) {
		t.Fatalf("%d frames back, want %d", len(back), len(frames))
	}
	for i := range back {
		if !bytes.Equal(back[i].Data, frames[i].Data) || !back[i].Time.Equal(frames[i].Time) {
			t.Fatalf("frame %d differs", i+1)
		}
	}
}

func TestReadRefusesBadInput(t *testing.T) {
	hdr := func(snaplen, link uint32) []byte {
		b := make([]byte, 24)
		binary.LittleEndian.PutUint32(b[0:], 0xa1b2c3d4)
		binary.LittleEndian.PutUint16(b[4:], 2)
		binary.LittleEndian.PutUint16(b[6:], 4)
		binary.LittleEndian.PutUint32(b[16:], snaplen)
		binary.LittleEndian.PutUint32(b[20:], link)
		return b
	}
	rec := make([]byte, 16)
	binary.LittleEndian.PutUint32(rec[8:], 1<<30)
	binary.LittleEndian.PutUint32(rec[12:], 1<<30)
	for _, c := range []struct {
		name, in, want string
	}{
		{"empty", "", "not a capture file: the file is empty"},
		{"short", "\xd4\xc3\xb2\xa1\x02\x00\x04\x00\x00\x00", "not a capture file: 10 bytes, too short for the 24-byte pcap header"},
		{"not a capture", "hello world, this is text", "not a capture file: neither pcap nor pcapng (its first bytes are 68 65 6c 6c)"},
		{"huge snaplen, huge record", string(append(hdr(1<<30, 1), rec...)), "capture length exceeds snap length: 1073741824 > 1048576"},
		{"not Ethernet", string(hdr(65535, 105)), "link type 105 (802.11): want Ethernet, Linux cooked (SLL, SLL2) or raw IP"},
		{"record past snaplen", string(append(hdr(65535, 1), rec...)), "exceeds snap length"},
	} {
		_, err := pcap.Read(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestReadLinkTypes: ib_write_bw's capture rewritten as tcpdump -i any writes it
// (Linux cooked, SLL and SLL2) and as raw IP reads back as Ethernet frames whose
// IP packets are the original's, every RoCE frame with its ICRC valid, the sender's
// MAC kept where SLL carries it.
func TestReadLinkTypes(t *testing.T) {
	captures.Run(t, func(t *testing.T, s captures.Source) {
		orig, err := pcap.ReadFile(capture(t, s, "ib_write_bw.pcap"))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			name   string
			link   uint32
			header func(eth []byte) []byte
			srcMAC bool
		}{
			{"SLL", 113, func(e []byte) []byte {
				h := make([]byte, 16)
				binary.BigEndian.PutUint16(h[2:], 1) // ARPHRD_ETHER
				binary.BigEndian.PutUint16(h[4:], 6)
				copy(h[6:], e[6:12])
				copy(h[14:], e[12:14])
				return h
			}, true},
			{"SLL2", 276, func(e []byte) []byte {
				h := make([]byte, 20)
				copy(h[0:], e[12:14])
				binary.BigEndian.PutUint32(h[4:], 7) // ifindex
				binary.BigEndian.PutUint16(h[8:], 1) // ARPHRD_ETHER
				h[11] = 6
				copy(h[12:], e[6:12])
				return h
			}, true},
			{"raw IP", 101, func([]byte) []byte { return nil }, false},
		} {
			var b bytes.Buffer
			hdr := make([]byte, 24)
			binary.LittleEndian.PutUint32(hdr[0:], 0xa1b2c3d4)
			binary.LittleEndian.PutUint16(hdr[4:], 2)
			binary.LittleEndian.PutUint16(hdr[6:], 4)
			binary.LittleEndian.PutUint32(hdr[16:], 65535)
			binary.LittleEndian.PutUint32(hdr[20:], c.link)
			b.Write(hdr)
			w := pcapgo.NewWriter(&b)
			var want []pcap.Frame // what the capture holds: raw IP holds only IP packets
			for _, f := range orig {
				if et := binary.BigEndian.Uint16(f.Data[12:14]); c.link == 101 && et != 0x0800 && et != 0x86DD {
					continue
				}
				want = append(want, f)
				d := append(c.header(f.Data), f.Data[14:]...)
				if err := w.WritePacket(gopacket.CaptureInfo{Timestamp: f.Time, CaptureLength: len(d), Length: len(d)}, d); err != nil {
					t.Fatal(err)
				}
			}
			got, err := pcap.Read(&b)
			if err != nil || len(got) != len(want) {
				t.Fatalf("%s: %d frames of %d: %v", c.name, len(got), len(want), err)
			}
			ok, wantOK := 0, 0
			for i, f := range got {
				var p roce.Packet
				if !bytes.Equal(f.Data[12:], want[i].Data[12:]) || f.Len != len(f.Data) || bytes.Equal(f.Data[6:12], want[i].Data[6:12]) != c.srcMAC {
					t.Fatalf("%s: frame %d differs:\n% x\n% x", c.name, i+1, f.Data[:20], want[i].Data[:20])
				}
				if p.Decode(f.Data) == nil {
					ok++
				}
				if p.Decode(want[i].Data) == nil {
					wantOK++
				}
			}
			if ok != wantOK || ok < 20 {
				t.Errorf("%s: %d RoCE frames with a valid ICRC, the Ethernet capture %d", c.name, ok, wantOK)
			}
		}
	})
}

// TestReadLenientPcap: what Wireshark reads, Read reads too: a header snapshot
// length of 0 or 0xFFFFFFFF, and a record whose captured length exceeds its
// original length (which then becomes the captured one).
func TestReadLenientPcap(t *testing.T) {
	for _, snaplen := range []uint32{0, 0xFFFFFFFF, 65535} {
		for _, orig := range []uint32{4, 60, 2} {
			b := make([]byte, 24+16+4)
			binary.LittleEndian.PutUint32(b[0:], 0xa1b2c3d4)
			binary.LittleEndian.PutUint16(b[4:], 2)
			binary.LittleEndian.PutUint16(b[6:], 4)
			binary.LittleEndian.PutUint32(b[16:], snaplen)
			binary.LittleEndian.PutUint32(b[20:], 1)
			binary.LittleEndian.PutUint32(b[24+8:], 4)
			binary.LittleEndian.PutUint32(b[24+12:], orig)
			copy(b[40:], "\x01\x02\x03\x04")
			frames, err := pcap.Read(bytes.NewReader(b))
			if err != nil || len(frames) != 1 || string(frames[0].Data) != "\x01\x02\x03\x04" || frames[0].Len != int(max(orig, 4)) {
				t.Errorf("snaplen %#x, original length %d: %v %+v", snaplen, orig, err, frames)
			}
		}
	}
}

// FuzzRead: no input makes Read panic; what it returns is consistent.
func FuzzRead(f *testing.F) {
	for _, s := range captures.Sources(f) {
		for _, name := range []string{"hostpeer_bad_icrc.pcap", "ib_atomic_bw.pcap"} {
			b, err := os.ReadFile(capture(f, s, name))
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b[:min(len(b), 600)])
		}
	}
	var ng bytes.Buffer
	w, _ := pcapgo.NewNgWriter(&ng, layers.LinkTypeEthernet)
	_ = w.WritePacket(gopacket.CaptureInfo{CaptureLength: 4, Length: 4}, []byte{1, 2, 3, 4})
	_ = w.Flush()
	f.Add(ng.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		frames, _ := pcap.Read(bytes.NewReader(b))
		for i, fr := range frames {
			if fr.Index != i+1 {
				t.Fatalf("frame %d has index %d", i+1, fr.Index)
			}
		}
	})
}

// TestReadMalformedPcapng: a truncated file, a packet block claiming more bytes than
// it holds, and a timestamp resolution that panics inside pcapgo give the frames
// before the damage and an error, never a panic or a huge allocation.
func TestReadMalformedPcapng(t *testing.T) {
	captures.Run(t, readMalformedPcapng)
}

func readMalformedPcapng(t *testing.T, s captures.Source) {
	frames, err := pcap.ReadFile(capture(t, s, "ib_atomic_bw.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := pcapgo.NewNgWriter(&buf, layers.LinkTypeEthernet)
	if err != nil {
		t.Fatal(err)
	}
	var offs []int // where each packet block starts
	for _, f := range frames {
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		offs = append(offs, buf.Len())
		ci := gopacket.CaptureInfo{Timestamp: f.Time, CaptureLength: len(f.Data), Length: f.Len}
		if err := w.WritePacket(ci, f.Data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	good := buf.Bytes()

	cut := good[:offs[10]+30]
	back, err := pcap.Read(bytes.NewReader(cut))
	if len(back) != 10 || !errors.Is(err, pcap.ErrMalformed) || !strings.Contains(err.Error(), "after frame 10") {
		t.Errorf("truncated: %d frames, %v", len(back), err)
	}

	huge := append([]byte(nil), good...)
	binary.LittleEndian.PutUint32(huge[offs[5]+20:], 0x7FFFFFF0) // frame 6's captured length
	back, err = pcap.Read(bytes.NewReader(huge))
	if len(back) != 5 || !errors.Is(err, pcap.ErrMalformed) || !strings.Contains(err.Error(), "claims 2147483632 captured bytes") {
		t.Errorf("huge captured length: %d frames, %v", len(back), err)
	}

	// A well-formed interface block with if_tsresol 0xC0 (2^-64 s): pcapgo computes
	// 1<<64 = 0 and divides by it.
	le := binary.LittleEndian
	shb := le.AppendUint32(le.AppendUint32(nil, 0x0A0D0D0A), 28)
	shb = le.AppendUint32(shb, 0x1A2B3C4D)
	shb = append(shb, 1, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF)
	shb = le.AppendUint32(shb, 28)
	idb := le.AppendUint32(le.AppendUint32(nil, 1), 32)
	idb = append(idb, 1, 0, 0, 0, 0, 0, 0, 0) // Ethernet, snaplen 0
	idb = append(idb, 9, 0, 1, 0, 0xC0, 0, 0, 0, 0, 0, 0, 0)
	idb = le.AppendUint32(idb, 32)
	if _, err := pcap.Read(bytes.NewReader(append(shb, idb...))); !errors.Is(err, pcap.ErrMalformed) ||
		!strings.HasSuffix(err.Error(), "interface description at offset 28: its timestamp resolution (if_tsresol 0xc0: 2^-64 s) is finer than this reader takes (10^-9 or 2^-30 s)") {
		t.Errorf("zero resolution: %v", err)
	}

	// An interface block whose option runs past the block: pcapgo skipped the
	// block, and the file's frames were read as none, without an error.
	cutOpt := le.AppendUint32(le.AppendUint32(nil, 1), 32)
	cutOpt = append(cutOpt, 1, 0, 0, 0, 0, 0, 0, 0)
	cutOpt = append(cutOpt, 2, 0, 0xF0, 0xFF, 'a', 'b', 'c', 'd', 0, 0, 0, 0)
	cutOpt = le.AppendUint32(cutOpt, 32)
	if _, err := pcap.Read(bytes.NewReader(append(shb, cutOpt...))); !errors.Is(err, pcap.ErrMalformed) ||
		!strings.HasSuffix(err.Error(), "interface description at offset 28: option 2 declares 65520 bytes and 8 remain in the block") {
		t.Errorf("cut interface option: %v", err)
	}
	// The same in the section header: pcapgo said only "EOF".
	shbCut := le.AppendUint32(le.AppendUint32(nil, 0x0A0D0D0A), 36)
	shbCut = le.AppendUint32(shbCut, 0x1A2B3C4D)
	shbCut = append(shbCut, 1, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF)
	shbCut = append(shbCut, 4, 0, 0x40, 0, 'x', 'r', 'o', 'c')
	shbCut = le.AppendUint32(shbCut, 36)
	if _, err := pcap.Read(bytes.NewReader(shbCut)); !errors.Is(err, pcap.ErrMalformed) ||
		!strings.HasSuffix(err.Error(), "section header at offset 0: option 4 declares 64 bytes and 4 remain in the block") {
		t.Errorf("cut section header option: %v", err)
	}

	// A block in the middle of the file that declares gigabytes is corrupt, not
	// the torn end of a recording: the frames before it come with ErrMalformed
	// alone.
	vast := append([]byte(nil), good...)
	binary.LittleEndian.PutUint32(vast[offs[5]+4:], 0xFFFFFFF0)
	back, err = pcap.Read(bytes.NewReader(vast))
	if len(back) != 5 || !errors.Is(err, pcap.ErrMalformed) || errors.Is(err, pcap.ErrTorn) ||
		!strings.Contains(err.Error(), "declares 4294967280 bytes, more than a block of a frame of at most 1048576 bytes holds") {
		t.Errorf("vast block: %d frames, %v", len(back), err)
	}
}

// TestReadMixedLinkTypes: tshark -i <veth> -i any in one file (a --link udp
// write_bw, 44 Ethernet frames on the veth and 6 Linux cooked RoCE frames on
// "any") reads whole, as tshark reads it: every RoCE frame of both interfaces
// with its ICRC valid.
func TestReadMixedLinkTypes(t *testing.T) {
	frames, err := pcap.ReadFile("testdata/veth-and-any.pcapng")
	if err != nil || len(frames) != 50 {
		t.Fatalf("%d frames: %v", len(frames), err)
	}
	ok := 0
	for _, f := range frames {
		var p roce.Packet
		if p.Decode(f.Data) == nil {
			ok++
		}
	}
	if ok != 12 {
		t.Errorf("%d RoCE frames with a valid ICRC, want 12 (6 on each interface)", ok)
	}
}

// TestReadDirectory: a directory is named as such, not as an empty file (found by
// the trial: `xroce dump /tmp` said "the file is empty").
func TestReadDirectory(t *testing.T) {
	dir := t.TempDir()
	_, err := pcap.ReadFile(dir)
	if !errors.Is(err, syscall.EISDIR) || errors.Is(err, pcap.ErrNotCapture) || !strings.Contains(err.Error(), "is a directory") {
		t.Fatalf("ReadFile(%s) = %v, want EISDIR", dir, err)
	}
}

// TestReadBadSectionHeader: a pcapng Section Header Block whose blocks are whole
// but whose version pcapgo refuses (2.0) is a malformed capture file, as every
// other damage is, not pcapgo's bare words.
func TestReadBadSectionHeader(t *testing.T) {
	shb := []byte{0x0A, 0x0D, 0x0D, 0x0A, 28, 0, 0, 0, 0x4D, 0x3C, 0x2B, 0x1A, 2, 0, 0, 0,
		0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 28, 0, 0, 0}
	if _, err := pcap.Read(bytes.NewReader(shb)); !errors.Is(err, pcap.ErrMalformed) {
		t.Errorf("a pcapng of version 2.0: %v, want an error wrapping ErrMalformed", err)
	}
}
