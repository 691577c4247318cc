package cm_test

import (
	"fmt"
	"math/bits"
	"testing"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/cm"
)

// A layout case sets one field to its widest value and names the bits that must
// hold it: byte offset → mask, in the MAD data. The offsets and widths are the
// spec's tables as Linux transcribes them (include/rdma/ibta_vol1_c12.h).
type layoutCase struct {
	field string
	msg   cm.Message
	bits  map[int]byte
}

// span marks bytes from..to (inclusive) as wholly the field's.
func span(from, to int) map[int]byte {
	m := map[int]byte{}
	for i := from; i <= to; i++ {
		m[i] = 0xFF
	}
	return m
}

// at marks single bytes with masks: at(43, 0xF8) or at(15, 0xFF, 19, 0xFF).
func at(kv ...int) map[int]byte {
	m := map[int]byte{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = byte(kv[i+1])
	}
	return m
}

func merge(ms ...map[int]byte) map[int]byte {
	out := map[int]byte{}
	for _, m := range ms {
		for k, v := range m {
			out[k] |= v
		}
	}
	return out
}

var allGID = roce.GID{0: 0xFF, 1: 0xFF, 2: 0xFF, 3: 0xFF, 4: 0xFF, 5: 0xFF, 6: 0xFF, 7: 0xFF, 8: 0xFF, 9: 0xFF, 10: 0xFF, 11: 0xFF, 12: 0xFF, 13: 0xFF, 14: 0xFF, 15: 0xFF}

// pathCases are the path fields at base, in a REQ's layout or a LAP's.
func pathCases(prefix string, base int, lap bool, mk func(cm.Path) cm.Message) []layoutCase {
	rate, tc, hl := base+39, base+40, base+41
	if lap {
		tc, hl, rate = base+39, base+40, base+41
	}
	return []layoutCase{
		{prefix + "Local Port LID", mk(cm.Path{LocalPortLID: 0xFFFF}), span(base, base+1)},
		{prefix + "Remote Port LID", mk(cm.Path{RemotePortLID: 0xFFFF}), span(base+2, base+3)},
		{prefix + "Local Port GID", mk(cm.Path{LocalPortGID: allGID}), span(base+4, base+19)},
		{prefix + "Remote Port GID", mk(cm.Path{RemotePortGID: allGID}), span(base+20, base+35)},
		{prefix + "Flow Label", mk(cm.Path{FlowLabel: 0xFFFFF}), at(base+36, 0xFF, base+37, 0xFF, base+38, 0xF0)},
		{prefix + "Packet Rate", mk(cm.Path{PacketRate: 0x3F}), at(rate, 0x3F)},
		{prefix + "Traffic Class", mk(cm.Path{TrafficClass: 0xFF}), at(tc, 0xFF)},
		{prefix + "Hop Limit", mk(cm.Path{HopLimit: 0xFF}), at(hl, 0xFF)},
		{prefix + "SL", mk(cm.Path{SL: 0xF}), at(base+42, 0xF0)},
		{prefix + "Subnet Local", mk(cm.Path{SubnetLocal: true}), at(base+42, 0x08)},
		{prefix + "Local ACK Timeout", mk(cm.Path{LocalACKTimeout: 31}), at(base+43, 0xF8)},
	}
}

func layoutCases() map[cm.AttributeID][]layoutCase {
	req := []layoutCase{
		{"Local Communication ID", &cm.REQ{LocalCommID: 0xFFFFFFFF}, span(0, 3)},
		{"Vendor ID", &cm.REQ{VendorID: 0xFFFFFF}, span(5, 7)},
		{"Service ID", &cm.REQ{ServiceID: ^uint64(0)}, span(8, 15)},
		{"Local CA GUID", &cm.REQ{LocalCAGUID: ^uint64(0)}, span(16, 23)},
		{"Local Q_Key", &cm.REQ{LocalQKey: 0xFFFFFFFF}, span(28, 31)},
		{"Local QPN", &cm.REQ{LocalQPN: 0xFFFFFF}, span(32, 34)},
		{"Responder Resources", &cm.REQ{ResponderResources: 0xFF}, at(35, 0xFF)},
		{"Local EECN", &cm.REQ{LocalEECN: 0xFFFFFF}, span(36, 38)},
		{"Initiator Depth", &cm.REQ{InitiatorDepth: 0xFF}, at(39, 0xFF)},
		{"Remote EECN", &cm.REQ{RemoteEECN: 0xFFFFFF}, span(40, 42)},
		{"Remote CM Response Timeout", &cm.REQ{RemoteCMResponseTimeout: 31}, at(43, 0xF8)},
		{"Transport Service Type", &cm.REQ{TransportServiceType: 3}, at(43, 0x06)},
		{"End-to-End Flow Control", &cm.REQ{EndToEndFlowControl: true}, at(43, 0x01)},
		{"Starting PSN", &cm.REQ{StartingPSN: 0xFFFFFF}, span(44, 46)},
		{"Local CM Response Timeout", &cm.REQ{LocalCMResponseTimeout: 31}, at(47, 0xF8)},
		{"Retry Count", &cm.REQ{RetryCount: 7}, at(47, 0x07)},
		{"Partition Key", &cm.REQ{PKey: 0xFFFF}, span(48, 49)},
		{"Path Packet Payload MTU", &cm.REQ{PathMTU: 15}, at(50, 0xF0)},
		{"RDC Exists", &cm.REQ{RDCExists: true}, at(50, 0x08)},
		{"RNR Retry Count", &cm.REQ{RNRRetryCount: 7}, at(50, 0x07)},
		{"Max CM Retries", &cm.REQ{MaxCMRetries: 15}, at(51, 0xF0)},
		{"SRQ", &cm.REQ{SRQ: true}, at(51, 0x08)},
		{"Extended Transport Type", &cm.REQ{ExtendedTransportType: 7}, at(51, 0x07)},
		{"SAP Supported", &cm.REQ{SAPSupported: true}, at(139, 0x04)},
		{"PrivateData", &cm.REQ{PrivateData: fill[[cm.REQPrivateDataLen]byte]()}, span(140, 231)},
	}
	req = append(req, pathCases("Primary ", 52, false, func(p cm.Path) cm.Message { return &cm.REQ{Primary: p} })...)
	req = append(req, pathCases("Alternate ", 96, false, func(p cm.Path) cm.Message { return &cm.REQ{Alternate: p} })...)
	lap := []layoutCase{
		{"Local Communication ID", &cm.LAP{LocalCommID: 0xFFFFFFFF}, span(0, 3)},
		{"Remote Communication ID", &cm.LAP{RemoteCommID: 0xFFFFFFFF}, span(4, 7)},
		{"Remote QPN/EECN", &cm.LAP{RemoteQPNEECN: 0xFFFFFF}, span(12, 14)},
		{"Remote CM Response Timeout", &cm.LAP{RemoteCMResponseTimeout: 31}, at(15, 0xF8)},
		{"PrivateData", &cm.LAP{PrivateData: fill[[cm.LAPPrivateDataLen]byte]()}, span(64, 231)},
	}
	lap = append(lap, pathCases("Alternate ", 20, true, func(p cm.Path) cm.Message { return &cm.LAP{Alternate: p} })...)
	return map[cm.AttributeID][]layoutCase{
		cm.AttrREQ: req,
		cm.AttrLAP: lap,
		cm.AttrREP: {
			{"Local Communication ID", &cm.REP{LocalCommID: 0xFFFFFFFF}, span(0, 3)},
			{"Remote Communication ID", &cm.REP{RemoteCommID: 0xFFFFFFFF}, span(4, 7)},
			{"Local Q_Key", &cm.REP{LocalQKey: 0xFFFFFFFF}, span(8, 11)},
			{"Local QPN", &cm.REP{LocalQPN: 0xFFFFFF}, span(12, 14)},
			{"Vendor ID", &cm.REP{VendorID: 0xFFFFFF}, at(15, 0xFF, 19, 0xFF, 23, 0xFF)},
			{"Local EE Context Number", &cm.REP{LocalEECN: 0xFFFFFF}, span(16, 18)},
			{"Starting PSN", &cm.REP{StartingPSN: 0xFFFFFF}, span(20, 22)},
			{"Responder Resources", &cm.REP{ResponderResources: 0xFF}, at(24, 0xFF)},
			{"Initiator Depth", &cm.REP{InitiatorDepth: 0xFF}, at(25, 0xFF)},
			{"Target ACK Delay", &cm.REP{TargetACKDelay: 31}, at(26, 0xF8)},
			{"Failover Accepted", &cm.REP{FailoverAccepted: 3}, at(26, 0x06)},
			{"End-to-End Flow Control", &cm.REP{EndToEndFlowControl: true}, at(26, 0x01)},
			{"RNR Retry Count", &cm.REP{RNRRetryCount: 7}, at(27, 0xE0)},
			{"SRQ", &cm.REP{SRQ: true}, at(27, 0x10)},
			{"Local CA GUID", &cm.REP{LocalCAGUID: ^uint64(0)}, span(28, 35)},
			{"PrivateData", &cm.REP{PrivateData: fill[[cm.REPPrivateDataLen]byte]()}, span(36, 231)},
		},
		cm.AttrREJ: {
			{"Local Communication ID", &cm.REJ{LocalCommID: 0xFFFFFFFF}, span(0, 3)},
			{"Remote Communication ID", &cm.REJ{RemoteCommID: 0xFFFFFFFF}, span(4, 7)},
			{"Message REJected", &cm.REJ{MessageRejected: 3}, at(8, 0xC0)},
			{"Rejected Info Length", &cm.REJ{RejectedInfoLength: 127}, at(9, 0xFE)},
			{"Reason", &cm.REJ{Reason: 0xFFFF}, span(10, 11)},
			{"ARI", &cm.REJ{ARI: fill[[cm.ARILen]byte]()}, span(12, 83)},
			{"PrivateData", &cm.REJ{PrivateData: fill[[cm.REJPrivateDataLen]byte]()}, span(84, 231)},
		},
		cm.AttrMRA: {
			{"Local Communication ID", &cm.MRA{LocalCommID: 0xFFFFFFFF}, span(0, 3)},
			{"Remote Communication ID", &cm.MRA{RemoteCommID: 0xFFFFFFFF}, span(4, 7)},
			{"Message MRAed", &cm.MRA{MessageMRAed: 3}, at(8, 0xC0)},
			{"Service Timeout", &cm.MRA{ServiceTimeout: 31}, at(9, 0xF8)},
			{"PrivateData", &cm.MRA{PrivateData: fill[[cm.MRAPrivateDataLen]byte]()}, span(10, 231)},
		},
		cm.AttrRTU: {
			{"Local Communication ID", &cm.RTU{LocalCommID: 0xFFFFFFFF}, span(0, 3)},
			{"Remote Communication ID", &cm.RTU{RemoteCommID: 0xFFFFFFFF}, span(4, 7)},
			{"PrivateData", &cm.RTU{PrivateData: fill[[cm.RTUPrivateDataLen]byte]()}, span(8, 231)},
		},
		cm.AttrDREQ: {
			{"Local Communication ID", &cm.DREQ{LocalCommID: 0xFFFFFFFF}, span(0, 3)},
			{"Remote Communication ID", &cm.DREQ{RemoteCommID: 0xFFFFFFFF}, span(4, 7)},
			{"Remote QPN/EECN", &cm.DREQ{RemoteQPNEECN: 0xFFFFFF}, span(8, 10)},
			{"PrivateData", &cm.DREQ{PrivateData: fill[[cm.DREQPrivateDataLen]byte]()}, span(12, 231)},
		},
		cm.AttrDREP: {
			{"Local Communication ID", &cm.DREP{LocalCommID: 0xFFFFFFFF}, span(0, 3)},
			{"Remote Communication ID", &cm.DREP{RemoteCommID: 0xFFFFFFFF}, span(4, 7)},
			{"PrivateData", &cm.DREP{PrivateData: fill[[cm.DREPPrivateDataLen]byte]()}, span(8, 231)},
		},
		cm.AttrAPR: {
			{"Local Communication ID", &cm.APR{LocalCommID: 0xFFFFFFFF}, span(0, 3)},
			{"Remote Communication ID", &cm.APR{RemoteCommID: 0xFFFFFFFF}, span(4, 7)},
			{"Additional Information Length", &cm.APR{AdditionalInfoLength: 0xFF}, at(8, 0xFF)},
			{"AP Status", &cm.APR{APStatus: 0xFF}, at(9, 0xFF)},
			{"Additional Information", &cm.APR{AdditionalInfo: fill[[cm.APRInfoLen]byte]()}, span(12, 83)},
			{"PrivateData", &cm.APR{PrivateData: fill[[cm.APRPrivateDataLen]byte]()}, span(84, 231)},
		},
		cm.AttrSIDRREQ: {
			{"RequestID", &cm.SIDRREQ{RequestID: 0xFFFFFFFF}, span(0, 3)},
			{"Partition Key", &cm.SIDRREQ{PKey: 0xFFFF}, span(4, 5)},
			{"ServiceID", &cm.SIDRREQ{ServiceID: ^uint64(0)}, span(8, 15)},
			{"PrivateData", &cm.SIDRREQ{PrivateData: fill[[cm.SIDRREQPrivateDataLen]byte]()}, span(16, 231)},
		},
		cm.AttrSIDRREP: {
			{"RequestID", &cm.SIDRREP{RequestID: 0xFFFFFFFF}, span(0, 3)},
			{"Status", &cm.SIDRREP{Status: 0xFF}, at(4, 0xFF)},
			{"Additional Information Length", &cm.SIDRREP{AdditionalInfoLength: 0xFF}, at(5, 0xFF)},
			{"Vendor ID", &cm.SIDRREP{VendorID: 0xFFFFFF}, at(6, 0xFF, 7, 0xFF, 11, 0xFF)},
			{"QPN", &cm.SIDRREP{QPN: 0xFFFFFF}, span(8, 10)},
			{"ServiceID", &cm.SIDRREP{ServiceID: ^uint64(0)}, span(12, 19)},
			{"Q_Key", &cm.SIDRREP{QKey: 0xFFFFFFFF}, span(20, 23)},
			{"Additional Information", &cm.SIDRREP{AdditionalInfo: fill[[cm.SIDRREPInfoLen]byte]()}, span(24, 95)},
			{"PrivateData", &cm.SIDRREP{PrivateData: fill[[cm.SIDRREPPrivateDataLen]byte]()}, span(96, 231)},
		},
	}
}

func fill[A ~[72]byte | ~[92]byte | ~[136]byte | ~[148]byte | ~[168]byte | ~[196]byte | ~[216]byte | ~[220]byte | ~[222]byte | ~[224]byte]() A {
	var a A
	for i := range len(a) {
		a[i] = 0xFF
	}
	return a
}

// reservedBits is each message's count of reserved bits in the spec's table (with
// the ECE Vendor ID fields and REQ's SAP Supported bit counted as fields).
var reservedBits = map[cm.AttributeID]int{
	// byte 4; 24-27; per path: 6 after the flow label, 3 after SL/Subnet Local, 3
	// after the Local ACK Timeout (the alternate's less SAP Supported).
	cm.AttrREQ:     8 + 32 + 12 + 11,
	cm.AttrMRA:     6 + 3,            // after Message MRAed, after Service Timeout
	cm.AttrREJ:     6 + 1,            // after Message REJected, after Rejected Info Length
	cm.AttrREP:     4,                // after SRQ
	cm.AttrRTU:     0,                //
	cm.AttrDREQ:    8,                // byte 11
	cm.AttrDREP:    0,                //
	cm.AttrLAP:     32 + 3 + 32 + 12, // 8-11; after the timeout; 16-19; path: 4 after the flow label, 2 before the rate, 3, 3
	cm.AttrAPR:     16,               // 10-11
	cm.AttrSIDRREQ: 16,               // 6-7
	cm.AttrSIDRREP: 0,                //
}

// TestLayout puts each field, at its widest, into a zero message and checks it
// lands on exactly its bits and decodes back; that the fields of each message cover
// every bit but the reserved ones; and that Put writes reserved bits as zeros even
// from a message decoded out of all-ones data.
func TestLayout(t *testing.T) {
	for attr, cases := range layoutCases() {
		covered := map[int]byte{}
		for _, c := range cases {
			if c.msg.AttributeID() != attr {
				t.Fatalf("%v %s: case holds a %v", attr, c.field, c.msg.AttributeID())
			}
			b := make([]byte, cm.DataLen)
			c.msg.Put(b)
			for i, v := range b {
				if v != c.bits[i] {
					t.Errorf("%v %s: byte %d = 0x%02x, want 0x%02x", attr, c.field, i, v, c.bits[i])
				}
				if covered[i]&v != 0 {
					t.Errorf("%v %s: byte %d bits 0x%02x belong to another field too", attr, c.field, i, covered[i]&v)
				}
			}
			covered = merge(covered, c.bits)
			back := cm.NewMessage(attr)
			if err := back.Decode(b); err != nil && attr != cm.AttrREJ && attr != cm.AttrAPR && attr != cm.AttrSIDRREP {
				t.Errorf("%v %s: %v", attr, c.field, err)
			}
			if !equalMessages(back, c.msg) {
				t.Errorf("%v %s: decodes as %+v", attr, c.field, back)
			}
		}
		set := 0
		for _, v := range covered {
			set += bits.OnesCount8(v)
		}
		if want := cm.DataLen*8 - reservedBits[attr]; set != want {
			t.Errorf("%v: the fields cover %d bits, want %d (%d reserved)", attr, set, want, reservedBits[attr])
		}
		// From all ones, Put writes the fields' bits and nothing else.
		ones := make([]byte, cm.DataLen)
		for i := range ones {
			ones[i] = 0xFF
		}
		m := cm.NewMessage(attr)
		_ = m.Decode(ones) // REJ, APR, SIDR_REP: an information length too long
		b := make([]byte, cm.DataLen)
		m.Put(b)
		for i, v := range b {
			if v != covered[i] {
				t.Errorf("%v from all ones: byte %d = 0x%02x, want 0x%02x", attr, i, v, covered[i])
			}
		}
	}
	if n := len(layoutCases()); n != 11 {
		t.Errorf("layout cases for %d messages", n)
	}
}

// TestHeaderLayout places every common-header field (§13.4.2).
func TestHeaderLayout(t *testing.T) {
	h := cm.Header{BaseVersion: 0x01, MgmtClass: 0x02, ClassVersion: 0x03, Method: 0x84, Status: 0x0506,
		ClassSpecific: 0x0708, TransactionID: 0x090a0b0c0d0e0f10, AttributeID: 0x1112, AttributeModifier: 0x15161718}
	b := make([]byte, cm.HeaderLen)
	for i := range b {
		b[i] = 0xEE
	}
	h.Put(b)
	want := "01020384050607080" + "90a0b0c0d0e0f10111200001516171" + "8"
	if got := fmt.Sprintf("%x", b); got != want {
		t.Errorf("header %s, want %s", got, want)
	}
	back, err := cm.DecodeHeader(b)
	if err != nil || back != h {
		t.Errorf("decoded %+v, %v", back, err)
	}
}
