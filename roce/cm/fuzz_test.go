package cm_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/roce/internal/rocetest"
)

// Seeds: every GSI frame of the rdma_rxe captures (both sources when present) and
// each sample message, over IPv4 and IPv6.

func seedGSIFrames(f *testing.F) [][]byte {
	var seeds [][]byte
	for _, fr := range rocetest.ReadRoCE(f, rocetest.CaptureFiles(f, "rxe")) {
		if fr.Err == nil && fr.Pkt.BTH.DestQP == cm.GSIQPN {
			seeds = append(seeds, fr.Data)
		}
	}
	for i, m := range samples() {
		for _, v6 := range []bool{false, true} {
			seeds = append(seeds, sampleFrame(m, uint64(i), 0, v6))
		}
	}
	return seeds
}

func seedMADs(f *testing.F) [][]byte {
	var seeds [][]byte
	for _, fr := range seedGSIFrames(f) {
		var p roce.Packet
		if p.Decode(fr) == nil {
			seeds = append(seeds, p.Payload)
		}
	}
	return seeds
}

func isCMError(err error) bool {
	var e *cm.Error
	return errors.As(err, &e) && e.Field != ""
}

// fieldMask returns, per attribute, which bits of a MAD the header and the message
// hold: what Encode writes from a MAD of all ones.
func fieldMask(attr cm.AttributeID) []byte {
	ones := bytes.Repeat([]byte{0xFF}, cm.MADLen)
	h, _ := cm.DecodeHeader(ones)
	m := cm.NewMessage(attr)
	_ = m.Decode(ones[cm.HeaderLen:])
	b := make([]byte, cm.MADLen)
	cm.Encode(b, h, m)
	return b
}

// FuzzDecode: Decode never panics and fails only with a *cm.Error; a MAD it accepts
// encodes back to its own bytes, but for the reserved bits (written as zeros), and
// decodes again to the same header and message.
func FuzzDecode(f *testing.F) {
	for _, s := range seedMADs(f) {
		f.Add(s)
	}
	masks := map[cm.AttributeID][]byte{}
	f.Fuzz(func(t *testing.T, mad []byte) {
		h, m, err := cm.Decode(mad)
		if err != nil {
			if !isCMError(err) || m != nil {
				t.Fatalf("error %#v with message %v", err, m)
			}
			return
		}
		mask, ok := masks[h.AttributeID]
		if !ok {
			mask = fieldMask(h.AttributeID)
			masks[h.AttributeID] = mask
		}
		b := make([]byte, cm.MADLen)
		cm.Encode(b, h, m)
		for i := range b {
			if b[i] != mad[i]&mask[i] {
				t.Fatalf("byte %d: encoded 0x%02x from 0x%02x (field bits 0x%02x)", i, b[i], mad[i], mask[i])
			}
		}
		h2, m2, err := cm.Decode(b)
		if err != nil || h2 != h || !equalMessages(m, m2) {
			t.Fatalf("second decode: %+v %+v %v", h2, m2, err)
		}
	})
}

// FuzzDecodeIPCMHeader: never panics, fails only with a *cm.Error; what it accepts
// puts back to the same bytes but for those it ignores (the reserved nibble, the 12
// bytes before an IPv4 address) and decodes again to the same header.
func FuzzDecodeIPCMHeader(f *testing.F) {
	for _, s := range seedMADs(f) {
		if h, m, err := cm.Decode(s); err == nil && h.AttributeID == cm.AttrREQ {
			f.Add(append([]byte(nil), m.(*cm.REQ).PrivateData[:]...))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := cm.DecodeIPCMHeader(b)
		if err != nil {
			if !isCMError(err) {
				t.Fatalf("error %#v", err)
			}
			return
		}
		out := make([]byte, cm.IPCMHeaderLen)
		h.Put(out)
		want := append([]byte(nil), b[:cm.IPCMHeaderLen]...)
		want[1] &= 0xF0
		if h.IPVersion == 4 {
			clear(want[4:16])
			clear(want[20:32])
		}
		if !bytes.Equal(out, want) {
			t.Fatalf("put %x\nwant %x", out, want)
		}
		if h2, err := cm.DecodeIPCMHeader(out); err != nil || h2 != h {
			t.Fatalf("second decode: %+v %v", h2, err)
		}
	})
}

// FuzzGSIFrame: a frame through roce's decoder, MADFromPacket and Decode never
// panics, and fails only with typed errors; a CM MAD it accepts, put back into the
// frame with SetGSIDatagram, decodes to the same message.
func FuzzGSIFrame(f *testing.F) {
	for _, s := range seedGSIFrames(f) {
		f.Add(s)
	}
	buf := make([]byte, 70000)
	f.Fuzz(func(t *testing.T, frame []byte) {
		var p roce.Packet
		if err := p.Decode(frame); err != nil && !errors.Is(err, roce.ErrBadICRC) {
			return
		}
		mad, err := cm.MADFromPacket(&p)
		if err != nil {
			if !isCMError(err) {
				t.Fatalf("error %#v", err)
			}
			return
		}
		h, m, err := cm.Decode(mad)
		if err != nil {
			if !isCMError(err) {
				t.Fatalf("error %#v", err)
			}
			return
		}
		q := p
		out := make([]byte, cm.MADLen)
		cm.Encode(out, h, m)
		cm.SetGSIDatagram(&q, out, p.BTH.PKey, p.BTH.PSN)
		n, err := q.Encode(buf)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		var r roce.Packet
		if err := r.Decode(buf[:n]); err != nil {
			t.Fatalf("decode of the rebuilt frame: %v", err)
		}
		mad2, err := cm.MADFromPacket(&r)
		if err != nil {
			t.Fatal(err)
		}
		h2, m2, err := cm.Decode(mad2)
		if err != nil || h2 != h || !equalMessages(m, m2) {
			t.Fatalf("rebuilt frame: %+v %+v %v", h2, m2, err)
		}
	})
}
