// Package xsk is an AF_XDP socket on golang.org/x/sys/unix: a UMEM, its fill and
// completion rings, the RX and TX rings, bound to one queue of an interface in copy
// or zero-copy mode, optionally with multi-buffer (XDP_USE_SG, Linux 6.6 and later)
// and need_wakeup. It knows nothing about frames or chunk ownership: package xdp does
// that bookkeeping. Errors carry the errno of the step that failed; nothing panics.
package xsk

import (
	"errors"
	"fmt"
	"math/bits"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Config sizes and binds a socket.
type Config struct {
	Frames    uint32 // UMEM chunks
	FrameSize uint32 // bytes per chunk: 2048 or 4096
	// Ring entries, each a power of two.
	FillSize, CompletionSize, RxSize, TxSize uint32
	// MultiBuffer binds with XDP_USE_SG: frames longer than a chunk are received and
	// sent as chained descriptors. The XDP program must be loaded with
	// BPF_F_XDP_HAS_FRAGS for the kernel to hand it such frames.
	MultiBuffer bool
	// NeedWakeup binds with XDP_USE_NEED_WAKEUP: the kernel says (ring flags) when
	// it needs a syscall to make progress, so a busy socket makes fewer of them.
	NeedWakeup bool
	// ZeroCopy binds with XDP_ZEROCOPY, Copy with XDP_COPY; neither lets the kernel
	// choose (zero-copy where the driver has it, else copy).
	ZeroCopy, Copy bool
	// TxBudget, when above the kernel's default of 32 (TX_BATCH_SIZE), is how many
	// TX descriptors one sendto may take in copy mode (XDP_MAX_TX_SKB_BUDGET, Linux
	// 6.17 and later; at most TxSize). A kernel without the option keeps 32:
	// Socket.TxBudget says which.
	TxBudget uint32
}

// DefaultTxBudget is the kernel's TX descriptors per sendto in copy mode
// (TX_BATCH_SIZE in net/xdp/xsk.c).
const DefaultTxBudget = 32

// Socket is one bound AF_XDP socket and its rings.
type Socket struct {
	fd         int
	umem       []byte
	frameSize  uint32
	needWakeup bool
	multi      bool
	zeroCopy   bool
	txBudget   uint32

	Fill       FillRing
	Completion CompletionRing
	Rx         RxRing
	Tx         TxRing
}

// ErrBind wraps the errno of a failed bind(2): a busy queue (EBUSY), a queue the
// interface does not have (EINVAL), flags the kernel or driver refuses (EINVAL on
// kernels that do not know them, EOPNOTSUPP from drivers that cannot do them).
var ErrBind = errors.New("AF_XDP bind")

// Open creates a socket, registers a UMEM of cfg.Frames chunks, creates and maps
// the rings and binds to queue of the interface ifindex (in the calling thread's
// network namespace).
func Open(ifindex, queue int, cfg Config) (s *Socket, err error) {
	for _, r := range []struct {
		name string
		n    uint32
	}{{"fill", cfg.FillSize}, {"completion", cfg.CompletionSize}, {"RX", cfg.RxSize}, {"TX", cfg.TxSize}} {
		if bits.OnesCount32(r.n) != 1 {
			return nil, fmt.Errorf("xsk: %s ring of %d entries: must be a power of two", r.name, r.n)
		}
	}
	if cfg.FrameSize != 2048 && cfg.FrameSize != 4096 {
		return nil, fmt.Errorf("xsk: chunk size %d: must be 2048 or 4096", cfg.FrameSize)
	}
	fd, err := unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("xsk: AF_XDP socket: %w", err)
	}
	s = &Socket{fd: fd, frameSize: cfg.FrameSize, needWakeup: cfg.NeedWakeup, multi: cfg.MultiBuffer}
	defer func() {
		if err != nil {
			s.Close()
			s = nil
		}
	}()
	// Anonymous private memory is page-aligned, as aligned-mode UMEM requires.
	s.umem, err = unix.Mmap(-1, 0, int(cfg.Frames)*int(cfg.FrameSize), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return s, fmt.Errorf("xsk: UMEM of %d bytes: %w", int(cfg.Frames)*int(cfg.FrameSize), err)
	}
	reg := unix.XDPUmemReg{Addr: uint64(uintptr(unsafe.Pointer(&s.umem[0]))), Len: uint64(len(s.umem)), Size: cfg.FrameSize}
	if err := setsockopt(fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		// ENOBUFS here is RLIMIT_MEMLOCK (without CAP_IPC_LOCK, xdp_umem_account_pages),
		// ENOMEM pages that cannot be pinned: package xdp names the limit.
		return s, fmt.Errorf("xsk: registering the UMEM (%d bytes, locked memory): %w", len(s.umem), err)
	}
	for _, r := range []struct {
		opt  int
		name string
		n    uint32
	}{{unix.XDP_UMEM_FILL_RING, "fill", cfg.FillSize}, {unix.XDP_UMEM_COMPLETION_RING, "completion", cfg.CompletionSize},
		{unix.XDP_RX_RING, "RX", cfg.RxSize}, {unix.XDP_TX_RING, "TX", cfg.TxSize}} {
		if err := unix.SetsockoptInt(fd, unix.SOL_XDP, r.opt, int(r.n)); err != nil {
			return s, fmt.Errorf("xsk: sizing the %s ring (%d entries): %w", r.name, r.n, err)
		}
	}
	var off unix.XDPMmapOffsets
	size := uint32(unsafe.Sizeof(off))
	if _, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_MMAP_OFFSETS,
		uintptr(unsafe.Pointer(&off)), uintptr(unsafe.Pointer(&size)), 0); errno != 0 {
		return s, fmt.Errorf("xsk: XDP_MMAP_OFFSETS: %w", errno)
	}
	if size != uint32(unsafe.Sizeof(off)) {
		// Kernels before 5.4 return the layout without the flags words.
		return s, fmt.Errorf("xsk: XDP_MMAP_OFFSETS returned %d bytes, want %d: the kernel is older than 5.4", size, unsafe.Sizeof(off))
	}
	if s.Fill.ring, err = mapRing(fd, "fill", unix.XDP_UMEM_PGOFF_FILL_RING, off.Fr, cfg.FillSize, 8); err != nil {
		return s, fmt.Errorf("xsk: %w", err)
	}
	if s.Completion.ring, err = mapRing(fd, "completion", unix.XDP_UMEM_PGOFF_COMPLETION_RING, off.Cr, cfg.CompletionSize, 8); err != nil {
		return s, fmt.Errorf("xsk: %w", err)
	}
	descSize := unsafe.Sizeof(unix.XDPDesc{})
	if s.Rx.ring, err = mapRing(fd, "RX", unix.XDP_PGOFF_RX_RING, off.Rx, cfg.RxSize, descSize); err != nil {
		return s, fmt.Errorf("xsk: %w", err)
	}
	if s.Tx.ring, err = mapRing(fd, "TX", unix.XDP_PGOFF_TX_RING, off.Tx, cfg.TxSize, descSize); err != nil {
		return s, fmt.Errorf("xsk: %w", err)
	}
	var flags uint16
	if cfg.MultiBuffer {
		flags |= unix.XDP_USE_SG
	}
	if cfg.NeedWakeup {
		flags |= unix.XDP_USE_NEED_WAKEUP
	}
	if cfg.ZeroCopy {
		flags |= unix.XDP_ZEROCOPY
	}
	if cfg.Copy {
		flags |= unix.XDP_COPY
	}
	if err := unix.Bind(fd, &unix.SockaddrXDP{Flags: flags, Ifindex: uint32(ifindex), QueueID: uint32(queue)}); err != nil {
		return s, fmt.Errorf("xsk: %w to queue %d with flags %s: %w", ErrBind, queue, flagNames(flags), err)
	}
	s.txBudget = DefaultTxBudget
	if cfg.TxBudget > DefaultTxBudget {
		if err := setsockopt(fd, unix.XDP_MAX_TX_SKB_BUDGET, unsafe.Pointer(&cfg.TxBudget), 4); err == nil {
			s.txBudget = cfg.TxBudget
		} else if !errors.Is(err, unix.ENOPROTOOPT) {
			return s, fmt.Errorf("xsk: XDP_MAX_TX_SKB_BUDGET %d (TX ring %d): %w", cfg.TxBudget, cfg.TxSize, err)
		}
	}
	var opts uint32
	osize := uint32(4)
	if _, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_XDP, unix.XDP_OPTIONS,
		uintptr(unsafe.Pointer(&opts)), uintptr(unsafe.Pointer(&osize)), 0); errno == 0 {
		s.zeroCopy = opts&unix.XDP_OPTIONS_ZEROCOPY != 0
	}
	return s, nil
}

func setsockopt(fd, opt int, p unsafe.Pointer, n uintptr) error {
	if _, _, errno := unix.Syscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), n, 0); errno != 0 {
		return errno
	}
	return nil
}

func flagNames(f uint16) string {
	s := ""
	for _, n := range []struct {
		bit  uint16
		name string
	}{{unix.XDP_COPY, "XDP_COPY"}, {unix.XDP_ZEROCOPY, "XDP_ZEROCOPY"}, {unix.XDP_USE_NEED_WAKEUP, "XDP_USE_NEED_WAKEUP"}, {unix.XDP_USE_SG, "XDP_USE_SG"}} {
		if f&n.bit != 0 {
			if s != "" {
				s += "|"
			}
			s += n.name
		}
	}
	if s == "" {
		return "0"
	}
	return s
}

// FD is the socket's descriptor, for poll and the XSKMAP.
func (s *Socket) FD() int { return s.fd }

// UMEM is the whole shared memory; a chunk at address a is UMEM()[a:a+FrameSize()].
func (s *Socket) UMEM() []byte { return s.umem }

// FrameSize is the chunk size.
func (s *Socket) FrameSize() uint32 { return s.frameSize }

// MultiBuffer reports whether the socket is bound with XDP_USE_SG.
func (s *Socket) MultiBuffer() bool { return s.multi }

// ZeroCopy reports whether the kernel bound the socket in zero-copy mode.
func (s *Socket) ZeroCopy() bool { return s.zeroCopy }

// TxBudget is how many TX descriptors one sendto takes in copy mode: Config.TxBudget
// where the kernel took it, else DefaultTxBudget.
func (s *Socket) TxBudget() uint32 { return s.txBudget }

// TxNeedsKick reports whether a sendto is needed for the kernel to transmit what is
// on the TX ring: always without need_wakeup, else when the kernel asks.
func (s *Socket) TxNeedsKick() bool { return !s.needWakeup || s.Tx.NeedWakeup() }

// Kick asks the kernel to transmit (sendto with MSG_DONTWAIT) and returns its errno:
// in copy mode it sends a bounded batch per call and answers EAGAIN when more is
// left, EBUSY when it could not make progress; callers decide what is fatal.
func (s *Socket) Kick() unix.Errno {
	_, _, errno := unix.Syscall6(unix.SYS_SENDTO, uintptr(s.fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return errno
}

// Stats returns the kernel's counters for the socket (drops, invalid descriptors,
// full or empty rings).
func (s *Socket) Stats() (unix.XDPStatistics, error) {
	var st unix.XDPStatistics
	size := uint32(unsafe.Sizeof(st))
	if _, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(s.fd), unix.SOL_XDP, unix.XDP_STATISTICS,
		uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&size)), 0); errno != 0 {
		return st, fmt.Errorf("xsk: XDP_STATISTICS: %w", errno)
	}
	return st, nil
}

// Close unmaps the rings and the UMEM and closes the socket (which unbinds it).
func (s *Socket) Close() error {
	var errs []error
	for _, r := range []*ring{&s.Fill.ring, &s.Completion.ring, &s.Rx.ring, &s.Tx.ring} {
		errs = append(errs, r.unmap())
	}
	if s.fd >= 0 {
		errs = append(errs, unix.Close(s.fd))
		s.fd = -1
	}
	if s.umem != nil {
		errs = append(errs, unix.Munmap(s.umem))
		s.umem = nil
	}
	return errors.Join(errs...)
}
