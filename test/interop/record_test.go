package interop

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRecordExchange records perftest's own out-of-band exchange, perftest against
// perftest, for the oob package's test vectors (cmd/xroce/oob/testdata). Both run
// in the guest on rdma_rxe (their RoCE traffic loops back inside it); the client
// connects to a TCP relay on the host side of the bridge, which passes the bytes on
// to the server, so the exchange crosses the bridge, where dumpcap records it
// (client ↔ relay, port 18515).
//
//	XROCE_RECORD=dir XROCE_RECORD_RUNS='name:perftest args;...' go test -run '^TestRecordExchange$' ./test/interop/
//
// records dir/name.pcap for each run ("name:ib_write_bw -d rxe0 -x 1 -F -n 5 -q 2"),
// the same arguments on both sides, and logs both sides' output.
func TestRecordExchange(t *testing.T) {
	dir, runs := os.Getenv("XROCE_RECORD"), os.Getenv("XROCE_RECORD_RUNS")
	if dir == "" || runs == "" {
		t.Skip("set XROCE_RECORD and XROCE_RECORD_RUNS")
	}
	img, err := Prepare(15 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	lab, err := NewLab(img, 1500)
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Close()
	for _, run := range strings.Split(runs, ";") {
		name, args, ok := strings.Cut(run, ":")
		if !ok {
			t.Fatalf("run %q: want name:arguments", run)
		}
		record(t, lab, filepath.Join(dir, name+".pcap"), strings.TrimSpace(args))
	}
}

// record runs one perftest pair through the relay, capturing the exchange.
func record(t *testing.T, lab *Lab, file, args string) {
	var ln net.Listener
	if err := inNetns(lab.NS, func() (err error) { ln, err = net.Listen("tcp", lab.XIP.String()+":18515"); return }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dump := exec.Command("ip", "netns", "exec", lab.NS, "dumpcap", "-q", "-i", "br0", "-f", "tcp port 18515", "-w", file)
	if err := dump.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var s net.Conn
		if err := inNetns(lab.NS, func() (err error) { s, err = net.Dial("tcp", lab.GuestIP.String()+":18516"); return }); err != nil {
			t.Error(err)
			return
		}
		defer s.Close()
		var relay sync.WaitGroup
		pass := func(dst, src net.Conn) {
			defer relay.Done()
			buf := make([]byte, 1<<16)
			for {
				n, err := src.Read(buf)
				if n > 0 {
					_, _ = dst.Write(buf[:n])
				}
				if err != nil {
					_ = dst.(*net.TCPConn).CloseWrite()
					return
				}
			}
		}
		relay.Add(2)
		go pass(s, c)
		go pass(c, s)
		relay.Wait()
	}()
	server := lab.Guest(args + " -p 18516")
	lab.Guest("i=0; while ! netstat -ltn | grep -q :18516 && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done")(40 * time.Second)
	cout, crc, cerr := lab.Guest(fmt.Sprintf("%s -p 18515 %s", args, lab.XIP))(3 * time.Minute)
	sout, src, serr := server(3 * time.Minute)
	ln.Close()
	wg.Wait()
	time.Sleep(300 * time.Millisecond)
	_ = dump.Process.Signal(syscall.SIGINT)
	_ = dump.Wait()
	t.Logf("%s: %s\n=== server (rc %d %v):\n%s\n=== client (rc %d %v):\n%s", filepath.Base(file), args, src, serr, sout, crc, cerr, cout)
	if crc != 0 || src != 0 || cerr != nil || serr != nil {
		t.Errorf("%s: perftest failed", args)
	}
}

// inNetns runs f on a thread in the named network namespace: sockets it opens stay
// in that namespace.
func inNetns(ns string, f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	self, err := unix.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(self)
	target, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		return err
	}
	defer func() { _ = unix.Setns(self, unix.CLONE_NEWNET) }()
	return f()
}
