package main

import (
	"testing"

	"github.com/xroce/xroce/test/captures"
)

// facts are values of one source's captures that the dump and replay tests name:
// frame numbers (1-based, as xroce dump and tshark number them), PSNs and keys. Each
// source is its own recording (test/captures), so each has its own.
type facts struct {
	// ib_write_bw.pcap: the first run's first PSN, rkey and virtual address; the
	// frames of the second connection; the first run's ACK with MSN 2.
	writePSN     uint32
	writeRKey    uint32
	writeVA      uint64
	writeRun2    [2]int
	writeAckMSN2 int
	// ib_read_bw.pcap: the third READ of the second run, its RDMA_READ_RESPONSE_MIDDLE
	// (frame and PSN) and the request it answers.
	readMiddle, readRequest int
	readMiddlePSN           uint32
	// ib_send_bw.pcap: the third SEND_FIRST of the second run (cut out: the frames
	// after it are numbered one lower) and its PSN; the ACK with MSN 3 in the
	// numbering after the cut.
	sendCut, sendAckMSN3 int
	sendCutPSN           uint32
	// hostpeer_bad_icrc.pcap: xroce dump's line for the corrupted frame.
	badICRCLine string
	// ib_read_bw.pcap: three READ requests and three READ responses of the second
	// run, for the tap capture (0-based frame indices).
	tapRequests, tapResponses [3]int
}

var sourceFacts = map[string]facts{
	captures.Shared: {
		writePSN: 1616767, writeRKey: 0x28e, writeVA: 0x564da7911000, writeRun2: [2]int{52, 110}, writeAckMSN2: 28,
		readMiddle: 83, readRequest: 73, readMiddlePSN: 16152547,
		sendCut: 69, sendAckMSN3: 79, sendCutPSN: 9005482,
		badICRCLine:  "   14    0.008914 10.77.0.1:4791 → 10.77.0.12:4791 RC_SEND_ONLY QPN 0x000023 PSN 2549261 AckReq payload 64 ICRC BAD (carried 0x6fc330a2, computed 0x807d9d7c)\n",
		tapRequests:  [3]int{70, 71, 72},
		tapResponses: [3]int{75, 76, 77},
	},
	captures.Testdata: {
		writePSN: 14366985, writeRKey: 0x29f, writeVA: 0x559efaf2a000, writeRun2: [2]int{54, 114}, writeAckMSN2: 27,
		readMiddle: 83, readRequest: 81, readMiddlePSN: 11439970,
		sendCut: 67, sendAckMSN3: 77, sendCutPSN: 15698414,
		badICRCLine:  "   14    0.009031 10.77.0.1:4791 → 10.77.0.12:4791 RC_SEND_ONLY QPN 0x000023 PSN 6843189 AckReq payload 64 ICRC BAD (carried 0xdeadbeef, computed 0x67fd882f)\n",
		tapRequests:  [3]int{72, 76, 80},
		tapResponses: [3]int{73, 74, 75},
	},
}

// factsOf returns the facts of the source.
func factsOf(t *testing.T, s captures.Source) facts { return captures.Pick(t, s, sourceFacts) }
