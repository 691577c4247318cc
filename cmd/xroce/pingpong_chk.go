package main

import (
	"bytes"
	"fmt"
)

// pingpong -c (--chk): ibv_rc_pingpong's, ibv_uc_pingpong's and ibv_ud_pingpong's
// "validate received buffer" (rdma-core libibverbs/examples/*_pingpong.c). They
// fill their buffer with 0x7b and, with -c, their client sets the first byte of
// every page of the message to i/page_size % sizeof(char), that is 0, and their
// server looks at those bytes of the last message. xroce sends the same bytes, so
// either side may be Debian's, and checks every byte of every message it receives.

// chkPage is rc_pingpong's page_size (sysconf(_SC_PAGESIZE) on x86-64 and arm64).
const chkPage = 4096

// chkFill is rc_pingpong's buffer fill byte (pp_init_ctx: memset(buf, 0x7b, size)).
const chkFill = 0x7b

// chkPattern returns the size bytes a -c pingpong sends.
func chkPattern(size int) []byte {
	b := bytes.Repeat([]byte{chkFill}, size)
	for i := 0; i < size; i += chkPage {
		b[i] = 0
	}
	return b
}

// chkArm fills send with the pattern and sets a.check to judge what lands in recv
// (after skip bytes of the completion's length: UD's GRH area).
func chkArm(a *ppArgs, send, recv []byte, skip int) {
	want := chkPattern(len(send))
	copy(send, want)
	n := 0
	a.check = func(byteLen int) error { n++; return chkReceived(recv, want, n, byteLen-skip) }
}

// chkReceived compares a received message of length bytes with want and scrubs
// it, so that the next message is not judged by this one's bytes. The error names
// a message shorter than -s, or the first page that differs, in rc_pingpong's
// words, and the byte.
func chkReceived(got, want []byte, n, length int) error {
	if length != len(want) {
		for j := range got {
			got[j] = ^want[j]
		}
		return fmt.Errorf("message %d was %d bytes where -s is %d: give both sides the same -s", n, length, len(want))
	}
	i := 0
	for i < len(want) && got[i] == want[i] {
		i++
	}
	if i < len(want) {
		return fmt.Errorf("invalid data in page %d: message %d, byte %d is %#02x, want %#02x",
			i/chkPage, n, i, got[i], want[i])
	}
	for j := range got {
		got[j] = ^want[j]
	}
	return nil
}
