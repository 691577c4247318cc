package xdp

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ErrUMEMLimit is returned by Open when the kernel refuses to pin a socket's UMEM:
// AF_XDP charges it to RLIMIT_MEMLOCK unless the process has CAP_IPC_LOCK
// (xdp_umem_account_pages in net/xdp/xdp_umem.c answers ENOBUFS), even on kernels
// that charge BPF maps to the memory cgroup instead.
var ErrUMEMLimit = errors.New("the AF_XDP UMEM is locked memory beyond RLIMIT_MEMLOCK: run as root or with CAP_IPC_LOCK, or raise the limit (ulimit -l unlimited; LimitMEMLOCK=infinity in a systemd unit; --ulimit memlock=-1 for docker run)")

// umemBytes is the locked memory one queue's socket pins.
const umemBytes = (RxFrames + TxFrames) * FrameSize

// raiseMemlock lifts RLIMIT_MEMLOCK for the sockets' UMEMs (queues of them): to
// unlimited where the process may raise its hard limit (CAP_SYS_RESOURCE), else the
// soft limit to the hard one when the soft one is too low for them. Failures are
// left to the bind, whose error names the limit (umemError).
func raiseMemlock(queues int) {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim) != nil || lim.Cur == unix.RLIM_INFINITY {
		return
	}
	if unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY}) == nil {
		return
	}
	if lim.Cur < lim.Max && lim.Cur < uint64(queues)*umemBytes {
		_ = unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: lim.Max, Max: lim.Max})
	}
}

// umemError names the locked-memory limit for err, the kernel refusing to pin a
// UMEM (ENOBUFS over RLIMIT_MEMLOCK, ENOMEM when the pages cannot be pinned).
func umemError(err error) error {
	var lim unix.Rlimit
	limit := "unknown"
	if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim) == nil {
		limit = "unlimited"
		if lim.Cur != unix.RLIM_INFINITY {
			limit = fmt.Sprintf("%d KiB", lim.Cur>>10)
		}
	}
	return fmt.Errorf("%w (each queue pins %d MiB; RLIMIT_MEMLOCK is %s): %v", ErrUMEMLimit, umemBytes>>20, limit, err)
}
