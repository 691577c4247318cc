package pcap_test

import (
	"testing"

	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/test/captures"
)

// facts are values of one source's captures that the tests name: frame numbers
// (1-based, as tshark and xroce dump number them), QPNs, PSNs and keys. Each source
// is its own recording, so each has its own; xroce dump FILE shows them all.
type facts struct {
	// ib_write_bw.pcap: how many frames; the first RDMA_WRITE_FIRST (1098 bytes);
	// where each run's TCP exchange starts.
	writeFrames, writeFirst int
	streamFirst             [2]int
	// ib_write_bw.pcap's first connection as the server (10.77.0.11) sees it: its
	// QPN, the client's QPN, the first request PSN, the first WRITE's rkey and
	// virtual address; where the second connection starts.
	writeQPN, writePeerQPN, writePSN uint32
	writeRKey                        uint32
	writeVA                          uint64
	writeRun2                        int
	// ib_write_bw.pcap's second run: a RDMA_WRITE_MIDDLE (cut out or skipped),
	// with its PSN; the request before it; the response frame in which the engine
	// NAKs instead; the last request of the run; the engine's response number there
	// and how many captured responses follow it.
	cut, prev, nakAt, lastRequest int
	cutPSN                        uint32
	partedAt, notCompared         int
	// ib_read_bw.pcap: a RDMA_READ_RESPONSE_MIDDLE of the second run; responses in
	// the second connection; the first READ request and the response it gets
	// first; where the second run's frames start (0-based, for the fuzz target).
	readMiddle, readConn2Responses int
	readRequest, readResponse      int
	readRun2                       int
	// hostpeer_bad_icrc.pcap as rdma_rxe (10.77.0.12) sees it: its QPN, the host
	// peer's, the first PSN the host peer sends.
	badQPN, badPeerQPN, badPSN uint32
	// ib_atomic_bw.pcap: the rkey of the atomics; their frames (first, last).
	atomicRKey              uint32
	atomicFirst, atomicLast int
}

var sourceFacts = map[string]facts{
	captures.Shared: {
		writeFrames: 110, writeFirst: 71, streamFirst: [2]int{3, 52},
		writeQPN: 0x11, writePeerQPN: 0x11, writePSN: 1616767, writeRKey: 0x28e, writeVA: 0x564da7911000, writeRun2: 71,
		cut: 75, prev: 74, nakAt: 87, lastRequest: 85, cutPSN: 4052737, partedAt: 2, notCompared: 3,
		readMiddle: 80, readConn2Responses: 15, readRequest: 71, readResponse: 76, readRun2: 59,
		badQPN: 0x23, badPeerQPN: 0xabc, badPSN: 2549261,
		atomicRKey: 0x101c, atomicFirst: 20, atomicLast: 24,
	},
	captures.Testdata: {
		writeFrames: 114, writeFirst: 75, streamFirst: [2]int{3, 54},
		writeQPN: 0x11, writePeerQPN: 0x11, writePSN: 14366985, writeRKey: 0x29f, writeVA: 0x559efaf2a000, writeRun2: 75,
		cut: 80, prev: 79, nakAt: 82, lastRequest: 93, cutPSN: 1150964, partedAt: 2, notCompared: 3,
		readMiddle: 79, readConn2Responses: 15, readRequest: 73, readResponse: 74, readRun2: 62,
		badQPN: 0x23, badPeerQPN: 0x11, badPSN: 6843189,
		atomicRKey: 0xcd8, atomicFirst: 20, atomicLast: 24,
	},
}

// capture is the path of a capture of the source.
func capture(t testing.TB, s captures.Source, name string) string { return s.Path(t, name) }

func readCapture(t *testing.T, s captures.Source, name string) []pcap.Frame {
	t.Helper()
	frames, err := pcap.ReadFile(capture(t, s, name))
	if err != nil {
		t.Fatal(err)
	}
	return frames
}

// factsOf returns the facts of the source.
func factsOf(t *testing.T, s captures.Source) facts { return captures.Pick(t, s, sourceFacts) }
