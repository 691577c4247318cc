package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// devDir is where an RDMA device's character devices live (rdma-core's udev rules
// create /dev/infiniband/uverbsN for each device the kernel registers).
const devDir = "/dev/infiniband"

// nullDev is the device number the node carries: /dev/null's (1, 3).
var nullDev = unix.Mkdev(1, 3)

// makeDevNode makes sure devDir/name exists while the daemon serves: a character
// device with /dev/null's numbers and mode 0666. The library gives the device this
// dev_name (ibv_device.dev_name; rdma_rxe's is uverbsN), and applications that list
// only the devices whose node they can open read-write find it: UCX's
// uct_ib_device_is_accessible stats /dev/infiniband/<dev_name> and checks
// access(R_OK|W_OK), and ignored xroce without a word when it was missing (found by
// a trial with ucx_info). The node reaches no device: opening it opens /dev/null,
// and the library never opens it.
//
// Daemons of one name with different run directories share the node. Each holds a
// shared flock on it; the returned remove drops the daemon's lock and removes the
// node when no other daemon holds one and the path is still the node it locked,
// and devDir with it when that is then empty (udev makes it again for an RDMA
// device the kernel registers). A node left by a daemon that was killed is taken
// over, and made 0666 again if another hand changed its mode. When the node cannot
// be made (no CAP_MKNOD, a read-only /dev), or devDir/name is something else (left
// as it is), the error says so and what to do; the daemon serves on regardless.
func makeDevNode(name string) (remove func(), err error) {
	path := filepath.Join(devDir, name)
	for try := 0; try < 3; try++ {
		// devDir and the node are made again on every try: the last daemon of
		// another name may have removed both since (its remove below).
		if err := os.Mkdir(devDir, 0o755); err == nil {
			os.Chmod(devDir, 0o755) // Mkdir's mode went through the umask
		} else if !errors.Is(err, fs.ErrExist) {
			return func() {}, devNodeError(name, err)
		}
		f, err := openDevNode(path)
		if errors.Is(err, unix.ENOENT) {
			continue // devDir went between the Mkdir and the mknod
		}
		if err != nil {
			os.Remove(devDir) // only if empty
			return func() {}, err
		}
		if f == nil {
			continue // removed by another daemon as this one locked it
		}
		return func() {
			if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil && sameFile(f, path) {
				os.Remove(path)
				os.Remove(devDir) // only if empty: udev makes it again for a device
			}
			f.Close()
		}, nil
	}
	return func() {}, devNodeError(name, errors.New("removed again and again by other daemons"))
}

// openDevNode creates the node at path if it is missing (or gives a node of ours
// that another hand left at another mode 0666 again), opens it and takes a shared
// flock. It returns nil (and no error) when the node was removed between the open
// and the lock, an error wrapping ENOENT when the directory went, and another
// error when path is something other than such a node.
func openDevNode(path string) (*os.File, error) {
	name := filepath.Base(path)
	var st unix.Stat_t
	err := unix.Lstat(path, &st)
	if errors.Is(err, unix.ENOENT) {
		err = unix.Mknod(path, unix.S_IFCHR|0o666, int(nullDev))
		if errors.Is(err, unix.ENOENT) {
			return nil, err
		}
		if err == nil || errors.Is(err, unix.EEXIST) { // EEXIST: made by another daemon meanwhile
			err = unix.Lstat(path, &st)
		}
	}
	if err != nil {
		return nil, devNodeError(name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != nullDev {
		return nil, fmt.Errorf("%s is %s, not the node xroce makes (a character device %d, %d), and is left as it is: "+
			"UCX lists %s only when that path is a character device it can open read-write; remove it and restart the daemon",
			path, describeNode(&st), unix.Major(nullDev), unix.Minor(nullDev), name)
	}
	if st.Mode&0o777 != 0o666 {
		// mknod's mode went through the umask, or another hand changed it
		if err := os.Chmod(path, 0o666); err != nil {
			return nil, devNodeError(name, err)
		}
	}
	f, err := os.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, devNodeError(name, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
		f.Close()
		return nil, devNodeError(name, err)
	}
	if !sameFile(f, path) {
		f.Close()
		return nil, nil
	}
	return f, nil
}

// sameFile reports whether path is still the file f has open.
func sameFile(f *os.File, path string) bool {
	var held, st unix.Stat_t
	return unix.Fstat(int(f.Fd()), &held) == nil && unix.Lstat(path, &st) == nil && st.Dev == held.Dev && st.Ino == held.Ino
}

// describeNode names what st is: a regular file, a directory, ...
func describeNode(st *unix.Stat_t) string {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "a regular file"
	case unix.S_IFDIR:
		return "a directory"
	case unix.S_IFLNK:
		return "a symbolic link"
	case unix.S_IFCHR:
		return fmt.Sprintf("a character device %d, %d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
	case unix.S_IFBLK:
		return fmt.Sprintf("a block device %d, %d", unix.Major(st.Rdev), unix.Minor(st.Rdev))
	}
	return fmt.Sprintf("a file of type %#o", st.Mode&unix.S_IFMT)
}

// devNodeError explains a node that could not be made: what UCX will then not see,
// and how to make it.
func devNodeError(name string, err error) error {
	fix := "create it"
	if errors.Is(err, unix.EPERM) {
		fix = "run the daemon as root (it needs CAP_MKNOD), or create it"
	}
	return fmt.Errorf("%s/%s: %w: UCX (ucx_info, ucx_perftest, Open MPI's pml ucx) will not list %s; %s: "+
		"mkdir -p %s && mknod -m 666 %s/%s c 1 3", devDir, name, err, name, fix, devDir, devDir, name)
}
