package xdp_test

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/xroce/xroce/bpf"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/xdp"
)

func TestOpenErrors(t *testing.T) {
	n := newTestNet(t, 9000, false)
	if _, err := xdp.Open(xdp.Config{Interface: "nosuch0", Netns: nsPath(n.nsA)}); !errors.Is(err, xdp.ErrNoInterface) {
		t.Errorf("missing interface: %v", err)
	}
	if _, err := xdp.OpenUDP(xdp.UDPConfig{Interface: "nosuch0", Netns: nsPath(n.nsA)}); !errors.Is(err, xdp.ErrNoInterface) {
		t.Errorf("missing interface (UDP): %v", err)
	}
	l, err := xdp.Open(xdp.Config{Interface: n.ifA, Mode: bpf.ModeNative, Netns: nsPath(n.nsA), SingleBuffer: true})
	if err != nil {
		t.Fatalf("native XDP at MTU 9000 (frags-aware program): %v", err)
	}
	defer l.Close()
	// A second attach names the program in the way.
	_, err = xdp.Open(xdp.Config{Interface: n.ifA, Mode: bpf.ModeNative, Netns: nsPath(n.nsA)})
	if !errors.Is(err, bpf.ErrBusy) || !strings.Contains(err.Error(), `"xroce_redirect"`) {
		t.Errorf("second attach: %v", err)
	}
	// Single-buffer (as on kernels without XDP_USE_SG), path MTU 4096 is refused at
	// setup with the reason.
	dev, err := transport.Open(l, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pd := dev.AllocPD()
	cq := dev.CreateCQ(16)
	qp, err := pd.CreateQP(transport.QPInitAttr{SendCQ: cq, RecvCQ: cq})
	if err != nil {
		t.Fatal(err)
	}
	err = transport.BringUp(qp, transport.QPS_RESET, transport.QPS_RTS, transport.ConnectParams{
		AH: transport.AddressHandle{DGID: roce.GIDFromAddr(n.ipB), SGIDIndex: 1}, PathMTU: roce.MTU4096, DestQPN: 5})
	if err == nil || !strings.HasPrefix(err.Error(), "bring-up INIT → RTR: ") || !strings.Contains(err.Error(), "multi-buffer") {
		t.Errorf("path MTU 4096: %v", err)
	}
}

// TestPermissionError: an unprivileged process gets an error that names the missing
// capabilities.
func TestPermissionError(t *testing.T) {
	if os.Getenv("XROCE_HELPER_UNPRIV") != "" {
		_, err := xdp.Open(xdp.Config{Interface: "lo"})
		if err == nil || !errors.Is(err, bpf.ErrPermission) {
			t.Fatalf("unprivileged Open: %v", err)
		}
		os.Stdout.WriteString("XROCE-ERR: " + err.Error() + "\n")
		return
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatal("setpriv (util-linux) is required")
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all",
		os.Args[0], "-test.run=^TestPermissionError$", "-test.v")
	cmd.Env = append(os.Environ(), "XROCE_HELPER_UNPRIV=1", "GOCACHE=/tmp", "HOME=/tmp")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "XROCE-ERR: ") || !strings.Contains(string(out), "CAP_BPF") {
		t.Fatalf("unprivileged run: %v\n%s", err, out)
	}
}

// TestMTUFollowsInterface: the link reports the interface's MTU at the time it is
// asked, so a change while xroce runs (ip link set … mtu) reaches the path-MTU check
// and the port's active_mtu, as rdma_rxe follows NETDEV_CHANGEMTU.
func TestMTUFollowsInterface(t *testing.T) {
	n := newTestNet(t, 1500, false)
	l, err := xdp.Open(xdp.Config{Interface: n.ifA, Netns: nsPath(n.nsA)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dev, err := transport.Open(l, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if m, p := l.MTU(), dev.MaxPathMTU(); m != 1500 || p != roce.MTU1024 {
		t.Fatalf("MTU %d, path MTU %v at 1500", m, p)
	}
	sh(t, "ip", "-n", n.nsA, "link", "set", n.ifA, "mtu", "9000")
	if m, p := l.MTU(), dev.MaxPathMTU(); m != 9000 || p != roce.MTU4096 {
		t.Errorf("MTU %d, path MTU %v after the change to 9000", m, p)
	}
	sh(t, "ip", "-n", n.nsA, "link", "set", n.ifA, "mtu", "1500")
	if m := l.MTU(); m != 1500 {
		t.Errorf("MTU %d after the change back to 1500", m)
	}
}
