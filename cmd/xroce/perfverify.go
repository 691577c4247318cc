package main

import (
	"encoding/binary"
	"fmt"

	"github.com/xroce/xroce/transport"
)

// Data verification (--verify, both sides xroce): the sender of each size's
// messages puts pattern(size) in them; a read test's server offers
// pattern(readSeed). Each receiver checks the last message of every size, on every
// QP, where it is sure to be in place: after the size (SEND, READ, write_lat's
// server), before its last answer (write_lat's client), or after the whole run
// (write_bw's server, whose -a sizes each have their place; atomic_bw's counters).
// --verify-all checks every message instead (perfverifyall.go).

// checkData compares what arrived, the first len(want) bytes of room (the part of
// the buffer the message lands in, to the end of its half), with what was sent, and
// says why they differ: nothing arrived or the sender sent no pattern (it lacks
// --verify), or the peer's messages have another size (-s differs: a longer one
// fills room past len(want), a shorter one leaves zeros). seed is the pattern's
// seed for a k-byte message: k for WRITE and SEND, k+1 for what a READ's server
// offers (readSeed).
func checkData(what string, room, want []byte, seed func(k int) uint64) error {
	got := room[:len(want)]
	if string(got) == string(want) {
		return nil
	}
	if allZero(got) {
		return fmt.Errorf("verify: %s: no data arrived, or the sender ran without --verify (it then sends its buffer as it is: zeros); give both sides --verify", what)
	}
	if k := patternLen(room, seed); k > 0 && k != len(want) {
		return fmt.Errorf("verify: %s: the peer's messages are %d bytes and this side's -s is %d; give both sides the same -s", what, k, len(want))
	}
	if k := longerPattern(room, seed); k > 0 {
		return fmt.Errorf("verify: %s: the peer's messages are %d bytes, longer than the room for this side's -s %d; give both sides the same -s", what, k, len(want))
	}
	i := 0
	for i < len(want) && got[i] == want[i] {
		i++
	}
	return fmt.Errorf("verify: %s: %d bytes differ from byte %d: give both sides the same test, -s and --verify", what, len(want), i)
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

// sizeSeed is the pattern seed of a k-byte WRITE or SEND message.
func sizeSeed(k int) uint64 { return uint64(k) }

// readSeedOf is the pattern seed of a READ server's k-byte buffer (readSeed).
func readSeedOf(k int) uint64 { return uint64(k) + 1 }

// landing returns the buffer from offset b to the end of the half it is in: where
// a message placed at b may have landed, longer than this side's -s.
func (c *conn) landing(b int) []byte { return c.buf[b : (b/c.half+1)*c.half] }

// patternLen returns k if got starts with a k-byte message's pattern, seeded by
// seed(k), and holds zeros after it, or 0.
func patternLen(got []byte, seed func(k int) uint64) int {
	last := len(got) - 1
	for last >= 0 && got[last] == 0 {
		last--
	}
	// The pattern's own last bytes may be zeros.
	for k := last + 1; k <= min(last+16, len(got)); k++ {
		p := make([]byte, k)
		pattern(p, seed(k))
		if string(got[:k]) == string(p) {
			return k
		}
	}
	return 0
}

// longerPattern returns k if room, full to its end, starts as a k-byte message's
// pattern does (seeded by seed(k)) for a k longer than room, up to 2^24 bytes, or
// 0: a peer whose -s is larger than the room this side gave its messages. It runs
// only when a check failed (0.3 s at worst here).
func longerPattern(room []byte, seed func(k int) uint64) int {
	if len(room) == 0 || room[len(room)-1] == 0 {
		return 0
	}
	head := room[:min(16, len(room))]
	p := make([]byte, len(head))
	for k := len(room) + 1; k <= 1<<24; k++ {
		pattern(p, seed(k))
		if string(p) == string(head) {
			return k
		}
	}
	return 0
}

// checkLatWrite checks the peer's last write_lat message: the pattern, and the
// iteration mark in its last byte.
func (c *conn) checkLatWrite() error {
	want := make([]byte, c.size)
	pattern(want, uint64(c.size))
	want[c.size-1] = byte(c.o.iters)
	if err := checkData(fmt.Sprintf("%d-byte messages", c.size), c.buf[c.half:c.half+c.size], want, sizeSeed); err != nil {
		return err
	}
	c.verified++
	return nil
}

// verifySize checks the data of the size just run, where this side can.
func (c *conn) verifySize(bw bool) error {
	if !c.o.verify || c.o.verifyAll {
		return nil
	}
	n := c.size
	want := make([]byte, n)
	off, seed := 0, sizeSeed
	switch {
	case c.t.op == transport.WR_RDMA_WRITE && c.t.lat && !c.client:
		return c.checkLatWrite()
	case c.t.op == transport.WR_SEND && (c.t.lat || !c.client || c.o.bidir):
		pattern(want, uint64(n))
		off = c.half * boolInt(c.split())
	case c.t.op == transport.WR_RDMA_READ && (c.client || c.o.bidir):
		pattern(want, c.readSeed())
		off, seed = c.half*boolInt(c.t.lat), readSeedOf
	default:
		return nil // checked in runLat or after the run, or by the other side
	}
	for i := range c.qps {
		b := c.base(i) + off
		if err := checkData(fmt.Sprintf("QP %d, %d-byte messages", i, n), c.landing(b), want, seed); err != nil {
			return err
		}
	}
	c.verified++
	return nil
}

// checkAtomicSum checks the atomic_bw counters' sum against the FETCH_AND_ADDs the
// client completed. With -n they must be equal. With -D the client counts what had
// completed when the time ran out, and the requests then in flight (at most -t a
// QP) are executed all the same: the sum must lie between the two.
func (c *conn) checkAtomicSum(sum uint64) error {
	inFlight := uint64(0)
	if c.o.duration != 0 || c.o.runInf {
		inFlight = uint64(c.o.txDepth * len(c.qps))
	}
	if sum < c.remoteIters || sum > c.remoteIters+inFlight {
		if inFlight == 0 {
			return fmt.Errorf("verify: the counters add up to %d after %d FETCH_AND_ADDs", sum, c.remoteIters)
		}
		return fmt.Errorf("verify: the counters add up to %d after %d FETCH_AND_ADDs completed within -D and at most %d in flight (-t %d on %d QPs; give both sides the same -t)",
			sum, c.remoteIters, inFlight, c.o.txDepth, len(c.qps))
	}
	if inFlight == 0 {
		c.verifyNote(" Data verified: counter %d after %d FETCH_AND_ADD\n", sum, c.remoteIters)
	} else {
		c.verifyNote(" Data verified: counter %d after %d FETCH_AND_ADD completed within -D and %d then in flight\n", sum, c.remoteIters, sum-c.remoteIters)
	}
	return nil
}

// verifyEnd runs the checks that wait for the end of the run and prints what was
// verified.
func (c *conn) verifyEnd() error {
	if c.o.verifyAll {
		return c.verifyAllEnd()
	}
	if !c.o.verify {
		return nil
	}
	switch {
	case c.atomic() && (!c.client || c.o.bidir):
		var sum uint64
		for i := range c.qps {
			sum += binary.NativeEndian.Uint64(c.buf[c.base(i)+c.half*boolInt(c.split()):])
		}
		return c.checkAtomicSum(sum)
	case c.t.op == transport.WR_RDMA_WRITE && !c.t.lat && (!c.client || c.o.bidir):
		for _, n := range c.sizes() {
			off := 0
			if c.o.all {
				off = n - 2
			}
			want := make([]byte, n)
			pattern(want, uint64(n))
			for i := range c.qps {
				b := c.base(i) + c.half*boolInt(c.split()) + off
				if err := checkData(fmt.Sprintf("QP %d, %d-byte messages", i, n), c.landing(b), want, sizeSeed); err != nil {
					return err
				}
			}
			c.verified++
		}
	}
	sizes := c.sizes()
	if c.verified == 0 {
		// This side sends the data (or offers it to READs): the other side
		// checks it, if it has --verify too.
		role, peer := c.verifyRole()
		c.verifyNote(" Data verification: this side %s the data; the %s checks it when it has --verify too (it then says so in its output)\n", role, peer)
		return nil
	}
	if c.verified < len(sizes) {
		return nil // the other side checks
	}
	what := fmt.Sprintf("the %d bytes of the last message", sizes[0])
	if len(sizes) > 1 {
		what = fmt.Sprintf("the last message of each size, %d to %d bytes", sizes[0], sizes[len(sizes)-1])
	}
	if len(c.qps) > 1 {
		what += fmt.Sprintf(", on each of the %d QPs", len(c.qps))
	}
	c.verifyNote(" Data verified: %s\n", what)
	return nil
}

// verifyNote prints what --verify checked, except with --output, whose one
// figure is all a script reads (a failed check still fails the run).
func (c *conn) verifyNote(format string, a ...any) {
	if c.verbose() {
		fmt.Fprintf(c.o.out, format, a...)
	}
}

// readSeed seeds what a read test's server offers: the client checks the first
// size bytes of it, whatever the size.
func (c *conn) readSeed() uint64 { return uint64(c.maxSize()) + 1 }

// pattern fills b with a sequence both xroce sides compute.
func pattern(b []byte, seed uint64) {
	x := seed*0x9E3779B97F4A7C15 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
}

// verifyRole says, for the side that does not check the data, what it does with
// it and which side checks it.
func (c *conn) verifyRole() (string, string) {
	peer := "server"
	if !c.client {
		peer = "client"
	}
	if c.t.op == transport.WR_RDMA_READ {
		return "offers", peer
	}
	return "sends", peer
}
