package rocelayers_test

import (
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/internal/rocetest"
	"github.com/xroce/xroce/roce/rocelayers"
)

// BenchmarkGopacketDecodeWriteFrame: gopacket's decode of the first RDMA_WRITE_FIRST
// frame of the ib_write_bw capture (1098 bytes), for comparison with roce's
// BenchmarkDecodeWriteFrame.
func BenchmarkGopacketDecodeWriteFrame(b *testing.B) {
	var frame []byte
	for _, f := range rocetest.ReadRoCE(b, rocetest.CaptureFiles(b, "rxe")) {
		if f.File == "ib_write_bw.pcap" && f.Pkt.BTH.Opcode == roce.RC_RDMA_WRITE_FIRST {
			frame = f.Data
			break
		}
	}
	if frame == nil {
		b.Fatal("no RDMA_WRITE_FIRST in ib_write_bw.pcap")
	}
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		gp := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.NoCopy)
		if gp.Layer(rocelayers.LayerTypeBTH) == nil {
			b.Fatal("no BTH")
		}
	}
}
