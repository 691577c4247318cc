package roce_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
)

func TestOpcodeTable(t *testing.T) {
	n := 0
	for i := 0; i < 256; i++ {
		if roce.Opcode(i).Valid() {
			n++
		}
	}
	// RC 25 (0x00-0x14, 0x16, 0x17, 0x1C, 0x1D), UC 12, UD 2, CNP 1.
	if n != 40 {
		t.Errorf("%d valid opcodes, want 40", n)
	}
	for _, c := range []struct {
		op      roce.Opcode
		name    string
		hdrs    roce.Header
		hdrLen  int
		payload bool
		pos     roce.Position
	}{
		{roce.RC_SEND_FIRST, "RC_SEND_FIRST", 0, 12, true, roce.PosFirst},
		{roce.RC_SEND_ONLY_WITH_IMMEDIATE, "RC_SEND_ONLY_WITH_IMMEDIATE", roce.HdrImmDt, 16, true, roce.PosOnly},
		{roce.RC_RDMA_WRITE_FIRST, "RC_RDMA_WRITE_FIRST", roce.HdrRETH, 28, true, roce.PosFirst},
		{roce.RC_RDMA_WRITE_MIDDLE, "RC_RDMA_WRITE_MIDDLE", 0, 12, true, roce.PosMiddle},
		{roce.RC_RDMA_WRITE_LAST_WITH_IMMEDIATE, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", roce.HdrImmDt, 16, true, roce.PosLast},
		{roce.RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", roce.HdrRETH | roce.HdrImmDt, 32, true, roce.PosOnly},
		{roce.RC_RDMA_READ_REQUEST, "RC_RDMA_READ_REQUEST", roce.HdrRETH, 28, false, roce.PosOnly},
		{roce.RC_RDMA_READ_RESPONSE_MIDDLE, "RC_RDMA_READ_RESPONSE_MIDDLE", 0, 12, true, roce.PosMiddle},
		{roce.RC_RDMA_READ_RESPONSE_LAST, "RC_RDMA_READ_RESPONSE_LAST", roce.HdrAETH, 16, true, roce.PosLast},
		{roce.RC_ACKNOWLEDGE, "RC_ACKNOWLEDGE", roce.HdrAETH, 16, false, roce.PosOnly},
		{roce.RC_ATOMIC_ACKNOWLEDGE, "RC_ATOMIC_ACKNOWLEDGE", roce.HdrAETH | roce.HdrAtomicAckETH, 24, false, roce.PosOnly},
		{roce.RC_COMPARE_SWAP, "RC_COMPARE_SWAP", roce.HdrAtomicETH, 40, false, roce.PosOnly},
		{roce.RC_SEND_LAST_WITH_INVALIDATE, "RC_SEND_LAST_WITH_INVALIDATE", roce.HdrIETH, 16, true, roce.PosLast},
		{roce.UC_RDMA_WRITE_ONLY, "UC_RDMA_WRITE_ONLY", roce.HdrRETH, 28, true, roce.PosOnly},
		{roce.RC_FLUSH, "RC_FLUSH", roce.HdrFETH | roce.HdrRETH, 32, false, roce.PosOnly},
		{roce.RC_ATOMIC_WRITE, "RC_ATOMIC_WRITE", roce.HdrRETH, 28, true, roce.PosOnly},
		{roce.UD_SEND_ONLY_WITH_IMMEDIATE, "UD_SEND_ONLY_WITH_IMMEDIATE", roce.HdrDETH | roce.HdrImmDt, 24, true, roce.PosOnly},
		{roce.CNP, "CNP", roce.HdrCNPReserved, 28, false, roce.PosOnly},
	} {
		info, ok := c.op.Info(), c.op.Valid()
		if !ok || c.op.String() != c.name || info.Headers != c.hdrs || info.HeaderLen != c.hdrLen ||
			info.Payload != c.payload || info.Position != c.pos {
			t.Errorf("0x%02x: %s %+v, want %s headers=%s len=%d payload=%v %s",
				uint8(c.op), c.op, info, c.name, c.hdrs, c.hdrLen, c.payload, c.pos)
		}
		if op, ok := roce.ParseOpcode(c.name); !ok || op != c.op {
			t.Errorf("ParseOpcode(%q) = %v, %v", c.name, op, ok)
		}
	}
	if op, ok := roce.ParseOpcode("RDMA_WRITE_ONLY"); !ok || op != roce.RC_RDMA_WRITE_ONLY {
		t.Errorf("ParseOpcode(RDMA_WRITE_ONLY) = %v", op)
	}
	for _, op := range []roce.Opcode{0x15, 0x18, 0x1E, 0x2C, 0x3C, 0x40, 0x66, 0x80, 0xA0, 0xFF} {
		if op.Valid() {
			t.Errorf("0x%02x valid", uint8(op))
		}
	}
	if s := roce.Opcode(0x15).String(); s != "Opcode(0x15)" {
		t.Errorf("unknown opcode String = %q", s)
	}
	if !roce.RC_RDMA_READ_RESPONSE_ONLY.Is(roce.ClassResponse) || roce.RC_FETCH_ADD.Is(roce.ClassResponse) {
		t.Error("ClassResponse")
	}
}

func TestPSN(t *testing.T) {
	if roce.PSNNext(0xFFFFFF) != 0 || roce.PSNAdd(0xFFFFFE, 3) != 1 || roce.PSNAdd(1, -2) != 0xFFFFFF {
		t.Error("wrap")
	}
	for _, c := range []struct {
		a, b uint32
		d    int32
	}{
		{5, 3, 2}, {3, 5, -2}, {0, 0xFFFFFF, 1}, {0xFFFFFF, 0, -1},
		{0x7FFFFF, 0, 0x7FFFFF}, {0x800000, 0, -0x800000}, {0x123456, 0x123456, 0},
	} {
		if d := roce.PSNDiff(c.a, c.b); d != c.d {
			t.Errorf("PSNDiff(0x%x, 0x%x) = %d, want %d", c.a, c.b, d, c.d)
		}
	}
	if !roce.PSNBefore(0xFFFFF0, 2) || roce.PSNAfter(0xFFFFF0, 2) || !roce.PSNAfter(2, 0xFFFFF0) {
		t.Error("window comparison across the wrap")
	}
}

func TestMTU(t *testing.T) {
	for _, c := range []struct {
		netdev int
		want   roce.MTU
	}{{1500, roce.MTU1024}, {9000, roce.MTU4096}, {1103, roce.MTU512}, {1104, roce.MTU1024},
		{2128, roce.MTU2048}, {2127, roce.MTU1024}, {3000, roce.MTU2048}, {4176, roce.MTU4096}, {335, 0}, {336, roce.MTU256}} {
		if got := roce.MTUFromNetdev(c.netdev); got != c.want {
			t.Errorf("MTUFromNetdev(%d) = %v, want %v", c.netdev, got, c.want)
		}
	}
	for m := roce.MTU256; m <= roce.MTU4096; m++ {
		if n := roce.NetdevMTU(m); n != m.Bytes()+80 || roce.MTUFromNetdev(n) != m || roce.MTUFromNetdev(n-1) != m-1 {
			t.Errorf("NetdevMTU(%v) = %d: not the smallest netdev MTU carrying it", m, n)
		}
	}
	if roce.MTU4096.Bytes() != 4096 || roce.MTU256.Bytes() != 256 || roce.MTU(0).Bytes() != 0 || roce.MTU(6).Valid() {
		t.Error("Bytes/Valid")
	}
	if m, err := roce.MTUFromBytes(2048); err != nil || m != roce.MTU2048 {
		t.Error("MTUFromBytes(2048)")
	}
	if _, err := roce.MTUFromBytes(1500); err == nil {
		t.Error("MTUFromBytes(1500) succeeded")
	}
	if roce.MinMTU(roce.MTU4096, roce.MTU1024) != roce.MTU1024 {
		t.Error("MinMTU")
	}
}

func TestSyndrome(t *testing.T) {
	for _, c := range []struct {
		s    roce.Syndrome
		kind roce.SyndromeKind
		val  uint8
		str  string
	}{
		{roce.SyndromeACK, roce.KindACK, 31, "ACK credits=31"},
		{roce.RNRNAKSyndrome(12), roce.KindRNRNAK, 12, "RNR NAK timer=12"},
		{roce.SyndromeNAKPSNSequenceError, roce.KindNAK, 0, "NAK PSN sequence error"},
		{roce.NAKSyndrome(roce.NAKRemoteAccessError), roce.KindNAK, 2, "NAK remote access error"},
		{roce.SyndromeNAKInvalidRequest, roce.KindNAK, 1, "NAK invalid request"},
	} {
		if c.s.Kind() != c.kind || c.s.Value() != c.val || c.s.String() != c.str {
			t.Errorf("0x%02x: %v %d %q", uint8(c.s), c.s.Kind(), c.s.Value(), c.s)
		}
	}
	if uint8(roce.RNRNAKSyndrome(12)) != 0x2C || uint8(roce.NAKSyndrome(3)) != 0x63 {
		t.Error("syndrome encoding")
	}
	if roce.RNRTimerDelay(12) != 640*time.Microsecond || roce.RNRTimerDelay(0) != 655360*time.Microsecond ||
		roce.RNRTimerDelay(31) != 491520*time.Microsecond || roce.RNRTimerDelay(1) != 10*time.Microsecond {
		t.Error("RNRTimerDelay")
	}
}

// TestHeaderBytes pins each header's wire layout against hand-written bytes, taken
// where possible from the captures (ib_write_bw frame 71, ib_atomic_bw).
func TestHeaderBytes(t *testing.T) {
	bth := roce.BTH{Opcode: roce.RC_RDMA_WRITE_LAST, SE: true, MigReq: true, PadCnt: 3, PKey: 0xFFFF,
		FECN: true, BECN: true, Resv6: 0x01, DestQP: 0x000012, AckReq: true, Resv7: 0x02, PSN: 0xABCDEF}
	wantBTH := []byte{0x08, 0xF0, 0xFF, 0xFF, 0xC1, 0x00, 0x00, 0x12, 0x82, 0xAB, 0xCD, 0xEF}
	b := make([]byte, 12)
	bth.Put(b)
	if !bytes.Equal(b, wantBTH) {
		t.Errorf("BTH.Put = %x", b)
	}
	if got, err := roce.DecodeBTH(wantBTH); err != nil || got != bth {
		t.Errorf("DecodeBTH = %+v, %v", got, err)
	}
	if _, err := roce.DecodeBTH([]byte{0, 1, 0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 1}); err != roce.ErrBadVersion {
		t.Errorf("TVer 1: %v", err)
	}
	reth := roce.RETH{VA: 0x0000555b7579f000, RKey: 0x2a9, DMALen: 2500}
	wantRETH := []byte{0, 0, 0x55, 0x5b, 0x75, 0x79, 0xf0, 0, 0, 0, 0x02, 0xa9, 0, 0, 0x09, 0xc4}
	b = make([]byte, 16)
	reth.Put(b)
	if !bytes.Equal(b, wantRETH) {
		t.Errorf("RETH.Put = %x", b)
	}
	if got, _ := roce.DecodeRETH(wantRETH); got != reth {
		t.Errorf("DecodeRETH = %+v", got)
	}
	aeth := roce.AETH{Syndrome: 0x1F, MSN: 1}
	b = make([]byte, 4)
	aeth.Put(b)
	if !bytes.Equal(b, []byte{0x1f, 0, 0, 1}) {
		t.Errorf("AETH.Put = %x", b)
	}
	at := roce.AtomicETH{VA: 0x000055b64eac5000, RKey: 0x101c, SwapAdd: 1, Compare: 0}
	wantAt := []byte{0, 0, 0x55, 0xb6, 0x4e, 0xac, 0x50, 0, 0, 0, 0x10, 0x1c, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0}
	b = make([]byte, 28)
	at.Put(b)
	if !bytes.Equal(b, wantAt) {
		t.Errorf("AtomicETH.Put = %x", b)
	}
	if got, _ := roce.DecodeAtomicETH(wantAt); got != at {
		t.Errorf("DecodeAtomicETH = %+v", got)
	}
	deth := roce.DETH{QKey: 0x80010000, SrcQP: 1}
	b = make([]byte, 8)
	deth.Put(b)
	if !bytes.Equal(b, []byte{0x80, 0x01, 0, 0, 0, 0, 0, 1}) {
		t.Errorf("DETH.Put = %x", b)
	}
	for name, dec := range map[string]func([]byte) error{
		"BTH":          func(b []byte) error { _, err := roce.DecodeBTH(b); return err },
		"RETH":         func(b []byte) error { _, err := roce.DecodeRETH(b); return err },
		"AETH":         func(b []byte) error { _, err := roce.DecodeAETH(b); return err },
		"AtomicETH":    func(b []byte) error { _, err := roce.DecodeAtomicETH(b); return err },
		"AtomicAckETH": func(b []byte) error { _, err := roce.DecodeAtomicAckETH(b); return err },
		"ImmDt":        func(b []byte) error { _, err := roce.DecodeImmDt(b); return err },
		"IETH":         func(b []byte) error { _, err := roce.DecodeIETH(b); return err },
		"DETH":         func(b []byte) error { _, err := roce.DecodeDETH(b); return err },
	} {
		if err := dec(make([]byte, 3)); err != roce.ErrTruncated {
			t.Errorf("%s on 3 bytes: %v", name, err)
		}
	}
}

// TestLargestIPPacket: the longest RoCEv2 IP packet of a path MTU, from its
// headers: IPv4 20 / IPv6 40, UDP 8, BTH 12, XRCETH+RETH+ImmDt 24, the ICRC 4; and
// the largest path MTU a netdev MTU carries by it (1100 carries 1024 over IPv4,
// where rdma_rxe's active MTU is 512, and 512 over IPv6).
func TestLargestIPPacket(t *testing.T) {
	for _, c := range []struct {
		m    roce.MTU
		v6   bool
		want int
	}{{roce.MTU256, false, 324}, {roce.MTU1024, false, 1092}, {roce.MTU1024, true, 1112}, {roce.MTU4096, false, 4164}, {roce.MTU4096, true, 4184}} {
		if got := roce.LargestIPPacket(c.m, c.v6); got != c.want {
			t.Errorf("LargestIPPacket(%v, v6 %v) = %d, want %d", c.m, c.v6, got, c.want)
		}
	}
	for _, c := range []struct {
		netdev int
		v6     bool
		want   roce.MTU
	}{{1100, false, roce.MTU1024}, {1100, true, roce.MTU512}, {1091, false, roce.MTU512}, {1092, false, roce.MTU1024},
		{1500, false, roce.MTU1024}, {9000, true, roce.MTU4096}, {4163, false, roce.MTU2048}, {323, false, 0}, {324, false, roce.MTU256}, {343, true, 0}} {
		if got := roce.LargestFitting(c.netdev, c.v6); got != c.want {
			t.Errorf("LargestFitting(%d, v6 %v) = %v, want %v", c.netdev, c.v6, got, c.want)
		}
	}
}
