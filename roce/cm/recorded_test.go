package cm_test

import (
	"net/netip"
	"testing"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/test/captures"
)

func gid(s string) roce.GID { return roce.GIDFromAddr(netip.MustParseAddr(s)) }

// TestRecordedValues compares the first connection of testdata's
// ib_write_bw_rdmacm.pcap with the values `tshark -r FILE -V` (Wireshark 4.0.17)
// prints for frames 1 (REQ), 2 (REP), 3 (RTU), 81 (DREQ) and 83 (DREP), recorded
// here field by field. Two fields differ from tshark's text: Wireshark 4.0 reads
// the Primary Flow Label from 3 bytes and the Primary Packet Rate from byte 88
// instead of 91 (it prints 0x002ac and 0x2a); the values below are those of the
// spec's layout, 88[0] 20 bits and 91[2] 6 bits, and the flow label is the one
// Linux's cma_get_roce_udp_flow_label derives from the ports: (0x97e4 × 31 +
// 18515) & 0xFFFFF = 0x2acef.
func TestRecordedValues(t *testing.T) {
	byFrame := map[int]cmFrame{}
	for _, f := range readCM(t, captures.Repo(t)) {
		byFrame[f.Index] = f
	}
	const tid = 0x0000000243cb96b0
	want := []struct {
		frame int
		hdr   cm.Header
		msg   cm.Message
	}{
		{1, cm.CMHeader(tid, cm.AttrREQ), &cm.REQ{
			LocalCommID:             0xb096cb43,
			ServiceID:               0x0000000001064853, // IP CM ServiceID: prefix 0000000001, protocol 0x06, port 0x4853
			LocalCAGUID:             0x505400fffe77000c,
			LocalQKey:               0,
			LocalQPN:                0x00001d,
			ResponderResources:      0,
			LocalEECN:               0,
			InitiatorDepth:          0,
			RemoteEECN:              0,
			RemoteCMResponseTimeout: 0x14,
			TransportServiceType:    0,
			EndToEndFlowControl:     false,
			StartingPSN:             0x778393,
			LocalCMResponseTimeout:  0x14,
			RetryCount:              7,
			PKey:                    0xffff,
			PathMTU:                 3,
			RDCExists:               false,
			RNRRetryCount:           7,
			MaxCMRetries:            0xf,
			SRQ:                     false,
			ExtendedTransportType:   0,
			Primary: cm.Path{
				LocalPortLID:    65535,
				RemotePortLID:   65535,
				LocalPortGID:    gid("10.77.0.12"),
				RemotePortGID:   gid("10.77.0.11"),
				FlowLabel:       0x2acef, // see above
				PacketRate:      0,       // see above
				TrafficClass:    0,
				HopLimit:        0x40,
				SL:              0,
				SubnetLocal:     false,
				LocalACKTimeout: 0x13,
			},
			// Alternate: all zero (LIDs 0, GIDs 00…00).
			// IP CM Private Data: versions 0.0, IP version 4, source port 0x97e4,
			// source IP 10.77.0.12, destination IP 10.77.0.11, consumer data zero.
			PrivateData: [cm.REQPrivateDataLen]byte{1: 0x40, 2: 0x97, 3: 0xe4, 16: 10, 17: 77, 18: 0, 19: 12, 32: 10, 33: 77, 34: 0, 35: 11},
		}},
		{2, cm.CMHeader(tid, cm.AttrREP), &cm.REP{
			LocalCommID:         0xece6495e,
			RemoteCommID:        0xb096cb43,
			LocalQKey:           0,
			LocalQPN:            0x00001d,
			LocalEECN:           0,
			StartingPSN:         0x543f47,
			ResponderResources:  0,
			InitiatorDepth:      0,
			TargetACKDelay:      0x0f,
			FailoverAccepted:    0,
			EndToEndFlowControl: false,
			RNRRetryCount:       7,
			SRQ:                 false,
			LocalCAGUID:         0x505400fffe77000b,
		}},
		{3, cm.CMHeader(tid, cm.AttrRTU), &cm.RTU{LocalCommID: 0xb096cb43, RemoteCommID: 0xece6495e}},
		{81, cm.CMHeader(0x0000000243cb96b1, cm.AttrDREQ), &cm.DREQ{LocalCommID: 0xb196cb43, RemoteCommID: 0xeee6495e, RemoteQPNEECN: 0x00001e}},
		{83, cm.CMHeader(0x0000000243cb96b1, cm.AttrDREP), &cm.DREP{LocalCommID: 0xeee6495e, RemoteCommID: 0xb196cb43}},
	}
	for _, w := range want {
		f, ok := byFrame[w.frame]
		if !ok {
			t.Fatalf("frame %d is not a CM MAD", w.frame)
		}
		if f.Hdr != w.hdr {
			t.Errorf("frame %d: header\n%+v\nwant\n%+v", w.frame, f.Hdr, w.hdr)
		}
		if !equalMessages(f.Msg, w.msg) {
			t.Errorf("frame %d: %v\n%+v\nwant\n%+v", w.frame, w.hdr.AttributeID, f.Msg, w.msg)
		}
	}
	req := byFrame[1].Msg.(*cm.REQ)
	ipcm, err := req.IPCM()
	want4 := cm.IPCMHeader{IPVersion: 4, SourcePort: 0x97e4, SourceIP: netip.MustParseAddr("10.77.0.12"), DestinationIP: netip.MustParseAddr("10.77.0.11")}
	if err != nil || ipcm != want4 {
		t.Errorf("IP CM header %+v, %v; want %+v", ipcm, err, want4)
	}
}
