package rocelayers_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/internal/rocetest"
	"github.com/xroce/xroce/roce/rocelayers"
)

// expectedLayerTypes lists the gopacket layers a decoded RoCE frame must yield.
func expectedLayerTypes(p *roce.Packet) []gopacket.LayerType {
	ts := []gopacket.LayerType{layers.LayerTypeEthernet}
	if p.Eth.HasVLAN {
		ts = append(ts, layers.LayerTypeDot1Q)
	}
	if p.IsIPv6 {
		ts = append(ts, layers.LayerTypeIPv6)
	} else {
		ts = append(ts, layers.LayerTypeIPv4)
	}
	ts = append(ts, layers.LayerTypeUDP, rocelayers.LayerTypeBTH)
	for _, h := range []struct {
		h roce.Header
		t gopacket.LayerType
	}{
		{roce.HdrDETH, rocelayers.LayerTypeDETH}, {roce.HdrFETH, rocelayers.LayerTypeFETH}, {roce.HdrRETH, rocelayers.LayerTypeRETH},
		{roce.HdrAtomicETH, rocelayers.LayerTypeAtomicETH}, {roce.HdrAETH, rocelayers.LayerTypeAETH},
		{roce.HdrAtomicAckETH, rocelayers.LayerTypeAtomicAckETH}, {roce.HdrImmDt, rocelayers.LayerTypeImmDt},
		{roce.HdrIETH, rocelayers.LayerTypeIETH}, {roce.HdrCNPReserved, rocelayers.LayerTypeCNPReserved},
	} {
		if p.Headers&h.h != 0 {
			ts = append(ts, h.t)
		}
	}
	if len(p.Payload) > 0 {
		ts = append(ts, gopacket.LayerTypePayload)
	}
	return ts
}

// checkGopacket decodes frame with gopacket and compares every layer with p.
func checkGopacket(t *testing.T, name string, frame []byte, p *roce.Packet) {
	t.Helper()
	gp := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	if el := gp.ErrorLayer(); el != nil {
		t.Fatalf("%s: gopacket: %v", name, el.Error())
	}
	var got []gopacket.LayerType
	for _, l := range gp.Layers() {
		got = append(got, l.LayerType())
	}
	want := expectedLayerTypes(p)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: layers %v, want %v", name, got, want)
	}
	bth := gp.Layer(rocelayers.LayerTypeBTH).(*rocelayers.BTHLayer)
	if bth.BTH != p.BTH || bth.ICRC != p.ICRC || len(bth.Pad) != int(p.BTH.PadCnt) {
		t.Errorf("%s: BTH layer %+v ICRC %08x, want %+v %08x", name, bth.BTH, bth.ICRC, p.BTH, p.ICRC)
	}
	if l, ok := gp.Layer(rocelayers.LayerTypeRETH).(*rocelayers.RETHLayer); ok && l.Header != p.RETH {
		t.Errorf("%s: RETH %+v, want %+v", name, l.Header, p.RETH)
	}
	if l, ok := gp.Layer(rocelayers.LayerTypeAETH).(*rocelayers.AETHLayer); ok && l.Header != p.AETH {
		t.Errorf("%s: AETH %+v, want %+v", name, l.Header, p.AETH)
	}
	if l, ok := gp.Layer(rocelayers.LayerTypeAtomicETH).(*rocelayers.AtomicETHLayer); ok && l.Header != p.AtomicETH {
		t.Errorf("%s: AtomicETH %+v, want %+v", name, l.Header, p.AtomicETH)
	}
	if l, ok := gp.Layer(rocelayers.LayerTypeAtomicAckETH).(*rocelayers.AtomicAckETHLayer); ok && l.Header != p.AtomicAckETH {
		t.Errorf("%s: AtomicAckETH %+v, want %+v", name, l.Header, p.AtomicAckETH)
	}
	if l, ok := gp.Layer(rocelayers.LayerTypeImmDt).(*rocelayers.ImmDtLayer); ok && l.Header != p.ImmDt {
		t.Errorf("%s: ImmDt %x, want %x", name, l.Header, p.ImmDt)
	}
	if l, ok := gp.Layer(rocelayers.LayerTypeIETH).(*rocelayers.IETHLayer); ok && l.Header != p.IETH {
		t.Errorf("%s: IETH %+v, want %+v", name, l.Header, p.IETH)
	}
	if l, ok := gp.Layer(rocelayers.LayerTypeFETH).(*rocelayers.FETHLayer); ok && l.Header != p.FETH {
		t.Errorf("%s: FETH %+v, want %+v", name, l.Header, p.FETH)
	}
	if l, ok := gp.Layer(rocelayers.LayerTypeDETH).(*rocelayers.DETHLayer); ok && l.Header != p.DETH {
		t.Errorf("%s: DETH %+v, want %+v", name, l.Header, p.DETH)
	}
	var payload []byte
	if app := gp.ApplicationLayer(); app != nil {
		payload = app.Payload()
	}
	if !bytes.Equal(payload, p.Payload) {
		t.Errorf("%s: payload %d bytes, want %d", name, len(payload), len(p.Payload))
	}
}

// serializeLayers rebuilds p's frame from gopacket layers and SerializeFrame.
func serializeLayers(t *testing.T, p *roce.Packet) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr(p.Eth.Src[:]), DstMAC: net.HardwareAddr(p.Eth.Dst[:])}
	ls := []gopacket.SerializableLayer{eth}
	udp := &layers.UDP{SrcPort: layers.UDPPort(p.UDP.SrcPort), DstPort: layers.UDPPort(p.UDP.DstPort)}
	if p.IsIPv6 {
		eth.EthernetType = layers.EthernetTypeIPv6
		ip := &layers.IPv6{Version: 6, TrafficClass: p.IPv6.TrafficClass, FlowLabel: p.IPv6.FlowLabel,
			NextHeader: layers.IPProtocolUDP, HopLimit: p.IPv6.HopLimit,
			SrcIP: net.IP(p.IPv6.Src[:]), DstIP: net.IP(p.IPv6.Dst[:])}
		if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
			t.Fatal(err)
		}
		ls = append(ls, ip)
	} else {
		eth.EthernetType = layers.EthernetTypeIPv4
		ip := &layers.IPv4{Version: 4, TOS: p.IPv4.TOS, Id: p.IPv4.ID,
			Flags: layers.IPv4Flag(p.IPv4.FlagsFrag >> 13), FragOffset: p.IPv4.FlagsFrag & 0x1FFF,
			TTL: p.IPv4.TTL, Protocol: layers.IPProtocolUDP,
			SrcIP: net.IP(p.IPv4.Src[:]), DstIP: net.IP(p.IPv4.Dst[:])}
		if err := udp.SetNetworkLayerForChecksum(ip); err != nil {
			t.Fatal(err)
		}
		ls = append(ls, ip)
	}
	ls = append(ls, udp, &rocelayers.BTHLayer{BTH: p.BTH})
	h := p.Headers
	if h&roce.HdrDETH != 0 {
		ls = append(ls, &rocelayers.DETHLayer{Header: p.DETH})
	}
	if h&roce.HdrFETH != 0 {
		ls = append(ls, &rocelayers.FETHLayer{Header: p.FETH})
	}
	if h&roce.HdrRETH != 0 {
		ls = append(ls, &rocelayers.RETHLayer{Header: p.RETH})
	}
	if h&roce.HdrAtomicETH != 0 {
		ls = append(ls, &rocelayers.AtomicETHLayer{Header: p.AtomicETH})
	}
	if h&roce.HdrAETH != 0 {
		ls = append(ls, &rocelayers.AETHLayer{Header: p.AETH})
	}
	if h&roce.HdrAtomicAckETH != 0 {
		ls = append(ls, &rocelayers.AtomicAckETHLayer{Header: p.AtomicAckETH})
	}
	if h&roce.HdrImmDt != 0 {
		ls = append(ls, &rocelayers.ImmDtLayer{Header: p.ImmDt})
	}
	if h&roce.HdrIETH != 0 {
		ls = append(ls, &rocelayers.IETHLayer{Header: p.IETH})
	}
	if h&roce.HdrCNPReserved != 0 {
		ls = append(ls, &rocelayers.CNPReservedLayer{Header: p.CNPReserved})
	}
	ls = append(ls, gopacket.Payload(p.Payload))
	buf := gopacket.NewSerializeBuffer()
	opts := gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}
	if err := rocelayers.SerializeFrame(buf, opts, ls...); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestGopacketOnCaptures decodes every captured RoCE frame with gopacket and checks
// the layers agree with Packet.Decode; then rebuilds each frame from gopacket layers
// and checks the bytes equal the capture's.
func TestGopacketOnCaptures(t *testing.T) {
	for _, f := range rocetest.ReadRoCE(t, rocetest.CaptureFiles(t, "rxe")) {
		if f.Err != nil {
			if !errors.Is(f.Err, roce.ErrBadICRC) {
				t.Fatalf("%s frame %d: %v", f.File, f.Index, f.Err)
			}
			continue
		}
		name := fmt.Sprintf("%s frame %d", f.File, f.Index)
		checkGopacket(t, name, f.Data, &f.Pkt)
		want, _ := rocetest.EncodedForm(t, &f)
		if got := serializeLayers(t, &f.Pkt); !bytes.Equal(got, want) {
			t.Errorf("%s: gopacket serialization\n%x\nwant\n%x", name, got, want)
		}
	}
}

// TestSerializeLayersEqualsEncode builds every sample packet both ways, over IPv4 and
// IPv6, and requires identical bytes that decode back to the same fields.
func TestSerializeLayersEqualsEncode(t *testing.T) {
	buf := make([]byte, 9000)
	for _, v6 := range []bool{false, true} {
		for name, p := range rocetest.Samples(v6) {
			name = fmt.Sprintf("%s/v6=%v", name, v6)
			n, err := p.Encode(buf)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			enc := buf[:n]
			if got := serializeLayers(t, &p); !bytes.Equal(got, enc) {
				t.Errorf("%s: SerializeFrame\n%x\nEncode\n%x", name, got, enc)
			}
			var q roce.Packet
			if err := q.Decode(enc); err != nil {
				t.Fatalf("%s: decode: %v", name, err)
			}
			checkGopacket(t, name, enc, &q)
		}
	}
}

// TestGopacketEdges: a datagram from port 4791 to another port is not RoCE; the
// DecodingLayerParser stops after the BTH with an error instead of misreading the
// extension headers as payload; without FixLengths the BTH's PadCnt decides the pad.
func TestGopacketEdges(t *testing.T) {
	f := rocetest.EncodeSample(t, "RDMA_WRITE_ONLY_WITH_IMMEDIATE", false)
	g := append([]byte(nil), f...)
	g[34], g[35], g[36], g[37] = 0x12, 0xb7, 0x9c, 0x40 // sport 4791, dport 40000
	gp := gopacket.NewPacket(g, layers.LayerTypeEthernet, gopacket.Default)
	if gp.Layer(rocelayers.LayerTypeBTH) != nil {
		t.Error("decoded RoCE from source port 4791")
	}
	var eth layers.Ethernet
	var ip4 layers.IPv4
	var udp layers.UDP
	var bth rocelayers.BTHLayer
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &ip4, &udp, &bth)
	var decoded []gopacket.LayerType
	err := parser.DecodeLayers(f, &decoded)
	if _, ok := err.(gopacket.UnsupportedLayerType); !ok || len(decoded) != 4 || bth.Opcode != roce.RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE {
		t.Errorf("DecodingLayerParser: %v, layers %v", err, decoded)
	}
	if len(bth.Payload) != roce.RETHLen+roce.ImmDtLen+8 {
		t.Errorf("BTH payload %d bytes, want RETH+ImmDt+8", len(bth.Payload))
	}
	buf := gopacket.NewSerializeBuffer()
	l := &rocelayers.BTHLayer{BTH: roce.BTH{Opcode: roce.RC_SEND_ONLY, PadCnt: 1}}
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, l, gopacket.Payload{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	if got := buf.Bytes(); len(got) != 12+3+1+4 || got[1]>>4&3 != 1 {
		t.Errorf("serialized %x", got)
	}
}
