package cm_test

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/cm"
)

// TestRoundTrip: each sample message, in a MAD in a RoCEv2 frame over IPv4 and
// IPv6, comes back whole through roce's frame decoder, MADFromPacket and Decode,
// and encodes to the same bytes again.
func TestRoundTrip(t *testing.T) {
	for i, m := range samples() {
		for _, v6 := range []bool{false, true} {
			frame := sampleFrame(m, 0x0000000243cb96b0+uint64(i), uint32(i), v6)
			var p roce.Packet
			if err := p.Decode(frame); err != nil {
				t.Fatalf("%v: %v", m.AttributeID(), err)
			}
			mad, err := cm.MADFromPacket(&p)
			if err != nil {
				t.Fatalf("%v: %v", m.AttributeID(), err)
			}
			h, back, err := cm.Decode(mad)
			if err != nil {
				t.Fatalf("%v: %v", m.AttributeID(), err)
			}
			if want := cm.CMHeader(0x0000000243cb96b0+uint64(i), m.AttributeID()); h != want {
				t.Errorf("%v: header %+v, want %+v", m.AttributeID(), h, want)
			}
			if !equalMessages(back, m) {
				t.Errorf("%v: decoded\n%+v\nwant\n%+v", m.AttributeID(), back, m)
			}
			again := make([]byte, cm.MADLen)
			cm.Encode(again, h, back)
			if !bytes.Equal(again, mad) {
				t.Errorf("%v: re-encoded MAD differs", m.AttributeID())
			}
		}
	}
}

// TestEncodeSetsAttributeID: Encode writes the message's attribute whatever the
// header says, and overwrites every byte of the buffer.
func TestEncodeSetsAttributeID(t *testing.T) {
	b := bytes.Repeat([]byte{0xAA}, cm.MADLen)
	cm.Encode(b, cm.CMHeader(7, cm.AttrREQ), &cm.RTU{LocalCommID: 1})
	h, m, err := cm.Decode(b)
	if err != nil || h.AttributeID != cm.AttrRTU || !equalMessages(m, &cm.RTU{LocalCommID: 1}) {
		t.Fatalf("%+v %+v %v", h, m, err)
	}
	if b[18] != 0 || b[19] != 0 || !bytes.Equal(b[cm.HeaderLen+8:], make([]byte, cm.DataLen-8)) {
		t.Errorf("reserved bytes or private data not cleared: %x", b)
	}
}

// TestIPCMHeader: the header rdma_cm writes for IPv4 (address after 12 zero
// bytes, as in the capture), IPv6, and IPv4-mapped addresses (written as IPv4).
func TestIPCMHeader(t *testing.T) {
	const z12 = "000000000000000000000000"
	for _, c := range []struct{ src, dst, want string }{
		{"10.77.0.12:38884", "10.77.0.11", "004097e4" + z12 + "0a4d000c" + z12 + "0a4d000b"},
		{"[fd00:77::c]:4791", "fd00:77::b", "006012b7" + "fd00007700000000000000000000000c" + "fd00007700000000000000000000000b"},
		{"[::ffff:10.0.0.1]:1", "::ffff:10.0.0.2", "00400001" + z12 + "0a000001" + z12 + "0a000002"},
	} {
		h := cm.NewIPCMHeader(netip.MustParseAddrPort(c.src), netip.MustParseAddr(c.dst))
		b := make([]byte, cm.IPCMHeaderLen)
		h.Put(b)
		if got := hex.EncodeToString(b); got != c.want {
			t.Errorf("%s → %s: %s, want %s", c.src, c.dst, got, c.want)
		}
		back, err := cm.DecodeIPCMHeader(b)
		if err != nil || back != h {
			t.Errorf("%s: decoded %+v, %v; want %+v", c.src, back, err, h)
		}
	}
}

// TestServiceID: the Annex A11 Service ID of perftest's port, and its parse.
func TestServiceID(t *testing.T) {
	if id := cm.IPServiceID(cm.PortSpaceTCP, 18515); id != 0x0000000001064853 {
		t.Errorf("IPServiceID = 0x%016x", id)
	}
	ps, port, ok := cm.ParseIPServiceID(0x0000000001064853)
	if !ok || ps != cm.PortSpaceTCP || port != 18515 {
		t.Errorf("ParseIPServiceID = %x %d %v", ps, port, ok)
	}
	for _, bad := range []uint64{0x0000000002064853, 0x1000000001064853, 0x0106} {
		if _, _, ok := cm.ParseIPServiceID(bad); ok {
			t.Errorf("ParseIPServiceID(0x%x) accepted", bad)
		}
	}
	if fl := cm.RoCEFlowLabel(0x97e4, 18515); fl != 0x2acef {
		t.Errorf("RoCEFlowLabel = 0x%x", fl)
	}
}

func TestTimeout(t *testing.T) {
	for v, want := range map[uint8]time.Duration{0: 4096 * time.Nanosecond, 14: 67108864 * time.Nanosecond,
		20: 4294967296 * time.Nanosecond, 31: 4096 << 31, 32: 4096 * time.Nanosecond} {
		if got := cm.Timeout(v); got != want {
			t.Errorf("Timeout(%d) = %v, want %v", v, got, want)
		}
	}
}

func TestNames(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{cm.RejConsumerReject.String(), "Consumer Reject"},
		{cm.RejUnsupportedClassVersion.String(), "Unsupported Class Version"},
		{cm.RejVendorOptionNotSupported.String(), "Vendor option not supported"},
		{cm.RejectReason(34).String(), "RejectReason(34)"},
		{cm.RejectReason(0).String(), "RejectReason(0)"},
		{cm.AttrSIDRREP.String(), "SIDR_REP"},
		{cm.AttributeID(0x99).String(), "AttributeID(0x0099)"},
		{cm.MethodSend.String(), "Send"},
		{cm.TransportRC.String(), "RC"},
		{cm.APStatus(13).String(), "Invalid alternate SL"},
		{cm.SIDRStatus(9).String(), "SIDRStatus(9)"},
		{cm.RefOther.String(), "other"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
}
