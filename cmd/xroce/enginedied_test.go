package main

import (
	"bytes"
	"errors"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/xroce/xroce/transport"
)

// brokenLink is a transport.Link whose Recv fails once broken is set, as a link
// whose socket broke under the engine.
type brokenLink struct {
	transport.Link
	broken atomic.Bool
	closed atomic.Bool // Close was called
}

func (l *brokenLink) Close() error {
	l.closed.Store(true)
	return l.Link.Close()
}

var errSocketBroke = errors.New("recvmsg: the socket broke")

func (l *brokenLink) Recv(frames [][]byte) (int, error) {
	if l.broken.Load() {
		return 0, errSocketBroke
	}
	return l.Link.Recv(frames)
}

// TestEngineDied: an engine whose link fails stops by itself (Device.Run returns
// the link's error); a tool waiting for a completion then ends with that cause,
// not with a timeout that blames the peer, and stop still closes the link.
func TestEngineDied(t *testing.T) {
	a, _ := transport.NewPipe(transport.PipeConfig{}, transport.PipeConfig{})
	link := &brokenLink{Link: a}
	eng, err := runEngine(link, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{prov: &engine{link: link, dev: eng.dev, pd: eng.dev.AllocPD()}, ifname: "lo", stop: eng.stop}
	go e.watchEngine(eng.died)
	c := &conn{env: e, cq: eng.dev.CreateCQ(16)}
	if err := c.linkCheck(); err != nil {
		t.Fatalf("linkCheck before the link broke: %v", err)
	}

	link.broken.Store(true)
	link.Wake()
	start := time.Now()
	wcs := make([]transport.WorkCompletion, 4)
	n, err := c.waitCQ(wcs, 10*time.Second, time.Time{})
	const want = "the engine stopped: recvmsg: the socket broke"
	if n != 0 || err == nil || err.Error() != want || !errors.Is(err, errSocketBroke) {
		t.Fatalf("waitCQ = %d, %v; want 0, %q", n, err, want)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("waitCQ took %v to name the cause", took)
	}
	if got := eng.dev.Counters().Get(transport.CntLinkDowned); got != 1 {
		t.Errorf("link_downed %d, want 1", got)
	}
	if _, ok := <-eng.died; ok {
		t.Error("died delivered a second error")
	}
	eng.stop()
	if !link.closed.Load() {
		t.Error("stop did not close the link")
	}
}

// TestEngineStopped: stop ends the loop without an error on died.
func TestEngineStopped(t *testing.T) {
	a, _ := transport.NewPipe(transport.PipeConfig{}, transport.PipeConfig{})
	eng, err := runEngine(a, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	eng.stop()
	if err, ok := <-eng.died; ok {
		t.Fatalf("died after stop: %v", err)
	}
}

// TestDaemonEngineDied: a daemon whose engine stops by itself exits naming the
// cause, and its control socket is gone.
func TestDaemonEngineDied(t *testing.T) {
	a, _ := transport.NewPipe(transport.PipeConfig{}, transport.PipeConfig{})
	link := &brokenLink{Link: a}
	eng, err := runEngine(link, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	var mu sync.Mutex
	dir := t.TempDir()
	done := make(chan error, 1)
	go func() {
		done <- serveDevice(eng, deviceConfig{name: "xrdied", named: true, ifname: "lo", dir: dir, log: log.New(lockedWriter{&mu, &logged}, "", 0)})
	}()
	sock := filepath.Join(dir, "xrdied.sock")
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("no control socket %s", sock)
		}
	}
	link.broken.Store(true)
	link.Wake()
	select {
	case err := <-done:
		const want = "xrdied stopped: the engine stopped: recvmsg: the socket broke"
		if err == nil || err.Error() != want {
			t.Fatalf("serveDevice = %v, want %q", err, want)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the daemon still serves 3 s after its engine stopped")
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("control socket left behind: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logged.String(), "xrdied stopped") {
		t.Errorf("log:\n%s\nwant the device's stop", logged.String())
	}
}

// lockedWriter serialises writes to w: the daemon logs from several goroutines.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
