package main

import (
	"errors"
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
	closed := false
	eng, err := runEngine(link, transport.Options{}, func() { closed = true })
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
	if !closed {
		t.Error("stop did not finish (closed not called)")
	}
}

// TestEngineStopped: stop ends the loop without an error on died.
func TestEngineStopped(t *testing.T) {
	a, _ := transport.NewPipe(transport.PipeConfig{}, transport.PipeConfig{})
	eng, err := runEngine(a, transport.Options{}, func() {})
	if err != nil {
		t.Fatal(err)
	}
	eng.stop()
	if err, ok := <-eng.died; ok {
		t.Fatalf("died after stop: %v", err)
	}
}
