package roce

import (
	"encoding/binary"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// gopacket layers for RoCEv2. Importing this package registers a decoder on UDP port
// 4791, so gopacket.NewPacket(frame, layers.LayerTypeEthernet, …) yields Ethernet /
// IPv4 or IPv6 / UDP / BTH / extension headers / Payload. The pad and ICRC are held by
// the BTH layer, so Payload is exactly the message data.
//
// These layers are for tools and tests; Packet.Decode is the validating decoder. The
// layers check the transport headers as Packet.Decode does, but not the ICRC (it
// needs the IP header) nor the IP and UDP lengths (gopacket's own layers own those).
// gopacket looks the port up as destination and then as source; a datagram sent from
// port 4791 to another port is left as Payload here, as Packet.Decode refuses it.
//
// gopacket.DecodingLayerParser can decode up to the BTH only: the BTH's Payload holds
// the extension headers and data, and the extension layers cannot stand alone because
// which header follows depends on the opcode; the parser reports the next layer type
// as unsupported rather than guessing.
//
// The layers also serialize. gopacket.SerializeLayers writes the BTH before the IP
// header exists, so the ICRC cannot be computed there: call FinishFrame (or use
// SerializeFrame) on the result. Packet.Encode produces the same bytes.

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
	layers.RegisterUDPPortLayerType(UDPPort, LayerTypeBTH)
}

// BTHLayer is the gopacket layer of the BTH. Its Payload is the extension headers
// and message data; Pad and ICRC hold the trailer.
type BTHLayer struct {
	layers.BaseLayer
	BTH
	Pad  []byte // PadCnt bytes between payload and ICRC
	ICRC uint32 // as carried (decode) or a placeholder that FinishFrame overwrites
}

// LayerType implements gopacket.Layer.
func (l *BTHLayer) LayerType() gopacket.LayerType { return LayerTypeBTH }

// CanDecode implements gopacket.DecodingLayer.
func (l *BTHLayer) CanDecode() gopacket.LayerClass { return LayerTypeBTH }

// NextLayerType returns the first extension header's layer type, or Payload.
func (l *BTHLayer) NextLayerType() gopacket.LayerType {
	return nextLayer(opcodeTable[l.Opcode].Headers, 0)
}

// DecodeFromBytes decodes the UDP payload: BTH, then checks the opcode, lengths and
// pad as Packet.Decode does (same errors), leaving the extension headers and message
// data in Payload. The ICRC is not verified: it needs the IP header (use
// Packet.Decode on the frame).
func (l *BTHLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	var p Packet
	if err := p.decodeTransport(data, 0); err != nil {
		if err == ErrTruncated {
			df.SetTruncated()
		}
		return err
	}
	l.BTH = p.BTH
	l.ICRC = p.ICRC
	end := p.PayloadOff + len(p.Payload)
	l.Pad = data[end:p.ICRCOff]
	l.Contents = data[:BTHLen]
	l.Payload = data[BTHLen:end]
	return nil
}

// SerializeTo prepends the BTH and appends pad and ICRC (a placeholder; see
// FinishFrame) to the already-serialized extension headers and payload. With
// opts.FixLengths it sets PadCnt to pad the payload to 4 bytes; otherwise it appends
// PadCnt pad bytes as given.
func (l *BTHLayer) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	pad := int(l.PadCnt & 3)
	if opts.FixLengths {
		pad = padFor(len(b.Bytes()))
	}
	tail, err := b.AppendBytes(pad + ICRCLen)
	if err != nil {
		return err
	}
	clear(tail[:pad])
	binary.LittleEndian.PutUint32(tail[pad:], l.ICRC)
	if opts.FixLengths {
		l.PadCnt = uint8(pad)
	}
	h, err := b.PrependBytes(BTHLen)
	if err != nil {
		return err
	}
	l.BTH.Put(h)
	return nil
}

// extHeader is implemented by the pointer types of the extension headers.
type extHeader[H any] interface {
	*H
	Put([]byte)
	extInfo() (Header, int, gopacket.LayerType)
	decodeExt([]byte)
}

// ExtLayer is the gopacket layer of one extension header; use the aliases RETHLayer,
// AETHLayer and so on.
type ExtLayer[H any, P extHeader[H]] struct {
	layers.BaseLayer
	Header H
}

// Gopacket layers for each extension header.
type (
	DETHLayer         = ExtLayer[DETH, *DETH]
	FETHLayer         = ExtLayer[FETH, *FETH]
	RETHLayer         = ExtLayer[RETH, *RETH]
	AtomicETHLayer    = ExtLayer[AtomicETH, *AtomicETH]
	AETHLayer         = ExtLayer[AETH, *AETH]
	AtomicAckETHLayer = ExtLayer[AtomicAckETH, *AtomicAckETH]
	ImmDtLayer        = ExtLayer[ImmDt, *ImmDt]
	IETHLayer         = ExtLayer[IETH, *IETH]
	CNPReservedLayer  = ExtLayer[CNPReserved, *CNPReserved]
)

// CNPReserved is the 16 reserved bytes after a CNP's BTH (Annex A17.9.3).
type CNPReserved [CNPReservedLen]byte

// Put writes h into b[0:CNPReservedLen].
func (h *CNPReserved) Put(b []byte) { copy(b[:CNPReservedLen], h[:]) }

func (*DETH) extInfo() (Header, int, gopacket.LayerType) { return HdrDETH, DETHLen, LayerTypeDETH }
func (*FETH) extInfo() (Header, int, gopacket.LayerType) { return HdrFETH, FETHLen, LayerTypeFETH }
func (*RETH) extInfo() (Header, int, gopacket.LayerType) { return HdrRETH, RETHLen, LayerTypeRETH }
func (*AtomicETH) extInfo() (Header, int, gopacket.LayerType) {
	return HdrAtomicETH, AtomicETHLen, LayerTypeAtomicETH
}
func (*AETH) extInfo() (Header, int, gopacket.LayerType) { return HdrAETH, AETHLen, LayerTypeAETH }
func (*AtomicAckETH) extInfo() (Header, int, gopacket.LayerType) {
	return HdrAtomicAckETH, AtomicAckETHLen, LayerTypeAtomicAckETH
}
func (*ImmDt) extInfo() (Header, int, gopacket.LayerType) { return HdrImmDt, ImmDtLen, LayerTypeImmDt }
func (*IETH) extInfo() (Header, int, gopacket.LayerType)  { return HdrIETH, IETHLen, LayerTypeIETH }
func (*CNPReserved) extInfo() (Header, int, gopacket.LayerType) {
	return HdrCNPReserved, CNPReservedLen, LayerTypeCNPReserved
}

// decodeExt methods read a header whose length the caller has checked.
func (h *DETH) decodeExt(b []byte)         { *h, _ = DecodeDETH(b) }
func (h *FETH) decodeExt(b []byte)         { *h, _ = DecodeFETH(b) }
func (h *RETH) decodeExt(b []byte)         { *h, _ = DecodeRETH(b) }
func (h *AtomicETH) decodeExt(b []byte)    { *h, _ = DecodeAtomicETH(b) }
func (h *AETH) decodeExt(b []byte)         { *h, _ = DecodeAETH(b) }
func (h *AtomicAckETH) decodeExt(b []byte) { *h, _ = DecodeAtomicAckETH(b) }
func (h *ImmDt) decodeExt(b []byte)        { *h, _ = DecodeImmDt(b) }
func (h *IETH) decodeExt(b []byte)         { *h, _ = DecodeIETH(b) }
func (h *CNPReserved) decodeExt(b []byte)  { copy(h[:], b) }

// LayerType implements gopacket.Layer.
func (l *ExtLayer[H, P]) LayerType() gopacket.LayerType {
	_, _, t := P(&l.Header).extInfo()
	return t
}

// DecodeFromBytes reads the header from the start of data (ErrTruncated if short);
// the rest is Payload.
func (l *ExtLayer[H, P]) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	_, n, _ := P(&l.Header).extInfo()
	if len(data) < n {
		df.SetTruncated()
		return ErrTruncated
	}
	P(&l.Header).decodeExt(data)
	l.Contents, l.Payload = data[:n], data[n:]
	return nil
}

// SerializeTo prepends the header.
func (l *ExtLayer[H, P]) SerializeTo(b gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	_, n, _ := P(&l.Header).extInfo()
	h, err := b.PrependBytes(n)
	if err != nil {
		return err
	}
	P(&l.Header).Put(h)
	return nil
}

// nextLayer returns the layer type of the first header in hs after the ones in done,
// or Payload.
func nextLayer(hs, done Header) gopacket.LayerType {
	for _, e := range headerOrder {
		if hs&e.h != 0 && done&e.h == 0 {
			return extLayerType(e.h)
		}
	}
	return gopacket.LayerTypePayload
}

// extLayers makes an empty layer for each extension header bit.
var extLayers = map[Header]func() extDecodingLayer{
	HdrDETH:         func() extDecodingLayer { return &DETHLayer{} },
	HdrFETH:         func() extDecodingLayer { return &FETHLayer{} },
	HdrRETH:         func() extDecodingLayer { return &RETHLayer{} },
	HdrAtomicETH:    func() extDecodingLayer { return &AtomicETHLayer{} },
	HdrAETH:         func() extDecodingLayer { return &AETHLayer{} },
	HdrAtomicAckETH: func() extDecodingLayer { return &AtomicAckETHLayer{} },
	HdrImmDt:        func() extDecodingLayer { return &ImmDtLayer{} },
	HdrIETH:         func() extDecodingLayer { return &IETHLayer{} },
	HdrCNPReserved:  func() extDecodingLayer { return &CNPReservedLayer{} },
}

func extLayerType(h Header) gopacket.LayerType { return extLayers[h]().LayerType() }

type extDecodingLayer interface {
	gopacket.Layer
	DecodeFromBytes([]byte, gopacket.DecodeFeedback) error
}

// decodeRoCE decodes a UDP/4791 payload into the BTH layer, one layer per extension
// header, and the message data as Payload.
func decodeRoCE(data []byte, p gopacket.PacketBuilder) error {
	if pkt, ok := p.(gopacket.Packet); ok {
		if udp, ok := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP); ok && udp.DstPort != UDPPort {
			return p.NextDecoder(gopacket.LayerTypePayload) // from port 4791, not to it
		}
	}
	bth := &BTHLayer{}
	if err := bth.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(bth)
	hs := opcodeTable[bth.Opcode].Headers
	rest := bth.Payload
	for _, e := range headerOrder {
		if hs&e.h == 0 {
			continue
		}
		l := extLayers[e.h]()
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
// and then FinishFrame. opts should set FixLengths and ComputeChecksums (for the IPv4
// header checksum); gopacket then requires the UDP layer's SetNetworkLayerForChecksum.
// FinishFrame overwrites the UDP checksum with RoCEv2's: 0 on IPv4, computed over the
// finished frame on IPv6.
func SerializeFrame(buf gopacket.SerializeBuffer, opts gopacket.SerializeOptions, ls ...gopacket.SerializableLayer) error {
	if err := gopacket.SerializeLayers(buf, opts, ls...); err != nil {
		return err
	}
	return FinishFrame(buf.Bytes())
}
