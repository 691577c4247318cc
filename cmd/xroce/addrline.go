package main

import (
	"strconv"
	"strings"

	"github.com/xroce/xroce/cmd/xroce/oob"
	"github.com/xroce/xroce/transport"
)

// addrLine is perftest's line for one side's exchanged values
// (perftest_communication.c ctx_print_pingpong_data, perftest 4.5-0.17):
// BASIC_ADDR_FMT " %s address: LID %#04x QPN %#06x PSN %#06x", then READ_FMT
// " OUT %#04x" for READ and RDMA_FMT " RKey %#08x VAddr %#016llx" for READ and
// WRITE (SEND and atomics print neither), formatted as C's printf does. side is
// "local" or "remote".
func addrLine(side string, d oob.Dest, op transport.WROpcode) string {
	var b strings.Builder
	b.WriteString(" " + side + " address: LID " + cHex(uint64(d.LID), 4) + " QPN " + cHex(uint64(d.QPN), 6) + " PSN " + cHex(uint64(d.PSN), 6))
	if op == transport.WR_RDMA_READ {
		b.WriteString(" OUT " + cHex(uint64(d.OutReads), 4))
	}
	if op == transport.WR_RDMA_READ || op == transport.WR_RDMA_WRITE {
		b.WriteString(" RKey " + cHex(uint64(d.RKey), 8) + " VAddr " + cHex(d.VAddr, 16))
	}
	return b.String()
}

// cHex formats v as C's printf "%#0<width>x": "0x" and hex digits zero-padded so
// that both fill width characters (more when the digits need them); zero has no
// "0x" (C11 7.21.6.1: the # flag prefixes a nonzero result).
func cHex(v uint64, width int) string {
	digits := strconv.FormatUint(v, 16)
	prefix := "0x"
	if v == 0 {
		prefix = ""
	}
	if pad := width - len(prefix) - len(digits); pad > 0 {
		digits = strings.Repeat("0", pad) + digits
	}
	return prefix + digits
}
