package rocelayers_test

import (
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/internal/rocetest"
	"github.com/xroce/xroce/roce/rocelayers"
)

// FuzzGopacketDecode: the gopacket layers never panic and agree with Packet.Decode.
// The seeds are every RoCE frame of the rdma_rxe captures plus the sample packets over
// IPv4 and IPv6.
func FuzzGopacketDecode(f *testing.F) {
	for _, fr := range rocetest.ReadRoCE(f, rocetest.CaptureFiles(f, "rxe")) {
		f.Add(fr.Data)
	}
	for _, v6 := range []bool{false, true} {
		for name := range rocetest.Samples(v6) {
			f.Add(rocetest.EncodeSample(f, name, v6))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		gp := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		var p roce.Packet
		if err := p.Decode(data); err != nil {
			return
		}
		l, ok := gp.Layer(rocelayers.LayerTypeBTH).(*rocelayers.BTHLayer)
		if !ok || l.BTH != p.BTH {
			t.Fatalf("gopacket BTH %v, Packet.Decode %+v (errors: %v)", l, p.BTH, gp.ErrorLayer())
		}
	})
}
