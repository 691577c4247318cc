package main

import (
	"encoding/binary"
	"fmt"
	"math/big"

	"github.com/xroce/xroce/cmd/xroce/oob"
	"github.com/xroce/xroce/transport"
)

// Verifying every message (--verify-all, write_bw, read_bw and send_bw at one -s,
// both sides xroce): message msg of QP qp has content of its own, msgContent(size,
// qp, msg), and a slot of its own on both sides, msg×size bytes into the QP's area
// (slotOff): the sender's source (write_bw and send_bw clients, read_bw's server),
// and the checker's landing place (write_bw's server, where the client's WRITE
// msg goes to the advertised address + msg×size; send_bw's server, whose receive
// msg is posted there; read_bw's client, which reads the server's slot msg into its
// own). Both sides fill their slots before the exchange, outside the timed run: the
// sender with the messages, the checker with their complement, so that a message
// that never landed differs in every byte. The checker checks every slot after the
// run. Each side's key message says it runs --verify-all, and its -n (keySRQN),
// so that a peer without it, or with another -n, is refused before the test starts.

// maxSlotBytes bounds the slots of a --verify-all run, -q × -n × -s bytes: each
// side's buffer holds them all.
const maxSlotBytes = 1 << 30

// verifyAllMark is the top bit of the SRQ number field of a --verify-all side's
// key messages, whose other 31 bits carry its -n (keySRQN): perftest sends 0 there
// without an SRQ, or an SRQ's 24-bit number, and reads it only for XRC; no xroce
// tool uses it otherwise.
const verifyAllMark = 1 << 31

// keySRQN is the SRQ number field of this side's key messages: with --verify-all
// verifyAllMark | -n (at most 2^30: maxSlotBytes), else 0 as perftest's.
func (c *conn) keySRQN() uint32 {
	if c.o.verifyAll {
		return verifyAllMark | uint32(c.o.iters)
	}
	return 0
}

// slotOff is where message msg's slot starts in a QP's area (or after the peer's
// advertised address), in bytes: msg × size.
func slotOff(msg, size int) int { return msg * size }

// msgSeed seeds the pattern of message msg of QP qp at size bytes: distinct for
// each message of a size and QP (msg < 2^32).
func msgSeed(size, qp, msg int) uint64 {
	return uint64(size)<<40 ^ uint64(qp)<<32 ^ uint64(msg)
}

// tagMul is the odd factor of msgTag's size term, and tagMulInv its inverse
// modulo 2^32: tagMul × tagMulInv = 1 (mod 2^32).
const (
	tagMul    = 0x9E3779B1
	tagMulInv = 0x0E8B2F51
)

// msgTag is what the first 4 bytes of message msg of QP qp at size bytes hold,
// little-endian: msg ^ qp<<24 ^ size×0x9E3779B1. The tags of a QP's messages
// differ (msg < 2^32), so two messages of 4 bytes or more always differ; messages
// of 1 to 3 bytes hold the tag's first bytes, and differ within 2^(8×size)
// consecutive messages. Below 2^24 messages the QPs' tags differ too.
func msgTag(size, qp, msg int) uint32 {
	return uint32(msg) ^ uint32(qp)<<24 ^ uint32(size)*tagMul
}

// tagMsg is the message index whose tag b starts with, for messages of QP qp at
// size bytes (4 or more); ok is false for b shorter than 4 bytes.
func tagMsg(b []byte, size, qp int) (msg int, ok bool) {
	if len(b) < 4 {
		return 0, false
	}
	return int(binary.LittleEndian.Uint32(b) ^ uint32(qp)<<24 ^ uint32(size)*tagMul), true
}

// tagSize is the size of message 0 of QP 0 whose tag b starts with (0 for b
// shorter than 4 bytes): what the peer's -s is when b is the start of its first
// message.
func tagSize(b []byte) int {
	if len(b) < 4 {
		return 0
	}
	return int(binary.LittleEndian.Uint32(b) * tagMulInv)
}

// msgContent fills b with the first len(b) bytes (all, for len(b) = size) of
// message msg of QP qp at size bytes: its tag, then pattern(msgSeed) from byte 4
// on.
func msgContent(b []byte, size, qp, msg int) {
	pattern(b, msgSeed(size, qp, msg))
	var t [4]byte
	binary.LittleEndian.PutUint32(t[:], msgTag(size, qp, msg))
	copy(b, t[:])
}

// invert complements every byte of b.
func invert(b []byte) {
	for i := range b {
		b[i] = ^b[i]
	}
}

// checkVerifyAll refuses --verify-all where it does not apply: other tests than
// write_bw, read_bw and send_bw, and -a, -b, -D, --run_infinitely, or more slots
// than maxSlotBytes. check has refused -s 0 before it.
func (o *perfOptions) checkVerifyAll(name string) error {
	switch {
	case !o.verifyAll:
		return nil
	case name != "write_bw" && name != "read_bw" && name != "send_bw":
		return fmt.Errorf("--verify-all is for write_bw, read_bw and send_bw; %s has --verify", name)
	case o.all:
		return fmt.Errorf("--verify-all runs one size: it does not go with -a (each message has its own slot of -s bytes); use --verify with -a")
	case o.bidir:
		return fmt.Errorf("--verify-all does not go with -b: only one side sends; use --verify with -b")
	case o.duration > 0 || o.runInf:
		return fmt.Errorf("--verify-all runs -n messages, each with its own slot: it does not go with -D or --run_infinitely")
	case o.iters > maxSlotBytes/o.size/o.qps:
		p := new(big.Int).Mul(big.NewInt(int64(o.qps)), big.NewInt(int64(o.iters)))
		p.Mul(p, big.NewInt(int64(o.size)))
		fix := fmt.Sprintf("lower -n to %d or less at this -s and -q, or lower -s", maxSlotBytes/o.size/o.qps)
		if maxSlotBytes/o.size/o.qps == 0 { // not one message fits: -n cannot help
			fix = "lower -s or -q: not one message per QP fits at these"
		}
		return fmt.Errorf("--verify-all: -q %d × -n %d × -s %d = %s bytes of message slots, more than the %d (1 GiB) allowed: each message has a slot of its own in both sides' buffers; %s",
			o.qps, o.iters, o.size, p, maxSlotBytes, fix)
	}
	return nil
}

// slotsHalf is the half (see conn.half) that gives each QP's area room for n slots
// of size bytes: n×size rounded up to 8192, halved.
func slotsHalf(n, size int) int { return (n*size + 8191) / 8192 * 4096 }

// checksAll says whether this side checks the messages: write_bw's and send_bw's
// server, read_bw's client.
func (c *conn) checksAll() bool { return c.client == (c.t.op == transport.WR_RDMA_READ) }

// fillSlots fills this side's slots before the run: the messages on the side
// that sends them (or offers them to READs), their complements on the checker's.
func (c *conn) fillSlots() {
	for qp := range c.o.qps {
		for msg := range c.o.iters {
			b := c.slot(qp, msg)
			msgContent(b, c.size, qp, msg)
			if c.checksAll() {
				invert(b)
			}
		}
	}
}

// slot is message msg's slot in QP qp's area of this side's buffer: size bytes.
func (c *conn) slot(qp, msg int) []byte {
	b := c.base(qp) + slotOff(msg, c.size)
	return c.buf[b : b+c.size]
}

// toSlot points wr, a work request of the run, at message msg's slots: the local
// one (source or READ landing) and the peer's (WRITE or READ address). It gives
// wr an SGE list of its own.
func (c *conn) toSlot(wr *transport.SendWR, msg int) {
	off := uint64(slotOff(msg, c.size))
	wr.RemoteAddr += off
	sge := wr.SGList[0]
	sge.Addr += off
	wr.SGList = []transport.SGE{sge}
}

// recvDone takes a send_bw receiver's completion of receive id (message id) on
// QP qp: with --verify-all it must hold -s bytes, and the receive for message
// id+rxDepth (-r) goes to that message's slot; without, receive id is posted
// again in place.
func (c *conn) recvDone(qp int, id uint64, byteLen uint32) error {
	if !c.o.verifyAll {
		return c.postRecv(qp, id)
	}
	if int(byteLen) != c.size {
		return fmt.Errorf("verify-all: QP %d, message %d: %d bytes received, want %d: give both sides the same -s", qp, id, byteLen, c.size)
	}
	if next := id + uint64(c.o.rxDepth); next < uint64(c.o.iters) {
		return c.postRecv(qp, next)
	}
	return nil
}

// checkPeerVerifyAll refuses a peer whose key message shows it runs --verify-all
// when this side does not, or the other way round, or with another -n.
func (c *conn) checkPeerVerifyAll(remote oob.Dest) error {
	peer, n := remote.SRQN&verifyAllMark != 0, int(remote.SRQN&^verifyAllMark)
	switch {
	case c.o.verifyAll && !peer:
		return fmt.Errorf("--verify-all: the peer runs without --verify-all (its key message has no --verify-all mark): each message needs a slot of its own on both sides; give both sides --verify-all")
	case !c.o.verifyAll && peer:
		return fmt.Errorf("the peer runs with --verify-all and this side without: each message needs a slot of its own on both sides; give both sides --verify-all")
	case peer && n != c.o.iters:
		return fmt.Errorf("--verify-all: the peer's -n is %d and this side's %d: each message has a slot of its own on both sides; give both sides the same -n", n, c.o.iters)
	}
	return nil
}

// verifyAllEnd checks every slot on the checking side and says what it verified,
// or says on the other side who checks.
func (c *conn) verifyAllEnd() error {
	if !c.checksAll() {
		role, peer := c.verifyRole()
		c.verifyNote(" Data verification: this side %s the data, each message its own content, and the %s checks every message (--verify-all)\n", role, peer)
		return nil
	}
	want := make([]byte, c.size)
	for qp := range c.o.qps {
		for msg := range c.o.iters {
			msgContent(want, c.size, qp, msg)
			if got := c.slot(qp, msg); string(got) != string(want) {
				return slotError(got, want, qp, msg, c.o.iters)
			}
		}
	}
	c.verifyNote(" Data verified: %s\n", verifiedAll(c.o.qps, c.o.iters, c.size))
	return nil
}

// verifiedAll says what a --verify-all check verified: q QPs of n messages of
// size bytes each.
func verifiedAll(q, n, size int) string {
	s := fmt.Sprintf("every one of the %d messages of %s", q*n, byteCount(size))
	if q*n == 1 {
		s = "the one message of " + byteCount(size)
	}
	if q > 1 {
		s += fmt.Sprintf(", %d on each of the %d QPs", n, q)
	}
	return s
}

// byteCount says n bytes in words: "1 byte", "4097 bytes".
func byteCount(n int) string {
	if n == 1 {
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}

// sameStart says whether got starts as message 0 of QP 0 at size bytes does.
func sameStart(got []byte, size int) bool {
	m := make([]byte, min(len(got), size))
	msgContent(m, size, 0, 0)
	return string(got[:len(m)]) == string(m)
}

// slotError describes how message msg of QP qp (of n per QP) differs from want:
// the first byte that differs, and whether the slot still holds its fill (the
// message never landed) or another message's tag (stale, duplicated or misplaced).
func slotError(got, want []byte, qp, msg, n int) error {
	i := 0
	for got[i] == want[i] {
		i++
	}
	why := ""
	fill := make([]byte, len(want))
	copy(fill, want)
	invert(fill)
	j, ok := tagMsg(got, len(want), qp)
	switch k := tagSize(got); {
	case string(got) == string(fill):
		why = ": the slot still holds its fill, nothing landed there"
	case ok && j != msg && j >= 0 && j < n:
		why = fmt.Sprintf(": its first 4 bytes are message %d's (a stale, duplicated or misplaced message)", j)
	case qp == 0 && msg == 0 && k > 0 && k != len(want) && k <= transport.MaxMsgSize && sameStart(got, k):
		why = fmt.Sprintf(": the peer's messages are %d bytes and this side's -s is %d; give both sides the same -s", k, len(want))
	}
	return fmt.Errorf("verify-all: QP %d, message %d of %d (%s): byte %d differs, %#02x where %#02x was expected%s",
		qp, msg, n, byteCount(len(want)), i, got[i], want[i], why)
}
