package main

import (
	"testing"

	"github.com/xroce/xroce/cmd/xroce/oob"
	"github.com/xroce/xroce/transport"
)

// TestCHex: C's "%#0Nx", which perftest's address lines use: the 0x counts in the
// width, and zero has none.
func TestCHex(t *testing.T) {
	for _, c := range []struct {
		v     uint64
		width int
		want  string
	}{
		{0, 4, "0000"}, {0x21, 6, "0x0021"}, {0xdcb023, 6, "0xdcb023"}, {0x112f, 8, "0x00112f"},
		{0x7f1e68d77000, 16, "0x007f1e68d77000"}, {0x10, 4, "0x10"}, {0xffffffffffffffff, 16, "0xffffffffffffffff"},
	} {
		if got := cHex(c.v, c.width); got != c.want {
			t.Errorf("cHex(%#x, %d) = %q, want %q", c.v, c.width, got, c.want)
		}
	}
}

// TestAddrLine: the address lines as perftest 4.5-0.17 prints them: the WRITE line
// byte for byte as in the capture of ib_write_bw on rdma_rxe
// (test/interop/testdata/libcells/write_bw-guest-client.txt), READ's with its
// outstanding reads, SEND's and atomics' with neither.
func TestAddrLine(t *testing.T) {
	d := oob.Dest{QPN: 0x21, PSN: 0xdcb023, RKey: 0x112f, VAddr: 0x7f1e68d77000, OutReads: 16}
	for _, c := range []struct {
		side string
		op   transport.WROpcode
		want string
	}{
		{"local", transport.WR_RDMA_WRITE, " local address: LID 0000 QPN 0x0021 PSN 0xdcb023 RKey 0x00112f VAddr 0x007f1e68d77000"},
		{"remote", transport.WR_RDMA_READ, " remote address: LID 0000 QPN 0x0021 PSN 0xdcb023 OUT 0x10 RKey 0x00112f VAddr 0x007f1e68d77000"},
		{"local", transport.WR_SEND, " local address: LID 0000 QPN 0x0021 PSN 0xdcb023"},
		{"local", transport.WR_ATOMIC_FETCH_AND_ADD, " local address: LID 0000 QPN 0x0021 PSN 0xdcb023"},
	} {
		if got := addrLine(c.side, d, c.op); got != c.want {
			t.Errorf("%v:\n got %q\nwant %q", c.op, got, c.want)
		}
	}
}
