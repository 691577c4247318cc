package xdp

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// Bind is how the link's AF_XDP sockets bind to the interface's queues
// (Documentation/networking/af_xdp.rst, "XDP_COPY and XDP_ZEROCOPY bind flags").
type Bind int

const (
	// BindAuto binds without XDP_COPY or XDP_ZEROCOPY: the kernel takes zero-copy
	// where the driver has it (mlx5, ice, i40e, ixgbe, …), else copy mode.
	BindAuto Bind = iota
	// BindZeroCopy binds with XDP_ZEROCOPY, and Open fails with ErrZeroCopy where
	// the driver has no zero-copy (veth) or XDP runs in generic mode.
	BindZeroCopy
	// BindCopy binds with XDP_COPY: the kernel copies every frame between the
	// driver's buffers and the UMEM, on every driver.
	BindCopy
)

// ErrZeroCopy is returned by Open when BindZeroCopy was asked for and the driver
// (or the generic XDP mode) refused it.
var ErrZeroCopy = errors.New("AF_XDP zero-copy refused")

// ParseBind parses auto (or ""), zero-copy or copy.
func ParseBind(s string) (Bind, error) {
	switch s {
	case "auto", "":
		return BindAuto, nil
	case "zero-copy":
		return BindZeroCopy, nil
	case "copy":
		return BindCopy, nil
	}
	return 0, fmt.Errorf("AF_XDP bind %q: want auto, zero-copy or copy", s)
}

// String is the name ParseBind takes.
func (b Bind) String() string {
	switch b {
	case BindZeroCopy:
		return "zero-copy"
	case BindCopy:
		return "copy"
	}
	return "auto"
}

// zeroCopyRefused explains a bind that failed when zero-copy was demanded: the
// kernel answers EOPNOTSUPP (a driver without XSK pool support, such as veth) or
// EINVAL (XDP_ZEROCOPY with a generic-mode program).
func zeroCopyRefused(err error, ifname, driver string) error {
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EINVAL) {
		return err
	}
	return fmt.Errorf("xdp: %w on %s (driver %s): %v\n(the driver has no AF_XDP zero-copy, or XDP is attached in generic mode; "+
		"drivers such as mlx5, ice, i40e and ixgbe have it in native mode, veth does not, see docs/hardware.md; "+
		"use --xdp-bind auto, which falls back to copy mode)", ErrZeroCopy, ifname, driver, err)
}

// driverName is the interface's driver as ethtool -i reports it, or "unknown".
func driverName(fd int, ifname string) string {
	if fd < 0 {
		return "unknown"
	}
	info, err := unix.IoctlGetEthtoolDrvinfo(fd, ifname)
	if err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(info.Driver[:])
}
