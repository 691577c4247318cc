package xdp

import (
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// KernelHasMultiBuffer reports whether the running kernel is recent enough for
// multi-buffer AF_XDP (XDP_USE_SG, Linux 6.6), and its release, for tools that
// describe a port without opening a link (xroce devinfo). The link itself asks the
// kernel at bind time (Link.MultiBuffer).
func KernelHasMultiBuffer() (bool, string) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false, "unknown"
	}
	rel := unix.ByteSliceToString(u.Release[:])
	return releaseAtLeast(rel, 6, 6), rel
}

// releaseAtLeast compares a kernel release such as "6.18.0-1-amd64" with major.minor.
func releaseAtLeast(rel string, major, minor int) bool {
	f := strings.FieldsFunc(rel, func(r rune) bool { return r < '0' || r > '9' })
	if len(f) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(f[0])
	mi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}
