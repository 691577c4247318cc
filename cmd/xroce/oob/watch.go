package oob

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
)

// perftest sends nothing on its TCP connection while a test runs: what arrives
// there in the middle of a test is the peer's end-of-test exchange (it finished
// first: the two sides run different tests, -n or -D), and an end of stream means
// the peer exited.

// ErrPeerClosed is wrapped by Watch's error for a peer that closed the exchange.
var ErrPeerClosed = errors.New("the peer closed the out-of-band connection")

// Watch looks, without waiting or consuming anything, at the exchange's
// connection during a test: it returns an error wrapping ErrPeerClosed if the
// peer closed it (or it was reset), and reports whether the peer has sent data
// this side has not read yet.
func (s *Session) Watch() (pending bool, err error) {
	if s.ch != nil {
		return s.ch.Pending()
	}
	return peek(s.conn, s.opened)
}

// peek is Watch on a TCP connection made at opened.
func peek(c net.Conn, opened time.Time) (pending bool, err error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false, nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false, nil
	}
	// A read deadline left by the last step would fail the look itself: nothing
	// else reads while a test runs.
	_ = c.SetReadDeadline(time.Time{})
	var n int
	var rerr error
	cerr := raw.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, rerr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return true // never wait
	})
	switch {
	case cerr != nil:
		return false, nil // closed on our side: not the peer's doing
	case rerr == syscall.EAGAIN || rerr == syscall.EINTR:
		return false, nil
	case rerr == syscall.ETIMEDOUT: // the keepalives went unanswered: the peer's host, not the peer
		return false, errUnanswered("watching", c.RemoteAddr().String())
	case rerr == syscall.ECONNRESET:
		return false, fmt.Errorf("%w (%v%s)", ErrPeerClosed, rerr, resetNote(time.Since(opened)))
	case rerr != nil:
		return false, fmt.Errorf("%w (%v)", ErrPeerClosed, rerr)
	case n == 0:
		return false, ErrPeerClosed
	}
	return true, nil
}
