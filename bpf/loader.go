// Package bpf holds xroce's XDP program (xroce.c, compiled with bpf2go) and its
// loader. The program redirects RoCEv2 frames (UDP destination port 4791, IPv4 or
// IPv6) to the AF_XDP socket of their receive queue and passes everything else to the
// kernel. It is attached through a BPF link (cilium/ebpf link.AttachXDP), so it
// detaches when the process exits, even on kill -9.
package bpf

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Mode is how the program attaches.
type Mode int

// Attach modes: native (the driver runs XDP), generic (the kernel runs it after the
// driver, slower but works everywhere), or native with generic as fallback.
const (
	ModeAuto Mode = iota
	ModeNative
	ModeGeneric
)

func (m Mode) String() string {
	switch m {
	case ModeNative:
		return "native"
	case ModeGeneric:
		return "generic"
	}
	return "auto"
}

// ParseMode parses "native", "generic" or "auto".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "native", "drv":
		return ModeNative, nil
	case "generic", "skb":
		return ModeGeneric, nil
	case "auto", "":
		return ModeAuto, nil
	}
	return 0, fmt.Errorf("bpf: unknown XDP mode %q: want native, generic or auto", s)
}

// MaxQueues is the number of receive queues the XSKMAP can hold.
const MaxQueues = 64

// Errors the loader returns, wrapped with details; test them with errors.Is.
var (
	ErrPermission = errors.New("loading and attaching XDP needs CAP_BPF and CAP_NET_ADMIN (or root); without them use --link udp")
	ErrBusy       = errors.New("another XDP program is attached to the interface")
	ErrMTU        = errors.New("interface MTU too large for this XDP mode")
	ErrQueues     = errors.New("the interface's queues do not allow native XDP")
	ErrMemlock    = errors.New("cannot raise RLIMIT_MEMLOCK for BPF maps: run as root, with CAP_SYS_RESOURCE, or raise it (ulimit -l unlimited)")
)

// Program is the loaded and attached XDP program.
type Program struct {
	objs      xroceObjects
	link      link.Link
	mode      Mode
	ifindex   int
	nativeErr error // why ModeAuto fell back to generic mode
}

// Load loads the program into the kernel (no interface is touched yet). Errors
// (wrapped): ErrPermission, ErrMemlock, or the kernel's error.
func Load() (*Program, error) {
	// Kernels since 5.11 charge BPF memory to the cgroup and need no rlimit; older
	// ones need RLIMIT_MEMLOCK raised. A failure here only matters if loading fails.
	memErr := rlimit.RemoveMemlock()
	p := &Program{}
	if err := loadXroceObjects(&p.objs, nil); err != nil {
		switch {
		case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
			// Only the errno: the loader library's own text ends with a hint about
			// its rlimit helper, which is not the user's fix.
			var errno unix.Errno
			errors.As(err, &errno)
			return nil, fmt.Errorf("bpf: %w: %v", ErrPermission, errno)
		case memErr != nil:
			return nil, fmt.Errorf("bpf: %w: %v (loading: %v)", ErrMemlock, memErr, err)
		}
		return nil, fmt.Errorf("bpf: loading the XDP program: %w", err)
	}
	return p, nil
}

// Attach attaches the loaded program to the interface with the given index, in the
// calling thread's network namespace. ModeAuto tries native, then generic. Errors
// (wrapped): ErrPermission, ErrBusy (naming the attached program), ErrMTU, or the
// kernel's error.
func (p *Program) Attach(ifindex int, mode Mode) error {
	modes := []Mode{mode}
	if mode == ModeAuto {
		modes = []Mode{ModeNative, ModeGeneric}
	}
	var err, nativeErr error
	for _, m := range modes {
		flags := link.XDPDriverMode
		if m == ModeGeneric {
			flags = link.XDPGenericMode
		}
		p.link, err = link.AttachXDP(link.XDPOptions{Program: p.objs.XroceRedirect, Interface: ifindex, Flags: flags})
		if err == nil {
			p.mode, p.ifindex = m, ifindex
			if m != mode && mode == ModeAuto {
				p.nativeErr = nativeErr
			}
			return nil
		}
		err = attachError(ifindex, m, err)
		if m == ModeNative {
			nativeErr = err
		}
		if errors.Is(err, ErrBusy) || errors.Is(err, ErrPermission) {
			break
		}
	}
	return err
}

// ProgramName is the kernel's name for xroce's XDP program.
const ProgramName = "xroce_redirect"

// attachError turns the kernel's answer into an actionable error.
func attachError(ifindex int, m Mode, err error) error {
	name := fmt.Sprintf("ifindex %d", ifindex)
	mtu, rxQueues, kind := 0, 0, ""
	var attached *netlink.LinkXdp
	if l, lerr := netlink.LinkByIndex(ifindex); lerr == nil {
		name, mtu, attached = l.Attrs().Name, l.Attrs().MTU, l.Attrs().Xdp
		rxQueues, kind = l.Attrs().NumRxQueues, l.Type()
	}
	switch {
	case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
		return fmt.Errorf("bpf: %s: %w: %v", name, ErrPermission, err)
	case errors.Is(err, unix.EBUSY) || errors.Is(err, unix.EEXIST) || attached != nil && attached.Attached:
		prog, holder := "unknown", ""
		if id, pname, ok, _ := Attached(name); ok {
			prog = fmt.Sprintf("%q (id %d)", pname, id)
			if h := Holder(id); h != "" {
				holder = ", held by " + h
			}
		}
		if strings.HasPrefix(prog, `"`+ProgramName+`"`) {
			return fmt.Errorf("bpf: %s: %w: another xroce process is using %s (its program %s%s); one interface serves one xroce at a time: stop the other one or use another interface", name, ErrBusy, name, prog, holder)
		}
		return fmt.Errorf("bpf: %s: %w: program %s; detach it first (ip link set dev %s xdp off): %v", name, ErrBusy, prog, name, err)
	case errors.Is(err, unix.ENOSPC) && m == ModeNative && kind == "veth":
		// drivers/net/veth.c veth_xdp_set: "XDP expects number of rx queues not
		// less than peer tx queues" (an extack message the bpf link call drops).
		return fmt.Errorf("bpf: %s: %w: native XDP on a veth needs at least as many receive queues on it as its peer has transmit queues, and it has %d (the peer's count is in the peer's namespace: ip -d link show there): create the pair with equal queue counts (ip link add ... numrxqueues N numtxqueues N type veth peer ... numrxqueues N numtxqueues N), or use --xdp-mode generic: %v",
			name, ErrQueues, rxQueues, err)
	case errors.Is(err, unix.ERANGE) || errors.Is(err, unix.EINVAL) && mtu > 1500:
		return fmt.Errorf("bpf: %s: %w: MTU %d in %v mode (native XDP on veth without multi-buffer support stops at 3506); lower the MTU or use --xdp-mode generic: %v",
			name, ErrMTU, mtu, m, err)
	}
	return fmt.Errorf("bpf: attaching XDP to %s in %v mode: %w", name, m, err)
}

// Mode returns the mode the program attached in.
func (p *Program) Mode() Mode { return p.mode }

// NativeRefused returns why native mode was refused when ModeAuto fell back to
// generic mode, else nil.
func (p *Program) NativeRefused() error { return p.nativeErr }

// Register directs frames of receive queue to the AF_XDP socket fd.
func (p *Program) Register(queue, fd int) error {
	if queue < 0 || queue >= MaxQueues {
		return fmt.Errorf("bpf: queue %d out of range 0..%d", queue, MaxQueues-1)
	}
	return p.objs.Xsks.Put(uint32(queue), uint32(fd))
}

// Close detaches the program and frees it.
func (p *Program) Close() error {
	var err error
	if p.link != nil {
		err = p.link.Close()
	}
	if cerr := p.objs.Close(); err == nil {
		err = cerr
	}
	return err
}

// Attached reports the XDP program attached to an interface (in the calling thread's
// network namespace), as netlink shows it: its id and name, or ok false when none.
func Attached(ifname string) (id uint32, name string, ok bool, err error) {
	l, err := netlink.LinkByName(ifname)
	if err != nil {
		return 0, "", false, err
	}
	x := l.Attrs().Xdp
	if x == nil || !x.Attached {
		return 0, "", false, nil
	}
	name = "?"
	if p, perr := ebpf.NewProgramFromID(ebpf.ProgramID(x.ProgId)); perr == nil {
		if info, ierr := p.Info(); ierr == nil {
			name = info.Name
		}
		p.Close()
	}
	return x.ProgId, name, true, nil
}
