package roce_test

import (
	"fmt"
	"testing"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/internal/rocetest"
	"github.com/xroce/xroce/test/captures"
)

// writeFirstFrame returns the first RDMA_WRITE_FIRST frame (1098 bytes, 1024 of
// payload) of the ib_write_bw capture.
func writeFirstFrame(b *testing.B) []byte {
	for _, f := range rocetest.ReadRoCE(b, captures.Repo(b).Files(b, "rxe")) {
		if f.File == "ib_write_bw.pcap" && f.Pkt.BTH.Opcode == roce.RC_RDMA_WRITE_FIRST {
			return f.Data
		}
	}
	b.Fatal("no RDMA_WRITE_FIRST in ib_write_bw.pcap")
	return nil
}

// BenchmarkDecodeWriteFrame: full decode of an RDMA WRITE frame, ICRC included.
func BenchmarkDecodeWriteFrame(b *testing.B) {
	frame := writeFirstFrame(b)
	var p roce.Packet
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Decode(frame); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkICRC: the ICRC of RDMA WRITE MIDDLE frames with 64-, 2048- and 4096-byte
// payloads, as the sender computes and the receiver checks it.
func BenchmarkICRC(b *testing.B) {
	for _, n := range []int{64, 2048, 4096} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			p := rocetest.Samples(false)["RDMA_WRITE_MIDDLE"]
			p.Payload = make([]byte, n)
			buf := make([]byte, p.Len())
			if _, err := p.Encode(buf); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(buf)))
			for b.Loop() {
				if p.ComputeICRC() != p.ICRC {
					b.Fatal("ICRC")
				}
			}
		})
	}
}

// BenchmarkICRC4K: the ICRC of a frame carrying a 4096-byte payload.
func BenchmarkICRC4K(b *testing.B) {
	p := rocetest.Samples(false)["RDMA_WRITE_MIDDLE"]
	p.Payload = make([]byte, 4096)
	buf := make([]byte, p.Len())
	if _, err := p.Encode(buf); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if p.ComputeICRC() != p.ICRC {
			b.Fatal("ICRC")
		}
	}
}

// BenchmarkEncodeWriteFrame: building an RDMA WRITE frame with 1024 bytes of payload.
func BenchmarkEncodeWriteFrame(b *testing.B) {
	p := rocetest.Samples(false)["RDMA_WRITE_FIRST"]
	buf := make([]byte, p.Len())
	payload := p.Payload
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		p.Payload = payload
		if _, err := p.Encode(buf); err != nil {
			b.Fatal(err)
		}
	}
}
