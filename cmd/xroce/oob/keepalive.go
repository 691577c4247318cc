package oob

import (
	"fmt"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// keepAlive probes the exchange's peer after 5 s without a segment, every second, and
// gives up after 5 unanswered probes: about 10 s from the last sign of its host to
// ETIMEDOUT (tcp(7): TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT). Go's default (15 s,
// every 15 s, the kernel's 9 probes) takes two and a half minutes.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 5 * time.Second, Interval: time.Second, Count: 5}

// keepAliveSpan is how long the peer's host went without answering when the
// keepalives give up.
var keepAliveSpan = keepAlive.Idle + time.Duration(keepAlive.Count)*keepAlive.Interval

// errUnanswered is the error for an exchange whose peer's host stopped answering.
func errUnanswered(what, peer string) error {
	return fmt.Errorf("oob: %w %s the exchange with %s: its host answered no TCP keepalive for %v, so it is cut off (its link or address gone, a firewall between) or down; see its output if it has any",
		errTimedOut, what, peer, keepAliveSpan)
}

// errEndedUnclosed is the error for an exchange whose connection ended without the
// peer closing it (endedUnclosed).
func errEndedUnclosed(what, peer string) error {
	return fmt.Errorf("oob: %s the exchange with %s: the connection ended without the peer closing it: its host answered no TCP keepalive for %v, or reset the connection, so it is cut off (its link or address gone, a firewall between), down or restarted; see its output if it has any",
		what, peer, keepAliveSpan)
}

// endedUnclosed reports whether the kernel ended c's connection without the peer
// closing it: the socket is in TCP_CLOSE (keepalives unanswered, or a reset), where
// a peer's own close (FIN) leaves it in CLOSE_WAIT. The first read of the socket
// takes the error (ETIMEDOUT from tcp_write_err, or ECONNRESET), so a later reader
// may see only an end of stream; this tells the cases apart.
func endedUnclosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	closed := false
	_ = raw.Control(func(fd uintptr) {
		info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		closed = err == nil && info.State == unix.BPF_TCP_CLOSE
	})
	return closed
}
