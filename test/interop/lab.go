package interop

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/xroce/xroce/test/testnet"
)

// Lab is one network namespace holding a bridge with the guest's tap and one end of
// a veth pair; xroce runs on the other end (XIf), so it reaches the rdma_rxe guest
// over AF_XDP (or the UDP link) exactly as a user's host would. No traffic leaves the
// namespace.
type Lab struct {
	*VM
	NS      string
	XIf     string     // xroce's interface
	XIP     netip.Addr // xroce's address
	GuestIP netip.Addr
	MTU     int
}

// VM is one QEMU guest on a tap of a lab's bridge, with its 9p command channel.
type VM struct {
	Share  string // the 9p share with the guest
	Booted time.Duration

	qemu    *exec.Cmd
	exited  chan struct{} // closed when QEMU has exited; waitErr is then its status
	waitErr error
	console *testnet.Output
	seq     int
}

func sh(args ...string) error { return run(args[0], args[1:]...) }

// randomID is a suffix for namespace and interface names: tests run in parallel.
func randomID() string {
	var r [3]byte
	_, _ = rand.Read(r[:])
	return hex.EncodeToString(r[:])
}

// NewLab creates the namespace and network and boots the guest with eth0 at the given
// MTU. Close removes everything.
func NewLab(img *Image, mtu int) (*Lab, error) {
	id := randomID()
	l := &Lab{NS: "xri" + id, XIf: "xx" + id, XIP: netip.MustParseAddr("10.81.0.1"),
		GuestIP: netip.MustParseAddr("10.81.0.11"), MTU: mtu}
	m := strconv.Itoa(mtu)
	ns := func(args ...string) error { return sh(append([]string{"ip", "-n", l.NS}, args...)...) }
	steps := []func() error{
		func() error { return sh("ip", "netns", "add", l.NS) },
		// Only xroce's veth answers ARP for xroce's address: by default Linux
		// answers on every interface, so br0 (which carries the guest's tap)
		// answered too, and when its reply reached the guest first, the guest sent
		// its RoCE frames to br0's MAC, into the namespace's own UDP stack (port
		// unreachable) instead of through the veth to xroce, until its neighbour
		// entry changed.
		func() error {
			return sh("ip", "netns", "exec", l.NS, "sysctl", "-q", "-w", "net.ipv4.conf.all.arp_ignore=1")
		},
		func() error { return ns("link", "set", "lo", "up") },
		func() error { return ns("link", "add", "br0", "mtu", m, "type", "bridge") },
		func() error { return ns("tuntap", "add", "dev", "tap0", "mode", "tap") },
		func() error { return ns("link", "set", "tap0", "mtu", m, "master", "br0", "up") },
		func() error {
			return ns("link", "add", l.XIf, "mtu", m, "type", "veth", "peer", "name", "xb"+id, "mtu", m)
		},
		func() error { return ns("link", "set", "xb"+id, "master", "br0", "up") },
		func() error { return ns("addr", "add", l.XIP.String()+"/24", "dev", l.XIf) },
		func() error { return ns("link", "set", l.XIf, "up") },
		func() error { return ns("link", "set", "br0", "up") },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			l.Close()
			return nil, err
		}
	}
	vm, err := bootVM(img, l.NS, "tap0", "52:54:00:81:00:0b", l.GuestIP, mtu)
	if err != nil {
		l.Close()
		return nil, err
	}
	l.VM = vm
	return l, nil
}

// bootVM boots a guest on the tap (already in a bridge of the namespace) with eth0
// at the MAC, address (/24) and MTU given, and waits until it is ready for
// commands.
func bootVM(img *Image, ns, tap, mac string, ip netip.Addr, mtu int) (*VM, error) {
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		return nil, fmt.Errorf("the rdma_rxe guest needs QEMU: %w (apt-get install qemu-system-x86, as .ci/run does)", err)
	}
	v := &VM{console: &testnet.Output{}, exited: make(chan struct{})}
	share, err := os.MkdirTemp("", "xroce-interop-")
	if err != nil {
		return nil, err
	}
	v.Share = share
	start := time.Now()
	v.qemu = exec.Command("ip", "netns", "exec", ns, "qemu-system-x86_64", "-accel", "tcg", "-cpu", "max", "-m", "1G",
		"-smp", "1", "-nographic", "-no-reboot", "-kernel", img.Kernel, "-initrd", img.Initrd,
		"-append", fmt.Sprintf("console=ttyS0 panic=-1 quiet xroce.ip=%s/24 xroce.mtu=%d", ip, mtu),
		"-netdev", "tap,id=n0,ifname="+tap+",script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n0,mac="+mac,
		"-fsdev", "local,id=fs0,path="+share+",security_model=none",
		"-device", "virtio-9p-pci,fsdev=fs0,mount_tag=share")
	v.qemu.Stdout, v.qemu.Stderr = v.console, v.console
	// A test process that dies without Close (kill -9, a -timeout panic) takes
	// QEMU with it: ip netns exec execs it, so the signal reaches QEMU itself.
	v.qemu.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := v.qemu.Start(); err != nil {
		v.Close()
		return nil, fmt.Errorf("starting QEMU: %w", err)
	}
	go func() { v.waitErr = v.qemu.Wait(); close(v.exited) }()
	for {
		if _, err := os.Stat(filepath.Join(share, "ready")); err == nil {
			break
		}
		select {
		case <-v.exited:
			out := v.console.String()
			v.Close()
			return nil, fmt.Errorf("QEMU exited (%v) before the guest was ready; console:\n%s", v.waitErr, tail(out, 3000))
		default:
		}
		if time.Since(start) > 3*time.Minute {
			out := v.console.String()
			v.Close()
			return nil, fmt.Errorf("the guest was not ready after 3 minutes; console:\n%s", tail(out, 3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	v.Booted = time.Since(start)
	return v, nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Console returns what the guest printed.
func (v *VM) Console() string { return v.console.String() }

// Guest starts a shell script in the guest and returns a function that waits for
// it (up to limit) and returns its output and exit status.
func (v *VM) Guest(script string) func(limit time.Duration) (string, int, error) {
	v.seq++
	id := strconv.Itoa(v.seq)
	tmp := filepath.Join(v.Share, "tmp."+id)
	_ = os.WriteFile(tmp, []byte(script+"\n"), 0o644)
	_ = os.Rename(tmp, filepath.Join(v.Share, "cmd."+id))
	return func(limit time.Duration) (string, int, error) {
		deadline := time.Now().Add(limit)
		rcFile := filepath.Join(v.Share, "rc."+id)
		for {
			if b, err := os.ReadFile(rcFile); err == nil {
				out, _ := os.ReadFile(filepath.Join(v.Share, "out."+id))
				rc, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				return string(out), rc, nil
			}
			if time.Now().After(deadline) {
				out, _ := os.ReadFile(filepath.Join(v.Share, "out."+id+".tmp"))
				return string(out), -1, fmt.Errorf("guest command did not finish within %v", limit)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// Close stops the guest and removes its share.
func (v *VM) Close() {
	if v.qemu != nil && v.qemu.Process != nil {
		_ = v.qemu.Process.Kill()
		<-v.exited
	}
	if v.Share != "" {
		os.RemoveAll(v.Share)
	}
}

// Close stops the guest and removes the namespace and the share.
func (l *Lab) Close() {
	if l.VM != nil {
		l.VM.Close()
	}
	_ = exec.Command("ip", "netns", "del", l.NS).Run()
}
