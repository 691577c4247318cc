package xdp_test

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netns"
	"github.com/xroce/xroce/bpf"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/xdp"
)

// inNS runs f on a locked thread inside the named namespace; sockets f creates stay
// there.
func inNS(t testing.TB, ns string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		h, err := netns.GetFromName(ns)
		if err != nil {
			t.Error(err)
			return
		}
		defer h.Close()
		if err := netns.Set(h); err != nil {
			t.Error(err)
			return
		}
		f()
	}()
	<-done
}

// TestOtherTrafficPasses: with the XDP program attached on both ends, ping, TCP and
// UDP to another port still reach the kernel, and RoCE frames do not (a kernel
// socket bound to UDP 4791 sees none of the engine's traffic).
func TestOtherTrafficPasses(t *testing.T) {
	n := newTestNet(t, 1500, false)
	la, lb := openXDP(t, n, bpf.ModeNative)
	for _, ns := range []string{n.nsA, n.nsB} {
		inNS(t, ns, func() {
			ifn := n.ifA
			if ns == n.nsB {
				ifn = n.ifB
			}
			id, name, ok, err := bpf.Attached(ifn)
			if err != nil || !ok || name != "xroce_redirect" {
				t.Errorf("%s: attached program %d %q %v %v", ifn, id, name, ok, err)
			}
		})
	}
	out, err := exec.Command("ip", "netns", "exec", n.nsA, "ping", "-c", "3", "-i", "0.2", "-W", "2", n.ipB.String()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "3 received") {
		t.Fatalf("ping through the XDP program: %v\n%s", err, out)
	}
	var tcpL net.Listener
	var udpOther, udpRoCE net.PacketConn
	inNS(t, n.nsB, func() {
		var err error
		if tcpL, err = net.Listen("tcp4", n.ipB.String()+":18515"); err != nil {
			t.Error(err)
		}
		if udpOther, err = net.ListenPacket("udp4", n.ipB.String()+":5000"); err != nil {
			t.Error(err)
		}
		// Port 4791 is free: the XDP link does not bind it.
		if udpRoCE, err = net.ListenPacket("udp4", n.ipB.String()+":4791"); err != nil {
			t.Error(err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}
	defer tcpL.Close()
	defer udpOther.Close()
	defer udpRoCE.Close()
	go func() {
		c, err := tcpL.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		line, _ := bufio.NewReader(c).ReadString('\n')
		c.Write([]byte("echo " + line))
	}()
	inNS(t, n.nsA, func() {
		c, err := net.DialTimeout("tcp4", n.ipB.String()+":18515", 3*time.Second)
		if err != nil {
			t.Errorf("TCP through the XDP program: %v", err)
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(3 * time.Second))
		c.Write([]byte("hello\n"))
		reply, err := bufio.NewReader(c).ReadString('\n')
		if err != nil || reply != "echo hello\n" {
			t.Errorf("TCP reply %q, %v", reply, err)
		}
		u, err := net.Dial("udp4", n.ipB.String()+":5000")
		if err != nil {
			t.Error(err)
			return
		}
		u.Write([]byte("other udp"))
		u.Close()
	})
	udpOther.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 64)
	if k, _, err := udpOther.ReadFrom(buf); err != nil || string(buf[:k]) != "other udp" {
		t.Errorf("UDP to port 5000: %q %v", buf[:k], err)
	}
	// RoCE traffic goes to the AF_XDP sockets, not to the kernel's UDP 4791 socket.
	a, b := newEndpoint(t, la, 1<<20), newEndpoint(t, lb, 1<<20)
	connect(t, a, b, n.ipB, roce.MTU1024)
	connect(t, b, a, n.ipA, roce.MTU1024)
	stop := run(t, a, b)
	transfer(t, a, b, "WRITE", 100000, 1)
	stop()
	udpRoCE.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if k, from, err := udpRoCE.ReadFrom(buf); err == nil {
		t.Errorf("the kernel's UDP 4791 socket received %d bytes from %v: RoCE frames were not redirected", k, from)
	}
}

// TestKill9Detaches: a process killed with SIGKILL while its XDP program is attached
// leaves nothing attached (the BPF link dies with the process).
func TestKill9Detaches(t *testing.T) {
	if os.Getenv("XROCE_HELPER_IF") != "" {
		t.Skip("helper process")
	}
	n := newTestNet(t, 1500, false)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAttach$", "-test.v")
	cmd.Env = append(os.Environ(), "XROCE_HELPER_IF="+n.ifA, "XROCE_HELPER_NETNS="+nsPath(n.nsA))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	attached := false
	deadline := time.AfterFunc(20*time.Second, func() { cmd.Process.Kill() })
	for sc.Scan() {
		if strings.Contains(sc.Text(), "XROCE-ATTACHED") {
			attached = true
			break
		}
	}
	deadline.Stop()
	if !attached {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal("helper process did not attach")
	}
	check := func() (ok bool) {
		inNS(t, n.nsA, func() {
			_, _, ok, err = bpf.Attached(n.ifA)
			if err != nil {
				t.Error(err)
			}
		})
		return ok
	}
	if !check() {
		t.Fatal("no XDP program attached while the helper runs")
	}
	if err := cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	for i := 0; i < 100 && check(); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if check() {
		t.Fatal("an XDP program is still attached after kill -9")
	}
}

// TestHelperAttach is the process TestKill9Detaches kills.
func TestHelperAttach(t *testing.T) {
	ifn := os.Getenv("XROCE_HELPER_IF")
	if ifn == "" {
		t.Skip("run by TestKill9Detaches")
	}
	l, err := xdp.Open(xdp.Config{Interface: ifn, Mode: bpf.ModeNative, Netns: os.Getenv("XROCE_HELPER_NETNS")})
	if err != nil {
		t.Fatal(err)
	}
	_ = l
	os.Stdout.WriteString("XROCE-ATTACHED\n")
	time.Sleep(time.Minute)
}

// TestQueues: on an interface with two receive queues the link opens a socket for
// each, and RoCE frames arriving on either queue reach it.
func TestQueues(t *testing.T) {
	n := newTestNetQueues(t, 1500, false, 2)
	la, err := xdp.Open(xdp.Config{Interface: n.ifA, Mode: bpf.ModeNative, Netns: nsPath(n.nsA)})
	if err != nil {
		t.Fatal(err)
	}
	defer la.Close()
	if q := len(la.QueueFrames()); q != 2 {
		t.Fatalf("%d sockets, want one per queue (2)", q)
	}
	// The kernel in B spreads datagrams from different source ports over both queues.
	inNS(t, n.nsB, func() {
		for i := 0; i < 64; i++ {
			c, err := net.DialUDP("udp4", &net.UDPAddr{Port: 20000 + i}, &net.UDPAddr{IP: n.ipA.AsSlice(), Port: 4791})
			if err != nil {
				t.Error(err)
				return
			}
			c.Write(make([]byte, 32))
			c.Close()
		}
	})
	frames := make([][]byte, 64)
	got := 0
	deadline := time.Now().Add(5 * time.Second)
	for got < 64 && time.Now().Before(deadline) {
		k, err := la.Recv(frames)
		if err != nil {
			t.Fatal(err)
		}
		got += k
		if k == 0 {
			la.Wait(time.Now().Add(10 * time.Millisecond))
		}
	}
	per := la.QueueFrames()
	if got != 64 || per[0] == 0 || per[1] == 0 {
		t.Fatalf("received %d of 64 datagrams; per queue %v: want frames on both", got, per)
	}
}
