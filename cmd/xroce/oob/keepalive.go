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

// resetNote completes the error of an exchange reset age after it opened: a peer's
// kernel resets the connection when the peer exits with data unread, and when its
// own keepalives went unanswered, as when its host is cut off from this one. That
// takes keepAliveSpan from the last segment, so a younger connection gets no note.
func resetNote(age time.Duration) string {
	if age < keepAliveSpan {
		return ""
	}
	return fmt.Sprintf("; or, as the connection was reset, the peer's host heard nothing from this one for %v (its TCP keepalives unanswered), so one of the two is cut off (a link or address gone, a firewall between)", keepAliveSpan)
}

// keepalivesUnanswered reports whether the kernel ended c's connection because its
// keepalives went unanswered: the socket is in TCP_CLOSE with keepAlive.Count probes
// out (tcp_keepalive_timer, then tcp_done, which leaves icsk_probes_out as it was;
// TCP_INFO's tcpi_probes). The first read of the socket takes the error
// (ETIMEDOUT), so a later reader may see only an end of stream; this still tells
// it apart from a peer's close (FIN: CLOSE_WAIT).
func keepalivesUnanswered(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	unanswered := false
	_ = raw.Control(func(fd uintptr) {
		info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		unanswered = err == nil && info.State == unix.BPF_TCP_CLOSE && int(info.Probes) >= keepAlive.Count
	})
	return unanswered
}
