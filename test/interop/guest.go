// Package interop runs xroce against a real rdma_rxe peer: a QEMU guest (TCG) booted
// from Debian 12's own kernel, which ships rdma_rxe.ko, with Debian's rdma-core,
// perftest and iproute2 in a small initramfs. Everything comes from Debian packages
// (apt-get download, dpkg -x) and is cached under ~/.cache/xroce.
package interop

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Packages the guest is built from (Debian 12).
var debPackages = []string{"rdma-core", "ibverbs-providers", "ibverbs-utils", "perftest", "rdmacm-utils", "qperf", "iproute2", "busybox-static",
	"libibverbs1", "librdmacm1", "libibumad3", "libnl-3-200", "libnl-route-3-200", "libmnl0", "libpci3"}

// Modules the guest loads, with their dependencies resolved from .modinfo; rdma_ucm
// (with rdma_cm) is for perftest's -R (connection setup by RDMA CM).
var guestModules = []string{"virtio_pci", "virtio_net", "9pnet_virtio", "9p", "crc32_generic", "rdma_rxe", "ib_uverbs", "rdma_ucm"}

// Binaries the guest runs (rping: rdmacm-utils, for the rping cells).
var guestBinaries = []string{"/usr/bin/ib_write_bw", "/usr/bin/ib_read_bw", "/usr/bin/ib_send_bw", "/usr/bin/ib_atomic_bw",
	"/usr/bin/ib_write_lat", "/usr/bin/ib_read_lat", "/usr/bin/ib_send_lat", "/usr/bin/ibv_rc_pingpong",
	"/usr/bin/ibv_uc_pingpong", "/usr/bin/ibv_ud_pingpong", "/usr/bin/ibv_devinfo", "/usr/bin/ibv_devices", "/usr/bin/rdma", "/usr/bin/rping", "/usr/bin/qperf"}

// libgccS is the host's libgcc_s (Debian 12, as the guest), copied into the guest.
const libgccS = "/lib/x86_64-linux-gnu/libgcc_s.so.1"

// Image is a bootable guest: kernel and initramfs.
type Image struct {
	Kernel, Initrd string
	Version        string // kernel release
	Prepared       time.Duration
	Downloaded     bool
}

// CacheDir is where downloads and the built image are kept between runs.
func CacheDir() string {
	if d := os.Getenv("XROCE_CACHE"); d != "" {
		return d
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "xroce")
}

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// Prepare downloads the packages (once, bounded by downloadTimeout) and builds the
// initramfs (once per cache). It returns the image.
func Prepare(downloadTimeout time.Duration) (*Image, error) {
	start := time.Now()
	dir := CacheDir()
	debs := filepath.Join(dir, "debs")
	img := &Image{Initrd: filepath.Join(dir, "initrd.img")}
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return nil, err
	}
	meta, err := exec.Command("apt-cache", "depends", "linux-image-amd64").Output()
	if err != nil {
		return nil, fmt.Errorf("apt-cache depends linux-image-amd64 (run apt-get update first): %w", err)
	}
	kpkg := ""
	for _, l := range strings.Split(string(meta), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == "Depends:" && strings.HasPrefix(f[1], "linux-image-6") {
			kpkg = f[1]
			break
		}
	}
	if kpkg == "" {
		return nil, fmt.Errorf("cannot find the kernel package behind linux-image-amd64")
	}
	img.Version = strings.TrimPrefix(kpkg, "linux-image-")
	pkgs := append([]string{kpkg}, debPackages...)
	var missing []string
	for _, p := range pkgs {
		if m, _ := filepath.Glob(filepath.Join(debs, p+"_*.deb")); len(m) == 0 {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		img.Downloaded = true
		cmd := exec.Command("timeout", fmt.Sprint(int(downloadTimeout.Seconds())), "apt-get", "download")
		cmd.Args = append(cmd.Args, missing...)
		cmd.Dir = debs
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("downloading %v (limit %v): %v\n%s", missing, downloadTimeout, err, out)
		}
	}
	root := filepath.Join(dir, "root-"+img.Version)
	img.Kernel = filepath.Join(root, "boot", "vmlinuz-"+img.Version)
	stamp := filepath.Join(dir, "initrd.stamp")
	want := img.Version + " " + strings.Join(pkgs, " ") + " v7"
	if b, err := os.ReadFile(stamp); err == nil && string(b) == want {
		if _, err := os.Stat(img.Initrd); err == nil {
			img.Prepared = time.Since(start)
			return img, nil
		}
	}
	os.RemoveAll(root)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	all, _ := filepath.Glob(filepath.Join(debs, "*.deb"))
	for _, d := range all {
		if err := run("dpkg", "-x", d, root); err != nil {
			return nil, err
		}
	}
	if err := buildInitrd(root, img); err != nil {
		return nil, err
	}
	if err := os.WriteFile(stamp, []byte(want), 0o644); err != nil {
		return nil, err
	}
	img.Prepared = time.Since(start)
	return img, nil
}

// modDepends reads a module's dependencies from its .modinfo section.
func modDepends(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s := f.Section(".modinfo")
	if s == nil {
		return nil, nil
	}
	data, err := s.Data()
	if err != nil {
		return nil, err
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok && len(v) > 0 {
			return strings.Split(string(v), ","), nil
		}
	}
	return nil, nil
}

// moduleOrder returns module files in load order (dependencies first).
func moduleOrder(modDir string, want []string) ([]string, error) {
	index := map[string]string{}
	err := filepath.WalkDir(modDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".ko") {
			index[strings.ReplaceAll(strings.TrimSuffix(d.Name(), ".ko"), "-", "_")] = p
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var order []string
	seen := map[string]bool{}
	var visit func(m string) error
	visit = func(m string) error {
		m = strings.ReplaceAll(m, "-", "_")
		if seen[m] {
			return nil
		}
		seen[m] = true
		p, ok := index[m]
		if !ok {
			return fmt.Errorf("module %s not found", m)
		}
		deps, err := modDepends(p)
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := visit(d); err != nil {
				return err
			}
		}
		order = append(order, p)
		return nil
	}
	for _, m := range want {
		if err := visit(m); err != nil {
			return nil, err
		}
	}
	return order, nil
}

// libsOf lists the shared libraries a binary needs, resolved by the host's ldd with
// the extracted packages' library directories first.
func libsOf(root, bin string) ([]string, error) {
	cmd := exec.Command("ldd", bin)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+filepath.Join(root, "usr/lib/x86_64-linux-gnu")+":"+filepath.Join(root, "lib/x86_64-linux-gnu"))
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("ldd %s: %v", bin, err)
	}
	var libs []string
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			libs = append(libs, f[2])
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			libs = append(libs, f[0])
		case len(f) >= 3 && f[2] == "not":
			return nil, fmt.Errorf("ldd %s: %s not found", bin, f[0])
		}
	}
	return libs, nil
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, st.Mode().Perm())
}

// buildInitrd assembles the guest's initramfs with busybox's cpio.
func buildInitrd(root string, img *Image) error {
	ird := filepath.Join(filepath.Dir(img.Initrd), "initrd-root")
	os.RemoveAll(ird)
	for _, d := range []string{"bin", "sbin", "usr/bin", "proc", "sys", "dev", "tmp", "mod", "etc/libibverbs.d", "share", "lib64", "run"} {
		if err := os.MkdirAll(filepath.Join(ird, d), 0o755); err != nil {
			return err
		}
	}
	if err := copyFile(filepath.Join(root, "bin/busybox"), filepath.Join(ird, "bin/busybox")); err != nil {
		return err
	}
	mods, err := moduleOrder(filepath.Join(root, "lib/modules", img.Version), guestModules)
	if err != nil {
		return err
	}
	var order []string
	for _, m := range mods {
		if err := copyFile(m, filepath.Join(ird, "mod", filepath.Base(m))); err != nil {
			return err
		}
		order = append(order, filepath.Base(m))
	}
	if err := os.WriteFile(filepath.Join(ird, "mod/order"), []byte(strings.Join(order, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	// Userspace: the binaries, the rxe provider, and every library they load.
	provider, _ := filepath.Glob(filepath.Join(root, "usr/lib/x86_64-linux-gnu/libibverbs/librxe-*.so"))
	if len(provider) == 0 {
		return errors.New("the rxe provider (librxe) is not in ibverbs-providers")
	}
	files := map[string]string{} // destination in the initramfs → source
	for _, b := range guestBinaries {
		files[b] = filepath.Join(root, b)
	}
	for _, p := range provider {
		files[strings.TrimPrefix(p, root)] = p
	}
	files["/etc/libibverbs.d/rxe.driver"] = filepath.Join(root, "etc/libibverbs.d/rxe.driver")
	for dst, src := range files {
		if !strings.HasSuffix(dst, ".driver") {
			libs, err := libsOf(root, src)
			if err != nil {
				return err
			}
			for _, l := range libs {
				rel := strings.TrimPrefix(l, root)
				if _, ok := files[rel]; !ok {
					files[rel] = l
				}
			}
		}
	}
	// glibc dlopens libgcc_s for pthread_exit and pthread_cancel (rping's threads
	// end so), which ldd does not list: without it rping aborts at its end.
	files[libgccS] = libgccS
	var names []string
	for dst := range files {
		names = append(names, dst)
	}
	sort.Strings(names)
	for _, dst := range names {
		src, err := filepath.EvalSymlinks(files[dst])
		if err != nil {
			return err
		}
		if err := copyFile(src, filepath.Join(ird, dst)); err != nil {
			return err
		}
	}
	// The dynamic loader where binaries look for it.
	if err := copyFile("/lib64/ld-linux-x86-64.so.2", filepath.Join(ird, "lib64/ld-linux-x86-64.so.2")); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(ird, "init"), []byte(initScript), 0o755); err != nil {
		return err
	}
	cmd := exec.Command("sh", "-c", "find . | "+filepath.Join(ird, "bin/busybox")+" cpio -o -H newc 2>/dev/null | gzip -1 > "+img.Initrd)
	cmd.Dir = ird
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the initramfs: %v\n%s", err, out)
	}
	return nil
}

// initScript is the guest's /init: load the modules, configure eth0 from the kernel
// command line (xroce.ip=, xroce.mtu=), create rxe0 on it, then run the command
// files the host drops into the 9p share, writing their output and exit status.
const initScript = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/usr/bin:/bin:/sbin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /mod/order); do insmod /mod/$m || echo "insmod $m failed"; done
for a in $(cat /proc/cmdline); do
	case $a in xroce.ip=*) IP=${a#xroce.ip=};; xroce.mtu=*) MTU=${a#xroce.mtu=};; esac
done
ip link set lo up
ip link set eth0 mtu ${MTU:-1500}
ip addr add $IP dev eth0
ip link set eth0 up
rdma link add rxe0 type rxe netdev eth0 || echo "rdma link add failed"
mount -t 9p -o trans=virtio,version=9p2000.L,cache=none share /share || echo "9p mount failed"
echo ready > /share/ready
while true; do
	for f in /share/cmd.*; do
		[ -e "$f" ] || continue
		id=${f#/share/cmd.}
		mv "$f" /tmp/run.$id
		( sh /tmp/run.$id > /share/out.$id.tmp 2>&1; echo $? > /share/rc.$id.tmp; mv /share/out.$id.tmp /share/out.$id; mv /share/rc.$id.tmp /share/rc.$id ) &
	done
	sleep 0.1
done
`
