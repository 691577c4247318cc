package xdp

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// waiter blocks on a set of socket descriptors and a wake eventfd, for
// transport.Link's Wait and Wake.
type waiter struct {
	pfds   []unix.PollFd // the sockets, then the eventfd
	wakeFD int
}

// newWaiter creates the eventfd; add sockets with watch.
func newWaiter() (*waiter, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("xdp: eventfd: %w", err)
	}
	return &waiter{wakeFD: fd, pfds: []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}}, nil
}

// watch adds a socket whose readability ends a wait.
func (w *waiter) watch(fd int) {
	w.pfds = append([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, w.pfds...)
}

// wait blocks until a watched socket is readable, wake is called, or the deadline
// passes (zero: no deadline), with ppoll's nanosecond timeout.
func (w *waiter) wait(deadline time.Time) error {
	var ts *unix.Timespec
	if !deadline.IsZero() {
		t := unix.NsecToTimespec(int64(max(time.Until(deadline), 0)))
		ts = &t
	}
	for i := range w.pfds {
		w.pfds[i].Revents = 0
	}
	if _, err := unix.Ppoll(w.pfds, ts, nil); err != nil && err != unix.EINTR {
		return fmt.Errorf("xdp: poll: %w", err)
	}
	if w.pfds[len(w.pfds)-1].Revents != 0 {
		var b [8]byte
		_, _ = unix.Read(w.wakeFD, b[:])
	}
	return nil
}

// wake ends a concurrent or the next wait.
func (w *waiter) wake() {
	one := [8]byte{1}
	_, _ = unix.Write(w.wakeFD, one[:])
}

func (w *waiter) close() { unix.Close(w.wakeFD) }
