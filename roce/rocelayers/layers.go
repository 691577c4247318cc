// Package rocelayers is gopacket's view of RoCEv2 (IBTA Vol 1 chapter 9, Annex A17):
// layers for the BTH and each extension header. Importing it registers a decoder on
// UDP port 4791, so gopacket.NewPacket(frame, layers.LayerTypeEthernet, …) yields
// Ethernet / IPv4 or IPv6 / UDP / BTH / extension headers / Payload. The pad and ICRC
// are held by the BTH layer, so Payload is exactly the message data. Package roce
// itself depends on the standard library only; this package adds
// github.com/google/gopacket for the programs that want it.
//
// These layers are for tools and tests; roce.Packet.Decode is the validating decoder.
// The layers check the transport headers as Packet.Decode does (the same errors), but
// not the ICRC (it needs the IP header) nor the IP and UDP lengths (gopacket's own
// layers own those). gopacket looks the port up as destination and then as source; a
// datagram sent from port 4791 to another port is left as Payload here, as
// Packet.Decode refuses it.
//
// gopacket.DecodingLayerParser can decode up to the BTH only: the BTH's Payload holds
// the extension headers and data, and the extension layers cannot stand alone because
// which header follows depends on the opcode; the parser reports the next layer type
// as unsupported rather than guessing.
//
// The layers also serialize. gopacket.SerializeLayers writes the BTH before the IP
// header exists, so the ICRC cannot be computed there: call roce.FinishFrame (or use
// SerializeFrame) on the result. roce.Packet.Encode produces the same bytes.
package rocelayers

import (
	"encoding/binary"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/xroce/xroce/roce"
)

// Layer type numbers, chosen from the RoCEv2 port so as not to clash with gopacket's.
var (
	LayerTypeBTH          = gopacket.RegisterLayerType(4791, gopacket.LayerTypeMetadata{Name: "BTH", Decoder: gopacket.DecodeFunc(decodeRoCE)})
	LayerTypeDETH         = gopacket.RegisterLayerType(4792, gopacket.LayerTypeMetadata{Name: "DETH", Decoder: nil})
	LayerTypeFETH         = gopacket.RegisterLayerType(4800, gopacket.LayerTypeMetadata{Name: "FETH", Decoder: nil})
	LayerTypeRETH         = gopacket.RegisterLayerType(4793, gopacket.LayerTypeMetadata{Name: "RETH", Decoder: nil})
	LayerTypeAtomicETH    = gopacket.RegisterLayerType(4794, gopacket.LayerTypeMetadata{Name: "AtomicETH", Decoder: nil})
	LayerTypeAETH         = gopacket.RegisterLayerType(4795, gopacket.LayerTypeMetadata{Name: "AETH", Decoder: nil})
	LayerTypeAtomicAckETH = gopacket.RegisterLayerType(4796, gopacket.LayerTypeMetadata{Name: "AtomicAckETH", Decoder: nil})
	LayerTypeImmDt        = gopacket.RegisterLayerType(4797, gopacket.LayerTypeMetadata{Name: "ImmDt", Decoder: nil})
	LayerTypeIETH         = gopacket.RegisterLayerType(4798, gopacket.LayerTypeMetadata{Name: "IETH", Decoder: nil})
	LayerTypeCNPReserved  = gopacket.RegisterLayerType(4799, gopacket.LayerTypeMetadata{Name: "CNPReserved", Decoder: nil})
)

func init() {
	layers.RegisterUDPPortLayerType(roce.UDPPort, LayerTypeBTH)
}

// BTHLayer is the gopacket layer of the BTH. Its Payload is the extension headers
// and message data; Pad and ICRC hold the trailer.
type BTHLayer struct {
	layers.BaseLayer
	roce.BTH
	Pad  []byte // PadCnt bytes between payload and ICRC
	ICRC uint32 // as carried (decode) or a placeholder that roce.FinishFrame overwrites
}

// LayerType implements gopacket.Layer.
func (l *BTHLayer) LayerType() gopacket.LayerType { return LayerTypeBTH }

// CanDecode implements gopacket.DecodingLayer.
func (l *BTHLayer) CanDecode() gopacket.LayerClass { return LayerTypeBTH }

// NextLayerType returns the first extension header's layer type, or Payload.
func (l *BTHLayer) NextLayerType() gopacket.LayerType {
	for h := range headers(l.Opcode.Info().Headers) {
		return layerTypeOf(h)
	}
	return gopacket.LayerTypePayload
}

// DecodeFromBytes decodes the UDP payload with roce.Packet.DecodeTransport: the BTH,
// then the opcode, lengths and pad are checked as roce.Packet.Decode checks them
// (same errors), leaving the extension headers and message data in Payload. The
// ICRC is not verified: it needs the IP header (use roce.Packet.Decode on the frame).
func (l *BTHLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	var p roce.Packet
	if err := p.DecodeTransport(data); err != nil {
		if err == roce.ErrTruncated {
			df.SetTruncated()
		}
		return err
	}
	l.BTH = p.BTH
	l.ICRC = p.ICRC
	end := p.PayloadOff + len(p.Payload)
	l.Pad = data[end:p.ICRCOff]
	l.Contents = data[:roce.BTHLen]
	l.Payload = data[roce.BTHLen:end]
	return nil
}

// SerializeTo prepends the BTH and appends pad and ICRC (a placeholder; see
// roce.FinishFrame) to the already-serialized extension headers and payload. With
// opts.FixLengths it sets PadCnt to pad the payload to 4 bytes; otherwise it appends
// PadCnt pad bytes as given.
func (l *BTHLayer) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	pad := int(l.PadCnt & 3)
	if opts.FixLengths {
		pad = -len(b.Bytes()) & 3
	}
	tail, err := b.AppendBytes(pad + roce.ICRCLen)
	if err != nil {
		return err
	}
	clear(tail[:pad])
	binary.LittleEndian.PutUint32(tail[pad:], l.ICRC)
	if opts.FixLengths {
		l.PadCnt = uint8(pad)
	}
	h, err := b.PrependBytes(roce.BTHLen)
	if err != nil {
		return err
	}
	l.BTH.Put(h)
	return nil
}

// CNPReserved is the 16 reserved bytes after a CNP's BTH (Annex A17.9.3), the
// header of CNPReservedLayer.
type CNPReserved [roce.CNPReservedLen]byte

// ExtHeader is the set of extension header types an ExtLayer can hold.
type ExtHeader interface {
	roce.DETH | roce.FETH | roce.RETH | roce.AtomicETH | roce.AETH | roce.AtomicAckETH |
		roce.ImmDt | roce.IETH | CNPReserved
}

// ExtLayer is the gopacket layer of one extension header; use the aliases RETHLayer,
// AETHLayer and so on.
type ExtLayer[H ExtHeader] struct {
	layers.BaseLayer
	Header H
}

// Gopacket layers for each extension header.
type (
	DETHLayer         = ExtLayer[roce.DETH]
	FETHLayer         = ExtLayer[roce.FETH]
	RETHLayer         = ExtLayer[roce.RETH]
	AtomicETHLayer    = ExtLayer[roce.AtomicETH]
	AETHLayer         = ExtLayer[roce.AETH]
	AtomicAckETHLayer = ExtLayer[roce.AtomicAckETH]
	ImmDtLayer        = ExtLayer[roce.ImmDt]
	IETHLayer         = ExtLayer[roce.IETH]
	CNPReservedLayer  = ExtLayer[CNPReserved]
)

// kind returns the roce.Header bit of the layer's header.
func (l *ExtLayer[H]) kind() roce.Header {
	switch any(&l.Header).(type) {
	case *roce.DETH:
		return roce.HdrDETH
	case *roce.FETH:
		return roce.HdrFETH
	case *roce.RETH:
		return roce.HdrRETH
	case *roce.AtomicETH:
		return roce.HdrAtomicETH
	case *roce.AETH:
		return roce.HdrAETH
	case *roce.AtomicAckETH:
		return roce.HdrAtomicAckETH
	case *roce.ImmDt:
		return roce.HdrImmDt
	case *roce.IETH:
		return roce.HdrIETH
	}
	return roce.HdrCNPReserved
}

// decode reads the header from b, whose length the caller has checked.
func (l *ExtLayer[H]) decode(b []byte) {
	switch h := any(&l.Header).(type) {
	case *roce.DETH:
		*h, _ = roce.DecodeDETH(b)
	case *roce.FETH:
		*h, _ = roce.DecodeFETH(b)
	case *roce.RETH:
		*h, _ = roce.DecodeRETH(b)
	case *roce.AtomicETH:
		*h, _ = roce.DecodeAtomicETH(b)
	case *roce.AETH:
		*h, _ = roce.DecodeAETH(b)
	case *roce.AtomicAckETH:
		*h, _ = roce.DecodeAtomicAckETH(b)
	case *roce.ImmDt:
		*h, _ = roce.DecodeImmDt(b)
	case *roce.IETH:
		*h, _ = roce.DecodeIETH(b)
	case *CNPReserved:
		copy(h[:], b)
	}
}

// put writes the header into b, which holds its length.
func (l *ExtLayer[H]) put(b []byte) {
	switch h := any(&l.Header).(type) {
	case *roce.DETH:
		h.Put(b)
	case *roce.FETH:
		h.Put(b)
	case *roce.RETH:
		h.Put(b)
	case *roce.AtomicETH:
		h.Put(b)
	case *roce.AETH:
		h.Put(b)
	case *roce.AtomicAckETH:
		h.Put(b)
	case *roce.ImmDt:
		h.Put(b)
	case *roce.IETH:
		h.Put(b)
	case *CNPReserved:
		copy(b, h[:])
	}
}

// LayerType implements gopacket.Layer.
func (l *ExtLayer[H]) LayerType() gopacket.LayerType { return layerTypeOf(l.kind()) }

// DecodeFromBytes reads the header from the start of data (roce.ErrTruncated if
// short); the rest is Payload.
func (l *ExtLayer[H]) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	n := l.kind().Len()
	if len(data) < n {
		df.SetTruncated()
		return roce.ErrTruncated
	}
	l.decode(data)
	l.Contents, l.Payload = data[:n], data[n:]
	return nil
}

// SerializeTo prepends the header.
func (l *ExtLayer[H]) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	h, err := b.PrependBytes(l.kind().Len())
	if err != nil {
		return err
	}
	l.put(h)
	return nil
}

// headers yields the extension header bits of hs one at a time, in the order they
// appear in a packet: the order of roce's Hdr constants.
func headers(hs roce.Header) func(yield func(roce.Header) bool) {
	return func(yield func(roce.Header) bool) {
		for h := roce.Header(1); h != 0 && h <= hs; h <<= 1 {
			if hs&h != 0 && !yield(h) {
				return
			}
		}
	}
}

// newExtLayer returns an empty layer for one extension header bit.
func newExtLayer(h roce.Header) extDecodingLayer {
	switch h {
	case roce.HdrDETH:
		return &DETHLayer{}
	case roce.HdrFETH:
		return &FETHLayer{}
	case roce.HdrRETH:
		return &RETHLayer{}
	case roce.HdrAtomicETH:
		return &AtomicETHLayer{}
	case roce.HdrAETH:
		return &AETHLayer{}
	case roce.HdrAtomicAckETH:
		return &AtomicAckETHLayer{}
	case roce.HdrImmDt:
		return &ImmDtLayer{}
	case roce.HdrIETH:
		return &IETHLayer{}
	}
	return &CNPReservedLayer{}
}

// layerTypeOf returns the layer type of one extension header bit.
func layerTypeOf(h roce.Header) gopacket.LayerType {
	switch h {
	case roce.HdrDETH:
		return LayerTypeDETH
	case roce.HdrFETH:
		return LayerTypeFETH
	case roce.HdrRETH:
		return LayerTypeRETH
	case roce.HdrAtomicETH:
		return LayerTypeAtomicETH
	case roce.HdrAETH:
		return LayerTypeAETH
	case roce.HdrAtomicAckETH:
		return LayerTypeAtomicAckETH
	case roce.HdrImmDt:
		return LayerTypeImmDt
	case roce.HdrIETH:
		return LayerTypeIETH
	}
	return LayerTypeCNPReserved
}

type extDecodingLayer interface {
	gopacket.Layer
	DecodeFromBytes([]byte, gopacket.DecodeFeedback) error
}

// decodeRoCE decodes a UDP/4791 payload into the BTH layer, one layer per extension
// header, and the message data as Payload.
func decodeRoCE(data []byte, p gopacket.PacketBuilder) error {
	if pkt, ok := p.(gopacket.Packet); ok {
		if udp, ok := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP); ok && udp.DstPort != roce.UDPPort {
			return p.NextDecoder(gopacket.LayerTypePayload) // from port 4791, not to it
		}
	}
	bth := &BTHLayer{}
	if err := bth.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(bth)
	rest := bth.Payload
	for h := range headers(bth.Opcode.Info().Headers) {
		l := newExtLayer(h)
		if err := l.DecodeFromBytes(rest, p); err != nil {
			return err
		}
		p.AddLayer(l)
		rest = l.LayerPayload()
	}
	return p.NextDecoder(gopacket.LayerTypePayload)
}

// SerializeFrame builds a whole RoCEv2 frame from gopacket layers (Ethernet, IPv4 or
// IPv6, UDP, BTHLayer, extension-header layers, Payload) with gopacket.SerializeLayers
// and then roce.FinishFrame. opts should set FixLengths and ComputeChecksums (for the
// IPv4 header checksum); gopacket then requires the UDP layer's
// SetNetworkLayerForChecksum. roce.FinishFrame overwrites the UDP checksum with
// RoCEv2's: 0 on IPv4, computed over the finished frame on IPv6.
func SerializeFrame(buf gopacket.SerializeBuffer, opts gopacket.SerializeOptions, ls ...gopacket.SerializableLayer) error {
	if err := gopacket.SerializeLayers(buf, opts, ls...); err != nil {
		return err
	}
	return roce.FinishFrame(buf.Bytes())
}
