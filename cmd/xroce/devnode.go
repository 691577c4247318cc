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
// node when no other daemon holds one, and devDir with it when that is then empty
// (udev makes it again for an RDMA device the kernel registers). A node left by a daemon that was killed is taken over. When the node
// cannot be made (no CAP_MKNOD, a read-only /dev), or devDir/name is something
// else, the error says what UCX will then not see and how to fix it; the daemon
// serves on regardless.
func makeDevNode(name string) (remove func(), err error) {
	path := filepath.Join(devDir, name)
	if err := os.Mkdir(devDir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return func() {}, devNodeError(name, err)
	}
	for try := 0; try < 3; try++ {
		f, err := openDevNode(path)
		if err != nil {
			os.Remove(devDir) // only if empty
			return func() {}, devNodeError(name, err)
		}
		if f == nil {
			continue // removed by another daemon as this one locked it
		}
		return func() {
			if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
				os.Remove(path)
				os.Remove(devDir) // only if empty: udev makes it again for a device
			}
			f.Close()
		}, nil
	}
	return func() {}, devNodeError(name, errors.New("removed again and again by other daemons"))
}

// openDevNode creates the node at path if it is missing, opens it and takes a
// shared flock. It returns nil (and no error) when the node was removed between
// the open and the lock, and an error when path is something other than the node.
func openDevNode(path string) (*os.File, error) {
	err := unix.Mknod(path, unix.S_IFCHR|0o666, int(nullDev))
	if err == nil {
		err = os.Chmod(path, 0o666) // mknod's mode went through the umask
	} else if errors.Is(err, unix.EEXIST) {
		err = nil
	}
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != nullDev {
		return nil, fmt.Errorf("it exists and is not a node xroce made (a character device %d, %d)", unix.Major(nullDev), unix.Minor(nullDev))
	}
	f, err := os.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
		f.Close()
		return nil, err
	}
	var held unix.Stat_t
	if unix.Fstat(int(f.Fd()), &held) != nil || unix.Lstat(path, &st) != nil || st.Ino != held.Ino {
		f.Close()
		return nil, nil
	}
	return f, nil
}

// devNodeError explains a node that could not be made.
func devNodeError(name string, err error) error {
	return fmt.Errorf("%s/%s: %w: UCX (ucx_info, ucx_perftest, Open MPI's pml ucx) will not list %s; "+
		"run the daemon as root, or create it: mkdir -p %s && mknod -m 666 %s/%s c 1 3", devDir, name, err, name, devDir, devDir, name)
}
