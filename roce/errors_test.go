package roce_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/internal/rocetest"
)

func TestDecodeErrors(t *testing.T) {
	// IPv4 offsets: IP 14, UDP 34, BTH 42.
	for _, c := range []struct {
		name   string
		sample string
		v6     bool
		mutate func([]byte) []byte
		want   *roce.DecodeError
	}{
		{"short Ethernet", "ACKNOWLEDGE", false, func(f []byte) []byte { return f[:13] }, roce.ErrTruncated},
		{"ARP", "ACKNOWLEDGE", false, func(f []byte) []byte { f[12], f[13] = 0x08, 0x06; return f }, roce.ErrNotRoCE},
		{"IPv4 version 5", "ACKNOWLEDGE", false, func(f []byte) []byte { f[14] = 0x55; return f }, roce.ErrNotRoCE},
		{"IPv4 options", "ACKNOWLEDGE", false, func(f []byte) []byte { f[14] = 0x46; return f }, roce.ErrIPv4Options},
		{"IPv4 fragment", "ACKNOWLEDGE", false, func(f []byte) []byte { f[20] |= 0x20; return f }, roce.ErrIPFragment},
		{"IPv4 TCP", "ACKNOWLEDGE", false, func(f []byte) []byte { f[23] = 6; return f }, roce.ErrNotRoCE},
		{"IPv4 total length past frame", "ACKNOWLEDGE", false, func(f []byte) []byte { return f[:len(f)-1] }, roce.ErrTruncated},
		{"IPv4 total length < 20", "ACKNOWLEDGE", false, func(f []byte) []byte { binary.BigEndian.PutUint16(f[16:], 19); return f }, roce.ErrLengthMismatch},
		{"UDP port 4790", "ACKNOWLEDGE", false, func(f []byte) []byte { f[37] = 0xb6; return f }, roce.ErrNotRoCE},
		{"UDP length short", "ACKNOWLEDGE", false, func(f []byte) []byte { f[39]--; return f }, roce.ErrLengthMismatch},
		{"UDP length long", "ACKNOWLEDGE", false, func(f []byte) []byte { f[39]++; return f }, roce.ErrLengthMismatch},
		{"IPv6 hop-by-hop header", "ACKNOWLEDGE", true, func(f []byte) []byte { f[20] = 0; return f }, roce.ErrNotRoCE},
		{"IPv6 truncated", "ACKNOWLEDGE", true, func(f []byte) []byte { return f[:40] }, roce.ErrTruncated},
		{"BTH TVer 1", "ACKNOWLEDGE", false, func(f []byte) []byte { f[43] |= 1; return f }, roce.ErrBadVersion},
		{"RD opcode", "ACKNOWLEDGE", false, func(f []byte) []byte { f[42] = 0x51; return f }, roce.ErrUnknownOpcode},
		{"reserved RC opcode 0x15", "ACKNOWLEDGE", false, func(f []byte) []byte { f[42] = 0x15; return f }, roce.ErrUnknownOpcode},
		{"ACK with payload", "ACKNOWLEDGE", false, func(f []byte) []byte { return grow(f, 4) }, roce.ErrUnexpectedPayload},
		{"READ request with payload", "RDMA_READ_REQUEST", false, func(f []byte) []byte { return grow(f, 4) }, roce.ErrUnexpectedPayload},
		{"WRITE_FIRST shorter than RETH", "RDMA_WRITE_FIRST", false, func(f []byte) []byte { return shrink(f, 20) }, roce.ErrTruncated},
		{"transport not 4-byte aligned", "SEND_ONLY", false, func(f []byte) []byte { return grow(f, 1) }, roce.ErrLengthMismatch},
		{"IPv4 datagram too short for UDP", "ACKNOWLEDGE", false, func(f []byte) []byte { binary.BigEndian.PutUint16(f[16:], 24); return f }, roce.ErrLengthMismatch},
		{"IPv6 payload too short for UDP", "ACKNOWLEDGE", true, func(f []byte) []byte { binary.BigEndian.PutUint16(f[18:], 4); return f }, roce.ErrLengthMismatch},
		{"pad larger than payload", "ACKNOWLEDGE", false, func(f []byte) []byte {
			f = shrink(f, 12)
			f[42] = byte(roce.RC_SEND_ONLY)
			f[43] |= 0x10
			return f
		}, roce.ErrBadPadCount},
		{"payload byte flipped", "SEND_ONLY", false, func(f []byte) []byte { f[60] ^= 1; return f }, roce.ErrBadICRC},
		{"ICRC byte flipped", "ACKNOWLEDGE", false, func(f []byte) []byte { f[len(f)-1] ^= 0x80; return f }, roce.ErrBadICRC},
		{"IPv4 source address", "ACKNOWLEDGE", false, func(f []byte) []byte { f[29] ^= 1; return f }, roce.ErrBadICRC},
		{"BTH DestQP", "ACKNOWLEDGE", false, func(f []byte) []byte { f[49] ^= 1; return f }, roce.ErrBadICRC},
		{"BTH MigReq (covered)", "ACKNOWLEDGE", false, func(f []byte) []byte { f[43] ^= 0x40; return f }, roce.ErrBadICRC},
		{"IPv6 payload byte", "SEND_ONLY", true, func(f []byte) []byte { f[80] ^= 1; return f }, roce.ErrBadICRC},
	} {
		f := c.mutate(rocetest.EncodeSample(t, c.sample, c.v6))
		var p roce.Packet
		err := p.Decode(f)
		if err != c.want {
			t.Errorf("%s: Decode = %v, want %v", c.name, err, c.want)
		}
		var de *roce.DecodeError
		if !errors.As(err, &de) || de.Kind != c.want.Kind {
			t.Errorf("%s: error kind %v", c.name, err)
		}
	}
}

// grow appends n zero bytes to the transport payload and fixes the IP and UDP
// lengths (IPv4 only).
func grow(f []byte, n int) []byte {
	icrc := append([]byte(nil), f[len(f)-4:]...)
	f = append(f[:len(f)-4], make([]byte, n)...)
	f = append(f, icrc...)
	return fixLengths(f)
}

// shrink keeps the first n bytes after the BTH, plus the ICRC (IPv4 only).
func shrink(f []byte, n int) []byte {
	icrc := append([]byte(nil), f[len(f)-4:]...)
	f = append(f[:42+n], icrc...)
	return fixLengths(f)
}

func fixLengths(f []byte) []byte {
	binary.BigEndian.PutUint16(f[16:], uint16(len(f)-14))
	binary.BigEndian.PutUint16(f[38:], uint16(len(f)-34))
	return f
}

// TestDecodeAcceptsVariantFields: what the ICRC masks may change in flight and the
// frame still verifies (IBTA Vol 1 Annex A17.3.3 masks BTH byte 4, TTL, TOS, the UDP
// checksum, the IPv6 flow label and hop limit, so a receiver accepts any value
// there); Ethernet padding after the datagram is ignored; a VLAN tag is accepted.
func TestDecodeAcceptsVariantFields(t *testing.T) {
	for _, c := range []struct {
		name   string
		v6     bool
		mutate func([]byte) []byte
	}{
		{"BTH byte 4 all ones", false, func(f []byte) []byte { f[46] = 0xFF; return f }},
		{"TTL and TOS", false, func(f []byte) []byte { f[22], f[15] = 1, 0xb8; return f }},
		{"IPv4 header checksum", false, func(f []byte) []byte { f[24] ^= 0xFF; return f }},
		{"UDP checksum", false, func(f []byte) []byte { f[40], f[41] = 0x12, 0x34; return f }},
		{"IPv6 traffic class, flow label, hop limit", true, func(f []byte) []byte { f[14], f[15], f[17], f[21] = 0x6F, 0xFF, 0x00, 1; return f }},
		{"Ethernet padding", false, func(f []byte) []byte { return append(f, 0, 0, 0, 0, 0, 0) }},
		{"VLAN tag", false, func(f []byte) []byte {
			g := append([]byte(nil), f[:12]...)
			g = append(g, 0x81, 0x00, 0x20, 0x07)
			return append(g, f[12:]...)
		}},
	} {
		f := c.mutate(rocetest.EncodeSample(t, "ATOMIC_ACKNOWLEDGE", c.v6))
		var p roce.Packet
		if err := p.Decode(f); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if p.AtomicAckETH.OrigRemData != 0x0102030405060708 || p.AETH.MSN != 3 {
			t.Errorf("%s: decoded %+v", c.name, p)
		}
	}
	// The VLAN frame re-encodes to itself.
	f := rocetest.EncodeSample(t, "SEND_ONLY", false)
	g := append(append(append([]byte(nil), f[:12]...), 0x81, 0x00, 0x20, 0x07), f[12:]...)
	var p roce.Packet
	if err := p.Decode(g); err != nil || !p.Eth.HasVLAN || p.Eth.VLANTCI != 0x2007 {
		t.Fatalf("VLAN decode: %v %+v", err, p.Eth)
	}
	out := make([]byte, p.Len())
	q := p
	q.Payload = append([]byte(nil), p.Payload...)
	if _, err := q.Encode(out); err != nil || string(out) != string(g) {
		t.Errorf("VLAN re-encode: %v\n%x\n%x", err, out, g)
	}
}

// TestDecodeEveryTruncation cuts real frames at every length: each cut returns an
// error (no panic), and every cut inside the RoCE headers is ErrTruncated.
func TestDecodeEveryTruncation(t *testing.T) {
	for _, name := range []string{"RDMA_WRITE_FIRST", "ATOMIC_ACKNOWLEDGE", "COMPARE_SWAP", "UD_SEND_ONLY_WITH_IMMEDIATE"} {
		for _, v6 := range []bool{false, true} {
			f := rocetest.EncodeSample(t, name, v6)
			for n := 0; n < len(f); n++ {
				var p roce.Packet
				err := p.Decode(f[:n])
				if err == nil {
					t.Fatalf("%s v6=%v cut at %d: decoded", name, v6, n)
				}
				if err != roce.ErrTruncated {
					t.Errorf("%s v6=%v cut at %d: %v, want ErrTruncated", name, v6, n, err)
				}
			}
		}
	}
}

func TestEncodeErrors(t *testing.T) {
	p := rocetest.Samples(false)["ACKNOWLEDGE"]
	p.Payload = []byte{1, 2, 3, 4}
	if _, err := p.Encode(make([]byte, 200)); err != roce.ErrUnexpectedPayload {
		t.Errorf("ACK with payload: %v", err)
	}
	p = rocetest.Samples(false)["SEND_ONLY"]
	if _, err := p.Encode(make([]byte, p.Len()-1)); err != roce.ErrTruncated {
		t.Errorf("short buffer: %v", err)
	}
	p.BTH.Opcode = 0x15
	if _, err := p.Encode(make([]byte, 200)); err != roce.ErrUnknownOpcode || p.Len() != 0 {
		t.Errorf("unknown opcode: %v", err)
	}
	p = rocetest.Samples(false)["SEND_ONLY"]
	p.Payload = make([]byte, 65536)
	if _, err := p.Encode(make([]byte, 100)); err != roce.ErrLengthMismatch {
		t.Errorf("oversized datagram: %v", err)
	}
	if p.Eth.EtherType != 0 {
		t.Error("failed Encode changed the packet")
	}
}

// TestEncodeInPlace re-encodes decoded frames into their own buffer with a different
// header layout: the payload, which aliases the buffer, must survive.
func TestEncodeInPlace(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(p *roce.Packet)
	}{
		{"add VLAN", func(p *roce.Packet) { p.Eth.HasVLAN = true; p.Eth.VLANTCI = 7 }},
		{"IPv4 to IPv6", func(p *roce.Packet) { p.IsIPv6 = true; p.IPv6.HopLimit = 9 }},
	} {
		f := rocetest.EncodeSample(t, "SEND_ONLY", false)
		buf := make([]byte, 200)
		copy(buf, f)
		var p roce.Packet
		if err := p.Decode(buf[:len(f)]); err != nil {
			t.Fatal(err)
		}
		want := append([]byte(nil), p.Payload...)
		c.change(&p)
		n, err := p.Encode(buf)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var q roce.Packet
		if err := q.Decode(buf[:n]); err != nil || string(q.Payload) != string(want) {
			t.Errorf("%s: decode %v, payload intact %v", c.name, err, string(q.Payload) == string(want))
		}
	}
}

// TestEncodeNormalizes: after Encode the packet holds what Decode reads back, fields
// cut to their wire widths, and the UDP destination port is 4791.
func TestEncodeNormalizes(t *testing.T) {
	p := rocetest.Samples(true)["UD_SEND_ONLY_WITH_IMMEDIATE"]
	p.BTH.DestQP, p.BTH.PSN, p.BTH.Resv6, p.BTH.Resv7 = 0x1234567, 0xFF000001, 0xFF, 0xFF
	p.DETH.SrcQP = 0xAB000001
	p.IPv6.FlowLabel = 0xFFFFFFFF
	p.UDP.DstPort = 0
	buf := make([]byte, p.Len())
	if _, err := p.Encode(buf); err != nil {
		t.Fatal(err)
	}
	var q roce.Packet
	if err := q.Decode(buf); err != nil {
		t.Fatal(err)
	}
	if p.BTH != q.BTH || p.DETH != q.DETH || p.IPv6 != q.IPv6 || p.UDP != q.UDP {
		t.Errorf("after Encode\n%+v %+v %+v %+v\nDecode reads\n%+v %+v %+v %+v", p.BTH, p.DETH, p.IPv6, p.UDP, q.BTH, q.DETH, q.IPv6, q.UDP)
	}
	if q.BTH.DestQP != 0x234567 || q.BTH.PSN != 1 || q.UDP.DstPort != roce.UDPPort {
		t.Errorf("decoded %+v", q.BTH)
	}
}

// TestAfterFailedDecode: methods of a packet whose Decode failed do not panic and do
// not return stale bytes.
func TestAfterFailedDecode(t *testing.T) {
	var p roce.Packet
	good := rocetest.EncodeSample(t, "SEND_ONLY", false)
	if err := p.Decode(good); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]byte{{1, 2, 3}, good[:20], good[:50]} {
		if err := p.Decode(bad); err == nil {
			t.Fatal("decoded a truncated frame")
		}
		if p.Frame() != nil || p.ComputeICRC() != 0 {
			t.Errorf("after a failed Decode of %d bytes: Frame %d bytes, ICRC %x", len(bad), len(p.Frame()), p.ComputeICRC())
		}
	}
}
