package roce_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/xroce/xroce/roce"
)

// Seed corpora come from the rdma_rxe captures (every RoCE frame, and each header
// cut from them) plus the sample packets over IPv4 and IPv6.

func seedFrames(f *testing.F) [][]byte {
	var seeds [][]byte
	for _, fr := range readRoCE(f, allCaptureFiles(f, "rxe")) {
		seeds = append(seeds, fr.data)
	}
	for _, v6 := range []bool{false, true} {
		for name := range samplePackets(v6) {
			seeds = append(seeds, encodeSample(f, name, v6))
		}
	}
	return seeds
}

// FuzzPacketDecode: Decode never panics; whatever it accepts re-encodes, and the
// re-encoded frame decodes to the same headers and payload with a good ICRC.
func FuzzPacketDecode(f *testing.F) {
	for _, s := range seedFrames(f) {
		f.Add(s)
	}
	buf := make([]byte, 70000)
	f.Fuzz(func(t *testing.T, data []byte) {
		var p roce.Packet
		err := p.Decode(data)
		if err != nil && !errors.Is(err, roce.ErrBadICRC) {
			var de *roce.DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		q := p
		q.Payload = append([]byte(nil), p.Payload...)
		n, err := q.Encode(buf)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		var r roce.Packet
		if err := r.Decode(buf[:n]); err != nil {
			t.Fatalf("decode of re-encoded frame: %v", err)
		}
		if r.BTH != p.BTH || r.Headers != p.Headers || r.RETH != p.RETH || r.AETH != p.AETH ||
			r.AtomicETH != p.AtomicETH || r.AtomicAckETH != p.AtomicAckETH || r.ImmDt != p.ImmDt ||
			r.IETH != p.IETH || r.DETH != p.DETH || r.CNPReserved != p.CNPReserved ||
			!bytes.Equal(r.Payload, p.Payload) || r.Eth != p.Eth || r.SrcAddr() != p.SrcAddr() || r.DstAddr() != p.DstAddr() {
			t.Fatalf("round trip changed the packet:\n%+v\n%+v", p, r)
		}
	})
}

// FuzzGopacketDecode: the gopacket layers never panic and agree with Packet.Decode.
func FuzzGopacketDecode(f *testing.F) {
	for _, s := range seedFrames(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		gp := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		var p roce.Packet
		if err := p.Decode(data); err != nil {
			return
		}
		l, ok := gp.Layer(roce.LayerTypeBTH).(*roce.BTHLayer)
		if !ok || l.BTH != p.BTH {
			t.Fatalf("gopacket BTH %v, Packet.Decode %+v (errors: %v)", l, p.BTH, gp.ErrorLayer())
		}
	})
}

// fuzzHeader seeds f with the header at off in every captured frame whose opcode
// carries h, then checks decode → Put reproduces the input bytes.
func fuzzHeader(f *testing.F, h roce.Header, n int, roundTrip func([]byte) ([]byte, error)) {
	for _, fr := range readRoCE(f, allCaptureFiles(f, "rxe")) {
		p := &fr.pkt
		if h == 0 {
			f.Add(fr.data[p.BTHOff : p.BTHOff+roce.BTHLen])
			continue
		}
		if p.Headers&h == 0 {
			continue
		}
		off := p.BTHOff + roce.BTHLen
		for _, e := range []struct {
			h roce.Header
			n int
		}{{roce.HdrDETH, roce.DETHLen}, {roce.HdrFETH, roce.FETHLen}, {roce.HdrRETH, roce.RETHLen}, {roce.HdrAtomicETH, roce.AtomicETHLen},
			{roce.HdrAETH, roce.AETHLen}, {roce.HdrAtomicAckETH, roce.AtomicAckETHLen}, {roce.HdrImmDt, roce.ImmDtLen}} {
			if e.h == h {
				break
			}
			if p.Headers&e.h != 0 {
				off += e.n
			}
		}
		f.Add(fr.data[off : off+n])
	}
	f.Add(make([]byte, n))
	f.Add(bytes.Repeat([]byte{0xFF}, n))
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := roundTrip(data)
		if err != nil {
			if len(data) >= n && !errors.Is(err, roce.ErrBadVersion) {
				t.Fatalf("error on %d bytes: %v", len(data), err)
			}
			return
		}
		if len(data) < n {
			t.Fatalf("decoded %d bytes, header is %d", len(data), n)
		}
		if !bytes.Equal(out, data[:n]) {
			t.Fatalf("Put(Decode(%x)) = %x", data[:n], out)
		}
	})
}

func FuzzDecodeBTH(f *testing.F) {
	fuzzHeader(f, 0, roce.BTHLen, func(b []byte) ([]byte, error) {
		h, err := roce.DecodeBTH(b)
		out := make([]byte, roce.BTHLen)
		h.Put(out)
		return out, err
	})
}

func FuzzDecodeRETH(f *testing.F) {
	fuzzHeader(f, roce.HdrRETH, roce.RETHLen, func(b []byte) ([]byte, error) {
		h, err := roce.DecodeRETH(b)
		out := make([]byte, roce.RETHLen)
		h.Put(out)
		return out, err
	})
}

func FuzzDecodeAETH(f *testing.F) {
	fuzzHeader(f, roce.HdrAETH, roce.AETHLen, func(b []byte) ([]byte, error) {
		h, err := roce.DecodeAETH(b)
		out := make([]byte, roce.AETHLen)
		h.Put(out)
		return out, err
	})
}

func FuzzDecodeAtomicETH(f *testing.F) {
	fuzzHeader(f, roce.HdrAtomicETH, roce.AtomicETHLen, func(b []byte) ([]byte, error) {
		h, err := roce.DecodeAtomicETH(b)
		out := make([]byte, roce.AtomicETHLen)
		h.Put(out)
		return out, err
	})
}

func FuzzDecodeAtomicAckETH(f *testing.F) {
	fuzzHeader(f, roce.HdrAtomicAckETH, roce.AtomicAckETHLen, func(b []byte) ([]byte, error) {
		h, err := roce.DecodeAtomicAckETH(b)
		out := make([]byte, roce.AtomicAckETHLen)
		h.Put(out)
		return out, err
	})
}

func FuzzDecodeImmDt(f *testing.F) {
	fuzzHeader(f, roce.HdrImmDt, roce.ImmDtLen, func(b []byte) ([]byte, error) {
		h, err := roce.DecodeImmDt(b)
		out := make([]byte, roce.ImmDtLen)
		h.Put(out)
		return out, err
	})
}

func FuzzDecodeIETH(f *testing.F) {
	fuzzHeader(f, roce.HdrIETH, roce.IETHLen, func(b []byte) ([]byte, error) {
		h, err := roce.DecodeIETH(b)
		out := make([]byte, roce.IETHLen)
		h.Put(out)
		return out, err
	})
}

func FuzzDecodeDETH(f *testing.F) {
	fuzzHeader(f, roce.HdrDETH, roce.DETHLen, func(b []byte) ([]byte, error) {
		h, err := roce.DecodeDETH(b)
		out := make([]byte, roce.DETHLen)
		h.Put(out)
		return out, err
	})
}

func FuzzDecodeFETH(f *testing.F) {
	fuzzHeader(f, roce.HdrFETH, roce.FETHLen, func(b []byte) ([]byte, error) {
		h, err := roce.DecodeFETH(b)
		out := make([]byte, roce.FETHLen)
		h.Put(out)
		return out, err
	})
}
