// Package pcap reads packet captures of RoCEv2 traffic with
// github.com/google/gopacket/pcapgo (pcap and pcapng, Ethernet link type).
package pcap

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// Frame is one captured Ethernet frame.
type Frame struct {
	Index int       // 1-based frame number, as Wireshark counts
	Time  time.Time // capture timestamp
	Data  []byte    // captured bytes (may be shorter than the frame on the wire if snapped)
	Len   int       // original length on the wire
}

// MaxSnaplen is the largest snapshot length a classic pcap header may declare (4 ×
// tcpdump's 262144): larger values are refused so a corrupt or hostile header cannot
// make the reader allocate gigabytes for one record. pcapng record lengths are
// checked by pcapgo against the block length only.
const MaxSnaplen = 1 << 20

// ReadFile reads every frame of a pcap or pcapng file (detected by its magic
// number). Errors: the file cannot be opened, its format is neither, its link type is
// not Ethernet, or its snapshot length exceeds MaxSnaplen.
func ReadFile(path string) ([]Frame, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	frames, err := Read(f)
	if err != nil {
		return nil, fmt.Errorf("pcap: %s: %w", path, err)
	}
	return frames, nil
}

// Read reads every frame of a pcap or pcapng stream.
func Read(r io.Reader) ([]Frame, error) {
	br := bufio.NewReader(r)
	magic, err := br.Peek(4)
	if err != nil {
		return nil, fmt.Errorf("reading magic: %w", err)
	}
	var next func() ([]byte, gopacket.CaptureInfo, error)
	var link layers.LinkType
	if bytes.Equal(magic, []byte{0x0A, 0x0D, 0x0D, 0x0A}) {
		ng, err := pcapgo.NewNgReader(br, pcapgo.DefaultNgReaderOptions)
		if err != nil {
			return nil, err
		}
		link, next = ng.LinkType(), ng.ReadPacketData
	} else {
		pr, err := pcapgo.NewReader(br)
		if err != nil {
			return nil, err
		}
		if pr.Snaplen() > MaxSnaplen {
			return nil, fmt.Errorf("snapshot length %d exceeds %d", pr.Snaplen(), MaxSnaplen)
		}
		link, next = pr.LinkType(), pr.ReadPacketData
	}
	if link != layers.LinkTypeEthernet {
		return nil, fmt.Errorf("link type %v, want Ethernet", link)
	}
	var frames []Frame
	for {
		data, ci, err := next()
		if err == io.EOF {
			return frames, nil
		}
		if err != nil {
			return frames, fmt.Errorf("frame %d: %w", len(frames)+1, err)
		}
		frames = append(frames, Frame{Index: len(frames) + 1, Time: ci.Timestamp, Data: data, Len: ci.Length})
	}
}
