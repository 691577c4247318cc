package roce_test

import (
	"bytes"
	"encoding/hex"
	"testing"

	"github.com/xroce/xroce/roce"
)

// connectXCNP is a CNP as a ConnectX NIC sends it: the IPv4 datagram of NVIDIA's
// "RoCEv2 CNP Packet Format Example" (community.mellanox.com), as reproduced in the
// unit test of Haggai Eran's libconntrack-cm (BSD-2-Clause; cnp_gen's
// expected_cnp): 22.22.22.8 → 22.22.22.7, ID 0x98c6, DF, TTL 0x20, TOS 0x89 (DSCP
// 34, ECT(1)), UDP 56238 → 4791 with checksum 0, BTH opcode 0x81, P_Key 0xFFFF, BECN,
// DestQP 0xd2, PSN 0, 16 reserved zero bytes, ICRC 0xef1bfcda (on the wire
// da fc 1b ef).
const connectXCNP = "4589003c98c640002011692716161608" +
	"16161607dbae12b7002800008100ffff" +
	"400000d2000000000000000000000000" +
	"0000000000000000dafc1bef"

// TestConnectXCNPVector: xroce's decoder takes the ConnectX CNP with its ICRC good
// and reads every field, and its encoder, given the same header fields, writes the
// same bytes (IPv4 header checksum and ICRC included): what the engine sends for a
// CE-marked packet (transport/cnp.go) is byte-exact with a ConnectX CNP but for the
// addresses, IDs and TOS the flow gives.
func TestConnectXCNPVector(t *testing.T) {
	ip, err := hex.DecodeString(connectXCNP)
	if err != nil {
		t.Fatal(err)
	}
	eth := []byte{0x52, 0x54, 0x00, 0, 0, 1, 0x52, 0x54, 0x00, 0, 0, 2, 0x08, 0x00}
	frame := append(append([]byte(nil), eth...), ip...)
	var p roce.Packet
	if err := p.Decode(frame); err != nil {
		t.Fatalf("decode: %v", err)
	}
	b := p.BTH
	if b.Opcode != roce.CNP || b.PKey != 0xFFFF || !b.BECN || b.FECN || b.DestQP != 0xd2 || b.PSN != 0 || b.AckReq ||
		p.CNPReserved != [16]byte{} || p.ICRC != 0xef1bfcda || p.ECN() != roce.ECT1 || p.IPv4.TOS != 0x89 {
		t.Fatalf("decoded %+v, reserved %x, ICRC 0x%08x, ECN %v", b, p.CNPReserved, p.ICRC, p.ECN())
	}
	q := roce.Packet{
		Eth:  roce.Ethernet{Dst: [6]byte(eth[0:6]), Src: [6]byte(eth[6:12])},
		IPv4: roce.IPv4{TOS: 0x89, ID: 0x98c6, FlagsFrag: 0x4000, TTL: 0x20, Src: [4]byte{22, 22, 22, 8}, Dst: [4]byte{22, 22, 22, 7}},
		UDP:  roce.UDP{SrcPort: 56238},
		BTH:  roce.BTH{Opcode: roce.CNP, PKey: 0xFFFF, BECN: true, DestQP: 0xd2},
	}
	buf := make([]byte, 128)
	n, err := q.Encode(buf)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf[:n], frame) {
		t.Fatalf("encoded\n%x\nwant\n%x", buf[:n], frame)
	}
}
