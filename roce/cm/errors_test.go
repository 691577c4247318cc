package cm_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/cm"
)

// wantField checks that err is an *cm.Error naming field in msg.
func wantField(t *testing.T, what string, err error, msg, field string) {
	t.Helper()
	var e *cm.Error
	if !errors.As(err, &e) {
		t.Errorf("%s: error %v, want a *cm.Error", what, err)
		return
	}
	if e.Msg != msg || e.Field != field {
		t.Errorf("%s: %q names %s / %s, want %s / %s", what, err, e.Msg, e.Field, msg, field)
	}
	if !strings.Contains(err.Error(), field) {
		t.Errorf("%s: %q does not name %s", what, err, field)
	}
}

func validMAD(m cm.Message) []byte {
	b := make([]byte, cm.MADLen)
	cm.Encode(b, cm.CMHeader(1, 0), m)
	return b
}

func TestDecodeErrors(t *testing.T) {
	rtu := validMAD(&cm.RTU{})
	mod := func(f func(b []byte)) []byte {
		b := append([]byte(nil), rtu...)
		f(b)
		return b
	}
	for _, c := range []struct {
		name       string
		mad        []byte
		msg, field string
		header     bool // the header is still returned
	}{
		{"empty", nil, "MAD header", "length", false},
		{"header only", rtu[:cm.HeaderLen], "MAD", "length", true},
		{"255 bytes", rtu[:cm.MADLen-1], "MAD", "length", true},
		{"base version 2", mod(func(b []byte) { b[0] = 2 }), "MAD header", "Base Version", true},
		{"SA class", mod(func(b []byte) { b[1] = 0x03 }), "MAD header", "Management Class", true},
		{"class version 1", mod(func(b []byte) { b[2] = 1 }), "MAD header", "Class Version", true},
		{"ClassPortInfo", mod(func(b []byte) { b[17] = 0x01 }), "MAD header", "Attribute ID", true},
		{"unknown attribute", mod(func(b []byte) { b[16], b[17] = 0xFF, 0x10 }), "MAD header", "Attribute ID", true},
		{"REJ ARI length", mod(func(b []byte) { b[17] = byte(cm.AttrREJ); b[cm.HeaderLen+9] = 73 << 1 }), "REJ", "Rejected Info Length", true},
		{"APR info length", mod(func(b []byte) { b[17] = byte(cm.AttrAPR); b[cm.HeaderLen+8] = 73 }), "APR", "Additional Information Length", true},
		{"SIDR_REP info length", mod(func(b []byte) { b[17] = byte(cm.AttrSIDRREP); b[cm.HeaderLen+5] = 0xFF }), "SIDR_REP", "Additional Information Length", true},
	} {
		h, m, err := cm.Decode(c.mad)
		wantField(t, c.name, err, c.msg, c.field)
		if m != nil {
			t.Errorf("%s: returned a message with the error", c.name)
		}
		if c.header && h.TransactionID != 1 {
			t.Errorf("%s: header not returned: %+v", c.name, h)
		}
	}
	// The longest lengths that fit are fine.
	for _, m := range []cm.Message{&cm.REJ{RejectedInfoLength: cm.ARILen}, &cm.APR{AdditionalInfoLength: cm.APRInfoLen},
		&cm.SIDRREP{AdditionalInfoLength: cm.SIDRREPInfoLen}} {
		if _, _, err := cm.Decode(validMAD(m)); err != nil {
			t.Errorf("%v: %v", m.AttributeID(), err)
		}
	}
	// Every message's Decode refuses short data, naming the message.
	for _, m := range samples() {
		err := cm.NewMessage(m.AttributeID()).Decode(make([]byte, cm.DataLen-1))
		wantField(t, "short "+m.AttributeID().String(), err, m.AttributeID().String(), "length")
	}
	if cm.NewMessage(cm.AttrClassPortInfo) != nil {
		t.Error("NewMessage(ClassPortInfo) is not nil")
	}
}

func TestIPCMErrors(t *testing.T) {
	good := make([]byte, cm.IPCMHeaderLen)
	good[1] = 0x40
	for _, c := range []struct {
		name  string
		b     []byte
		field string
	}{
		{"short", good[:cm.IPCMHeaderLen-1], "length"},
		{"major version 1", append([]byte{0x10}, good[1:]...), "IP CM Major Version"},
		{"IP version 0", append([]byte{0, 0}, good[2:]...), "IP Version"},
		{"IP version 5", append([]byte{0, 0x50}, good[2:]...), "IP Version"},
	} {
		_, err := cm.DecodeIPCMHeader(c.b)
		wantField(t, c.name, err, "IP CM private data", c.field)
	}
	// A minor version, the reserved nibble and the bytes before an IPv4 address are
	// not checked (Linux reads only cma_version, the IP version and the addresses).
	b := append([]byte(nil), good...)
	b[0], b[1], b[4], b[20] = 0x07, 0x4F, 0xFF, 0xFF
	if h, err := cm.DecodeIPCMHeader(b); err != nil || h.MinorVersion != 7 || !h.SourceIP.Is4() {
		t.Errorf("%+v, %v", h, err)
	}
}

func TestGSIErrors(t *testing.T) {
	frame := sampleFrame(&cm.RTU{}, 1, 0, false)
	var base roce.Packet
	if err := base.Decode(frame); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		mod   func(p *roce.Packet)
		field string
	}{
		{"RC SEND", func(p *roce.Packet) { p.BTH.Opcode = roce.RC_SEND_ONLY }, "BTH OpCode"},
		{"UD SEND with immediate", func(p *roce.Packet) { p.BTH.Opcode = roce.UD_SEND_ONLY_WITH_IMMEDIATE }, "BTH OpCode"},
		{"QP2", func(p *roce.Packet) { p.BTH.DestQP = 2 }, "BTH DestQP"},
		{"Q_Key", func(p *roce.Packet) { p.DETH.QKey = 0x80010001 }, "DETH Q_Key"},
		{"short payload", func(p *roce.Packet) { p.Payload = p.Payload[:cm.MADLen-4] }, "payload length"},
		{"long payload", func(p *roce.Packet) { p.Payload = append(p.Payload, 0, 0, 0, 0) }, "payload length"},
	} {
		p := base
		c.mod(&p)
		_, err := cm.MADFromPacket(&p)
		wantField(t, c.name, err, "GSI datagram", c.field)
	}
}
