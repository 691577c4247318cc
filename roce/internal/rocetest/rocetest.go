// Package rocetest holds what the tests of roce and roce/rocelayers share: sample
// packets of every kind and the RoCE frames of the rdma_rxe captures. Only tests
// import it.
package rocetest

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/test/captures"
)

// Samples returns one packet of each kind tests need, over IPv4 or IPv6, with
// distinctive field values.
func Samples(v6 bool) map[string]roce.Packet {
	base := func(op roce.Opcode, payload int) roce.Packet {
		p := roce.Packet{IsIPv6: v6}
		p.Eth.Dst = [6]byte{0x52, 0x54, 0x00, 0x77, 0x00, 0x0b}
		p.Eth.Src = [6]byte{0x52, 0x54, 0x00, 0x77, 0x00, 0x0c}
		if v6 {
			p.IPv6 = roce.IPv6{TrafficClass: 0x6a, FlowLabel: 0x12345, HopLimit: 64,
				Src: netip.MustParseAddr("fd00:77::c").As16(), Dst: netip.MustParseAddr("fd00:77::b").As16()}
		} else {
			p.IPv4 = roce.IPv4{TOS: 0x6a, ID: 0x1e52, FlagsFrag: 0x4000, TTL: 64,
				Src: [4]byte{10, 77, 0, 12}, Dst: [4]byte{10, 77, 0, 11}}
		}
		p.UDP = roce.UDP{SrcPort: 0xc121, DstPort: roce.UDPPort}
		p.BTH = roce.BTH{Opcode: op, PKey: 0xFFFF, DestQP: 0x000011, PSN: 0x18ab7f, AckReq: true}
		p.Payload = make([]byte, payload)
		for i := range p.Payload {
			p.Payload[i] = byte(i*7 + 3)
		}
		return p
	}
	reth := roce.RETH{VA: 0x0000555b7579f000, RKey: 0x000002a9, DMALen: 2500}
	m := map[string]roce.Packet{}
	p := base(roce.RC_SEND_ONLY, 64)
	m["SEND_ONLY"] = p
	p = base(roce.RC_SEND_FIRST, 1024)
	m["SEND_FIRST"] = p
	p = base(roce.RC_SEND_LAST_WITH_IMMEDIATE, 13)
	p.ImmDt = 0xdeadbeef
	m["SEND_LAST_WITH_IMMEDIATE"] = p
	p = base(roce.RC_RDMA_WRITE_FIRST, 1024)
	p.RETH = reth
	m["RDMA_WRITE_FIRST"] = p
	m["RDMA_WRITE_MIDDLE"] = base(roce.RC_RDMA_WRITE_MIDDLE, 1024)
	m["RDMA_WRITE_LAST"] = base(roce.RC_RDMA_WRITE_LAST, 450)
	p = base(roce.RC_RDMA_WRITE_ONLY, 61)
	p.RETH = roce.RETH{VA: 0x7f0000001000, RKey: 0x1234, DMALen: 61}
	m["RDMA_WRITE_ONLY"] = p
	p = base(roce.RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, 8)
	p.RETH = roce.RETH{VA: 0x7f0000002000, RKey: 0x4321, DMALen: 8}
	p.ImmDt = 0x01020304
	m["RDMA_WRITE_ONLY_WITH_IMMEDIATE"] = p
	p = base(roce.RC_RDMA_READ_REQUEST, 0)
	p.RETH = reth
	m["RDMA_READ_REQUEST"] = p
	for _, op := range []roce.Opcode{roce.RC_RDMA_READ_RESPONSE_FIRST, roce.RC_RDMA_READ_RESPONSE_LAST, roce.RC_RDMA_READ_RESPONSE_ONLY} {
		p = base(op, 1022)
		p.BTH.AckReq = false
		p.AETH = roce.AETH{Syndrome: roce.SyndromeACK, MSN: 0x000102}
		m[op.Info().Name] = p
	}
	m["RDMA_READ_RESPONSE_MIDDLE"] = base(roce.RC_RDMA_READ_RESPONSE_MIDDLE, 1024)
	p = base(roce.RC_ACKNOWLEDGE, 0)
	p.AETH = roce.AETH{Syndrome: roce.SyndromeACK, MSN: 5}
	m["ACKNOWLEDGE"] = p
	p = base(roce.RC_ACKNOWLEDGE, 0)
	p.AETH = roce.AETH{Syndrome: roce.SyndromeNAKPSNSequenceError, MSN: 7}
	m["NAK"] = p
	p = base(roce.RC_ACKNOWLEDGE, 0)
	p.AETH = roce.AETH{Syndrome: roce.RNRNAKSyndrome(12), MSN: 9}
	m["RNR_NAK"] = p
	p = base(roce.RC_COMPARE_SWAP, 0)
	p.AtomicETH = roce.AtomicETH{VA: 0x7f0000003008, RKey: 0xabcd, SwapAdd: 0x1111222233334444, Compare: 0x5555666677778888}
	m["COMPARE_SWAP"] = p
	p = base(roce.RC_FETCH_ADD, 0)
	p.AtomicETH = roce.AtomicETH{VA: 0x7f0000003010, RKey: 0xabce, SwapAdd: 1}
	m["FETCH_ADD"] = p
	p = base(roce.RC_ATOMIC_ACKNOWLEDGE, 0)
	p.AETH = roce.AETH{Syndrome: roce.SyndromeACK, MSN: 3}
	p.AtomicAckETH = roce.AtomicAckETH{OrigRemData: 0x0102030405060708}
	m["ATOMIC_ACKNOWLEDGE"] = p
	p = base(roce.RC_SEND_ONLY_WITH_INVALIDATE, 5)
	p.IETH = roce.IETH{RKey: 0x55aa}
	m["SEND_ONLY_WITH_INVALIDATE"] = p
	p = base(roce.UD_SEND_ONLY_WITH_IMMEDIATE, 30)
	p.DETH = roce.DETH{QKey: 0x80010000, SrcQP: 0x000001}
	p.ImmDt = 0x99
	m["UD_SEND_ONLY_WITH_IMMEDIATE"] = p
	p = base(roce.RC_FLUSH, 0)
	p.FETH = roce.FETH{Bits: 0x13}
	p.RETH = roce.RETH{VA: 0x7f0000004000, RKey: 0x99, DMALen: 4096}
	m["FLUSH"] = p
	p = base(roce.RC_ATOMIC_WRITE, 8)
	p.RETH = roce.RETH{VA: 0x7f0000005000, RKey: 0x98, DMALen: 8}
	m["ATOMIC_WRITE"] = p
	p = base(roce.CNP, 0)
	p.BTH.BECN = true
	p.BTH.AckReq = false
	m["CNP"] = p
	return m
}

// EncodeSample returns the frame of Samples(v6)[name], failing t if it does not encode.
func EncodeSample(t testing.TB, name string, v6 bool) []byte {
	t.Helper()
	p := Samples(v6)[name]
	buf := make([]byte, p.Len())
	if _, err := p.Encode(buf); err != nil {
		t.Fatal(err)
	}
	return buf
}

// CaptureFiles returns the .pcap files under sub ("rxe" or "rxe-loss") of every
// capture source: the repository's testdata/ and, when present, the shared set
// (test/captures).
func CaptureFiles(t testing.TB, sub string) []string {
	t.Helper()
	var files []string
	for _, s := range captures.Sources(t) {
		files = append(files, s.Files(t, sub)...)
	}
	return files
}

// HostPeer is the address of the plain-UDP peer of the hostpeer_* captures.
const HostPeer = "10.77.0.1"

// Frame is one UDP/4791 frame of a capture and what Packet.Decode made of it.
type Frame struct {
	File  string    // the capture's base name
	Index int       // the frame's index in the capture, from 0
	Time  time.Time // its capture time
	Data  []byte    // the frame's bytes
	Pkt   roce.Packet
	Err   error // Decode's error: nil, ErrBadICRC or another DecodeError
}

// ReadRoCE decodes every UDP/4791 frame of the capture files, failing t if a file
// cannot be read.
func ReadRoCE(t testing.TB, files []string) []Frame {
	t.Helper()
	var out []Frame
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
			out = append(out, Frame{filepath.Base(file), fr.Index, fr.Time, fr.Data, p, err})
		}
	}
	return out
}

// WritePcap writes frames to a new classic pcap file (link type Ethernet, microsecond
// timestamps, little-endian), frame i stamped start plus i microseconds.
func WritePcap(path string, frames [][]byte, start time.Time) error {
	b := make([]byte, 24)
	binary.LittleEndian.PutUint32(b[0:], 0xa1b2c3d4) // magic: microsecond timestamps
	binary.LittleEndian.PutUint16(b[4:], 2)          // version 2.4
	binary.LittleEndian.PutUint16(b[6:], 4)
	binary.LittleEndian.PutUint32(b[16:], 65535) // snaplen
	binary.LittleEndian.PutUint32(b[20:], 1)     // LINKTYPE_ETHERNET
	for i, f := range frames {
		ts := start.Add(time.Duration(i) * time.Microsecond)
		var h [16]byte
		binary.LittleEndian.PutUint32(h[0:], uint32(ts.Unix()))
		binary.LittleEndian.PutUint32(h[4:], uint32(ts.Nanosecond()/1000))
		binary.LittleEndian.PutUint32(h[8:], uint32(len(f)))
		binary.LittleEndian.PutUint32(h[12:], uint32(len(f)))
		b = append(append(b, h[:]...), f...)
	}
	return os.WriteFile(path, b, 0o644)
}

// EncodedForm returns what Encode writes for a captured frame: the frame itself,
// except for a frame of the host peer (10.77.0.1) whose IPv4 UDP checksum is the
// partial sum a kernel UDP socket leaves for TX offload (the one's-complement sum
// of the pseudo-header: addresses, protocol 17, UDP length), as the frames that
// xroce's kernel UDP link sent in testdata's hostpeer_ captures carry it over
// veth. The ICRC does not cover the UDP checksum, and Encode writes 0 there for
// IPv4 as rdma_rxe does: that frame comes back with the checksum 0, and true says
// so. Any other non-zero checksum is left as it is, and fails the comparison.
func EncodedForm(t testing.TB, f *Frame) ([]byte, bool) {
	t.Helper()
	p := &f.Pkt
	b := p.Frame()
	if p.IsIPv6 || p.UDP.Checksum == 0 || p.SrcAddr().String() != HostPeer {
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
		t.Errorf("%s frame %d: UDP checksum 0x%04x, neither 0 nor the pseudo-header's partial sum 0x%04x", f.File, f.Index, p.UDP.Checksum, sum)
		return b, false
	}
	b = append([]byte(nil), b...)
	b[p.L4Off+6], b[p.L4Off+7] = 0, 0
	return b, true
}
