// Package pcap reads and writes packet captures of RoCEv2 traffic with
// github.com/google/gopacket/pcapgo (pcap and pcapng, Ethernet link type): Read and
// ReadFile load a capture; Tap records every frame a transport.Link sends and
// receives; Replay feeds one side's requests of a capture to a responder engine and
// compares its answers with the captured ones; TCPStreams reassembles TCP exchanges
// (the perftest and rc_pingpong connection set-up).
package pcap

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/pcapgo"
)

// Frame is one captured Ethernet frame.
type Frame struct {
	Index int       // 1-based frame number, as Wireshark counts
	Time  time.Time // capture timestamp
	Data  []byte    // captured bytes (may be shorter than the frame on the wire if snapped)
	Len   int       // original length on the wire
	// Dir is the frame's direction as seen by the recording endpoint: DirTX or DirRX
	// for a pcapng capture whose interfaces are named "tx" and "rx" (as Tap writes
	// them), DirUnknown otherwise.
	Dir Direction
}

// Direction says whether the recording endpoint sent or received a frame.
type Direction uint8

// Directions. A Tap records what its Link sends on the pcapng interface named "tx"
// and what it receives on the one named "rx".
const (
	DirUnknown Direction = iota
	DirTX
	DirRX
)

func (d Direction) String() string {
	switch d {
	case DirTX:
		return "tx"
	case DirRX:
		return "rx"
	}
	return "?"
}

// directionOf maps a pcapng interface name to a direction.
func directionOf(name string) Direction {
	switch name {
	case "tx":
		return DirTX
	case "rx":
		return DirRX
	}
	return DirUnknown
}

// ErrMalformed is wrapped by the error for a capture file the pcap reader chokes on.
var ErrMalformed = errors.New("malformed capture file")

// ErrTorn is wrapped (with ErrMalformed for pcapng) by the error for a capture
// whose last record or block is cut short, as a recorder killed in the middle of a
// write leaves it: every frame before it is whole.
var ErrTorn = errors.New("the capture ends in the middle of a record (its recorder was stopped while writing)")

// MaxSnaplen is the largest snapshot length a classic pcap header may declare (4 ×
// tcpdump's 262144), and the largest packet a pcapng block may hold: larger values
// are refused so a corrupt or hostile file cannot make the reader allocate gigabytes
// for one record (pcapgo allocates a pcapng packet's declared length before reading
// it, unchecked against its block).
const MaxSnaplen = 1 << 20

// ReadFile reads every frame of a pcap or pcapng file (detected by its magic
// number). Frames of Linux cooked (SLL, SLL2) and raw IP captures are returned as
// Ethernet frames (toEthernet). Errors: the file cannot be opened, its format is
// neither, its link type is none of those, its snapshot length exceeds MaxSnaplen, or it is malformed or ends
// in the middle of a record; in the last two cases the frames before the damage are
// returned with the error.
func ReadFile(path string) ([]Frame, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	frames, err := Read(f)
	if err != nil {
		return frames, fmt.Errorf("pcap: %s: %w", path, err)
	}
	return frames, nil
}

// Read reads every frame of a pcap or pcapng stream. On an error after the start it
// returns the frames read so far with the error. A malformed file gives an error,
// never a panic: gopacket's pcapng reader panics on some (an if_tsresol of 2^-64
// divides by zero, an empty if_filter option is sliced past its end), which Read
// turns into ErrMalformed, and its unchecked packet lengths are checked first
// (checkNg).
func Read(r io.Reader) (frames []Frame, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("frame %d: %w (%v)", len(frames)+1, ErrMalformed, p)
		}
	}()
	br := bufio.NewReader(r)
	magic, err := br.Peek(4)
	if err != nil {
		if !errors.Is(err, io.EOF) {
			return nil, err // a directory (EISDIR), an I/O error
		}
		if len(magic) == 0 {
			return nil, fmt.Errorf("%w: the file is empty", ErrNotCapture)
		}
		return nil, fmt.Errorf("%w: %d bytes, too short for a pcap or pcapng header", ErrNotCapture, len(magic))
	}
	var next func() ([]byte, gopacket.CaptureInfo, error)
	var linkOf func(gopacket.CaptureInfo) uint32 // a frame's link type
	dir := func(gopacket.CaptureInfo) Direction { return DirUnknown }
	var ngErr error // a malformed block: the frames before it are returned with it
	if bytes.Equal(magic, []byte{0x0A, 0x0D, 0x0D, 0x0A}) {
		all, err := io.ReadAll(br)
		if err != nil {
			return nil, err
		}
		valid, blockErr := checkNg(all)
		if valid == 0 && blockErr != nil {
			return nil, blockErr
		}
		ngErr = blockErr
		// Every interface's frames, whatever its link type (tshark -i veth -i any
		// writes Ethernet and Linux cooked ones in one file); pcapgo's default skips
		// those of another link type than the first interface's.
		opts := pcapgo.DefaultNgReaderOptions
		opts.WantMixedLinkType = true
		ng, err := pcapgo.NewNgReader(bytes.NewReader(all[:valid]), opts)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrMalformed, err) // pcapgo's words: "Unknown pcapng Version in Section Header"
		}
		linkOf, next = ngLinkOf(ngLinkTypes(all[:valid])), ng.ReadPacketData
		dir = func(ci gopacket.CaptureInfo) Direction {
			intf, err := ng.Interface(ci.InterfaceIndex)
			if err != nil {
				return DirUnknown
			}
			return directionOf(intf.Name)
		}
	} else {
		if !pcapMagic(magic) {
			return nil, fmt.Errorf("%w: neither pcap nor pcapng (its first bytes are % x)", ErrNotCapture, magic)
		}
		all, err := io.ReadAll(br)
		if err != nil {
			return nil, err
		}
		if len(all) < 24 {
			return nil, fmt.Errorf("%w: %d bytes, too short for the 24-byte pcap header", ErrNotCapture, len(all))
		}
		fixPcap(all)
		pr, err := pcapgo.NewReader(bytes.NewReader(all))
		if err != nil {
			return nil, fmt.Errorf("%d bytes: %w", len(all), err)
		}
		link := pcapLinkType(all)
		if _, _, err := toEthernet(link); err != nil {
			return nil, err
		}
		linkOf, next = func(gopacket.CaptureInfo) uint32 { return link }, pr.ReadPacketData
	}
	for {
		data, ci, err := next()
		if err == io.EOF {
			if ngErr != nil {
				return frames, fmt.Errorf("after frame %d: %w", len(frames), ngErr)
			}
			return frames, nil
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return frames, fmt.Errorf("frame %d: %w: %w", len(frames)+1, err, ErrTorn)
		}
		if err != nil { // the block's content, which checkNg does not read
			return frames, fmt.Errorf("frame %d: %w: %v", len(frames)+1, ErrMalformed, err)
		}
		wire, link := ci.Length, linkOf(ci)
		conv, grow, err := toEthernet(link)
		if err != nil {
			return frames, fmt.Errorf("frame %d: %w", len(frames)+1, err)
		}
		if conv != nil {
			var ok bool
			if data, ok = conv(data); !ok {
				return frames, fmt.Errorf("frame %d: %w: %d bytes, shorter than the header of its link type %d", len(frames)+1, ErrMalformed, ci.CaptureLength, link)
			}
			wire = max(ci.Length+grow, len(data))
		}
		frames = append(frames, Frame{Index: len(frames) + 1, Time: ci.Timestamp, Data: data, Len: wire, Dir: dir(ci)})
	}
}

// checkNg walks the blocks of a pcapng file (the pcapng draft, IETF
// draft-ietf-opsawg-pcapng, §3.1: type, total length, body, total length again; a
// Section Header Block sets the byte order) and returns how many leading bytes hold
// whole, consistent blocks, with an error for the first block that is not: a
// length that is not a multiple of 4, shorter than 12 bytes or past the end of the
// file, trailing lengths that differ, or a packet block (Enhanced, Simple or the
// obsolete Packet Block) whose captured length exceeds its block or MaxSnaplen (for
// a Simple Packet Block, whose original length exceeds MaxSnaplen).
func checkNg(b []byte) (int, error) {
	var order binary.ByteOrder = binary.LittleEndian
	off := 0
	for off < len(b) {
		rest := b[off:]
		if len(rest) < 12 {
			return off, fmt.Errorf("%w: %d bytes at offset %d are not a whole block: %w", ErrMalformed, len(rest), off, ErrTorn)
		}
		typ := binary.LittleEndian.Uint32(rest[0:4])
		if typ == 0x0A0D0D0A { // Section Header Block: its byte-order magic decides
			switch {
			case binary.LittleEndian.Uint32(rest[8:12]) == 0x1A2B3C4D:
				order = binary.LittleEndian
			case binary.BigEndian.Uint32(rest[8:12]) == 0x1A2B3C4D:
				order = binary.BigEndian
			default:
				return off, fmt.Errorf("%w: section header at offset %d has no byte-order magic", ErrMalformed, off)
			}
		}
		typ = order.Uint32(rest[0:4])
		n := order.Uint32(rest[4:8])
		if n > maxBlock {
			return off, fmt.Errorf("%w: block at offset %d declares %d bytes, more than a block of a frame of at most %d bytes holds", ErrMalformed, off, n, MaxSnaplen)
		}
		if n >= 12 && n%4 == 0 && uint64(n) > uint64(len(rest)) {
			return off, fmt.Errorf("%w: block at offset %d declares %d bytes (%d remain): %w", ErrMalformed, off, n, len(rest), ErrTorn)
		}
		if n < 12 || n%4 != 0 {
			return off, fmt.Errorf("%w: block at offset %d declares %d bytes (%d remain)", ErrMalformed, off, n, len(rest))
		}
		if order.Uint32(rest[n-4:n]) != n {
			return off, fmt.Errorf("%w: block at offset %d: its two lengths differ", ErrMalformed, off)
		}
		if err := checkNgOptions(typ, rest[:n], order); err != nil {
			return off, fmt.Errorf("%w: %s at offset %d: %w", ErrMalformed, blockName(typ), off, err)
		}
		var capLen, room uint32
		switch typ {
		case 6, 2: // Enhanced Packet Block; obsolete Packet Block: captured length at 20
			if n < 32 {
				return off, fmt.Errorf("%w: packet block at offset %d is %d bytes", ErrMalformed, off, n)
			}
			capLen, room = order.Uint32(rest[20:24]), n-32
		case 3: // Simple Packet Block: the original length at 8, data after it
			if n < 16 {
				return off, fmt.Errorf("%w: packet block at offset %d is %d bytes", ErrMalformed, off, n)
			}
			// pcapgo allocates the original length (cut to the interface's snap
			// length, which may legitimately be below it): bound that.
			capLen, room = order.Uint32(rest[8:12]), MaxSnaplen
		}
		if capLen > room || capLen > MaxSnaplen {
			return off, fmt.Errorf("%w: packet block at offset %d claims %d captured bytes in a %d-byte block", ErrMalformed, off, capLen, n)
		}
		off += int(n)
	}
	return off, nil
}

// maxBlock bounds a pcapng block's declared length: a packet block of MaxSnaplen
// bytes and room for options. A longer one is corrupt rather than torn: no
// recorder writes it.
const maxBlock = MaxSnaplen + 1<<16

// checkNgOptions checks the options of a Section Header Block (block type
// 0x0A0D0D0A) or an Interface Description Block (1), b being the whole block
// (pcapng draft §3.5: code, length, value padded to 32 bits, until opt_endofopt or
// the block's end): none may run past the block, and an interface's if_tsresol
// (code 9) must be one the reader can convert, 10^-0..10^-9 or 2^-0..2^-30 s.
// pcapgo skips an interface block whose options are cut, so its packets were
// reported as none at all, and divides by zero at 2^-64.
func checkNgOptions(typ uint32, b []byte, order binary.ByteOrder) error {
	var opts []byte
	switch typ {
	case 0x0A0D0D0A: // byte-order magic, version, section length
		if len(b) < 28 {
			return fmt.Errorf("%d bytes, too short for a section header", len(b))
		}
		opts = b[24 : len(b)-4]
	case 1: // link type, reserved, snap length
		if len(b) < 20 {
			return fmt.Errorf("%d bytes, too short for an interface description", len(b))
		}
		opts = b[16 : len(b)-4]
	default:
		return nil
	}
	for len(opts) >= 4 {
		code, n := order.Uint16(opts[0:2]), int(order.Uint16(opts[2:4]))
		if code == 0 { // opt_endofopt
			return nil
		}
		padded := (n + 3) &^ 3
		if padded > len(opts)-4 {
			return fmt.Errorf("option %d declares %d bytes and %d remain in the block", code, n, len(opts)-4)
		}
		if typ == 1 && code == 9 && n >= 1 {
			v := opts[4]
			if v&0x80 == 0 && v > 9 || v&0x80 != 0 && v&0x7F > 30 {
				return fmt.Errorf("its timestamp resolution (if_tsresol %#02x: %s) is finer than this reader takes (10^-9 or 2^-30 s)", v, tsresolString(v))
			}
		}
		opts = opts[4+padded:]
	}
	return nil
}

// tsresolString writes an if_tsresol value as the fraction of a second it means.
func tsresolString(v byte) string {
	if v&0x80 != 0 {
		return fmt.Sprintf("2^-%d s", v&0x7F)
	}
	return fmt.Sprintf("10^-%d s", v)
}

// blockName names a pcapng block type for an error.
func blockName(typ uint32) string {
	switch typ {
	case 0x0A0D0D0A:
		return "section header"
	case 1:
		return "interface description"
	}
	return fmt.Sprintf("block of type %#x", typ)
}

// ErrNotCapture: the data starts with neither a pcap nor a pcapng magic number.
var ErrNotCapture = errors.New("not a capture file")

// pcapMagic reports whether b starts a classic pcap file: 0xa1b2c3d4 (microsecond
// timestamps) or 0xa1b23c4d (nanosecond), in either byte order (pcap-savefile(5)).
func pcapMagic(b []byte) bool {
	for _, m := range [][]byte{{0xa1, 0xb2, 0xc3, 0xd4}, {0xa1, 0xb2, 0x3c, 0x4d}} {
		if bytes.Equal(b, m) || bytes.Equal(b, []byte{m[3], m[2], m[1], m[0]}) {
			return true
		}
	}
	return false
}
