package pcap_test

import (
	"path/filepath"
	"testing"

	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/transport"
)

// BenchmarkLink sends and receives batches of 32 1098-byte frames (RDMA WRITE
// MIDDLE at path MTU 1024) over a Pipe, directly and through a Tap recording both
// directions as pcapng: the cost of --pcap per frame. Without --pcap the Tap is not
// in the chain, so the direct figure is what the engine pays.
func BenchmarkLink(b *testing.B) {
	frame := make([]byte, 1098)
	batch := make([][]byte, 32)
	for i := range batch {
		batch[i] = frame
	}
	for _, tapped := range []bool{false, true} {
		name := "direct"
		if tapped {
			name = "tap"
		}
		b.Run(name, func(b *testing.B) {
			x, y := transport.NewPipe(transport.PipeConfig{}, transport.PipeConfig{})
			var tx, rx transport.Link = x, y
			if tapped {
				tap, err := pcap.NewTap(x, filepath.Join(b.TempDir(), "b.pcapng"), pcap.TapOptions{})
				if err != nil {
					b.Fatal(err)
				}
				defer tap.Close()
				tx = tap
			}
			out := make([][]byte, 32)
			b.SetBytes(int64(len(frame) * len(batch)))
			b.ReportAllocs()
			for b.Loop() {
				if n, err := tx.Send(batch); n != len(batch) || err != nil {
					b.Fatal(n, err)
				}
				if n, err := rx.Recv(out); n != len(batch) || err != nil {
					b.Fatal(n, err)
				}
			}
		})
	}
}
