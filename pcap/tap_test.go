package pcap_test

import (
	"bytes"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket/pcapgo"

	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/test/testlink"
	"github.com/xroce/xroce/transport"
)

// tapped runs traffic with the server's link wrapped in a Tap and returns the tap.
func tapped(t *testing.T, path string, opts pcap.TapOptions, run func(e *engines)) *pcap.Tap {
	t.Helper()
	var tap *pcap.Tap
	e := newEngines(t, func(l transport.Link, clock *transport.FakeClock) transport.Link {
		var err error
		opts.Now = clock.Now
		tap, err = pcap.NewTap(l, path, opts)
		must(t, err)
		return tap
	})
	run(e)
	must(t, tap.Close())
	return tap
}

// TestTapRecordsBothDirections: every frame the server sent and received is in the
// pcapng file, on the right interface, each Recv's frames under one timestamp,
// timestamps strictly increasing from call to call, and every frame decodes with a
// good ICRC.
func TestTapRecordsBothDirections(t *testing.T) {
	path := filepath.Join(t.TempDir(), "srv.pcapng")
	tap := tapped(t, path, pcap.TapOptions{}, func(e *engines) {
		e.post(transport.WR_RDMA_WRITE, 4096, 64)
		e.post(transport.WR_RDMA_READ, 2500, 8)
	})
	st := tap.Stats()
	frames, err := pcap.ReadFile(path)
	must(t, err)
	if uint64(len(frames)) != st.Frames || st.RX == 0 || st.TX == 0 || st.Files != 1 || st.Lost != 0 {
		t.Fatalf("%d frames in the file, stats %+v", len(frames), st)
	}
	var rx, tx int
	var prev time.Time
	batches, inBatch := 0, 0
	for i, f := range frames {
		var p roce.Packet
		if err := p.Decode(f.Data); err != nil {
			t.Fatalf("frame %d: %v", f.Index, err)
		}
		switch f.Dir {
		case pcap.DirRX:
			rx++
			if p.DstAddr() != srvAddr {
				t.Errorf("frame %d on rx goes to %v", f.Index, p.DstAddr())
			}
		case pcap.DirTX:
			tx++
			if p.SrcAddr() != srvAddr {
				t.Errorf("frame %d on tx comes from %v", f.Index, p.SrcAddr())
			}
		default:
			t.Fatalf("frame %d has no direction", f.Index)
		}
		if i > 0 && f.Time.Before(prev) {
			t.Fatalf("frame %d: time goes back", f.Index)
		}
		if i > 0 && f.Time.Equal(prev) {
			if frames[i-1].Dir != f.Dir {
				t.Fatalf("frame %d: a tx and an rx frame share a timestamp", f.Index)
			}
			inBatch++
		} else {
			batches++
		}
		prev = f.Time
	}
	if uint64(rx) != st.RX || uint64(tx) != st.TX {
		t.Errorf("rx %d tx %d, stats %+v", rx, tx, st)
	}
	if inBatch == 0 {
		t.Errorf("no two frames share a Recv or Send call (%d calls): the test should make batches", batches)
	}
}

// TestTapSnaplenAndPcap: classic pcap and a snap length: frames are cut, their
// original length kept.
func TestTapSnaplenAndPcap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "srv.pcap")
	if pcap.FormatFor(path) != pcap.PCAP || pcap.FormatFor("x.pcapng") != pcap.PCAPNG {
		t.Fatal("FormatFor")
	}
	tap := tapped(t, path, pcap.TapOptions{Format: pcap.PCAP, Snaplen: 100}, func(e *engines) {
		e.post(transport.WR_RDMA_WRITE, 2000, 4)
	})
	frames, err := pcap.ReadFile(path)
	must(t, err)
	b, err := os.ReadFile(path)
	must(t, err)
	if !bytes.Equal(b[:4], []byte{0x4d, 0x3c, 0xb2, 0xa1}) {
		t.Errorf("magic % x, want nanosecond pcap", b[:4])
	}
	long := 0
	for _, f := range frames {
		if len(f.Data) > 100 || f.Dir != pcap.DirUnknown {
			t.Fatalf("frame %d: %d bytes, dir %v", f.Index, len(f.Data), f.Dir)
		}
		if f.Len > 100 {
			long++
		}
	}
	if long == 0 || uint64(long) != tap.Stats().Truncated {
		t.Errorf("%d long frames, %d truncated", long, tap.Stats().Truncated)
	}
}

// TestTapRotation: by size, with a ring of three names.
func TestTapRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.pcapng")
	tap := tapped(t, path, pcap.TapOptions{RotateSize: 20000, RotateFiles: 3}, func(e *engines) {
		e.post(transport.WR_RDMA_WRITE, 4096, 64)
	})
	st := tap.Stats()
	if st.Files < 4 {
		t.Fatalf("%d files for %d frames", st.Files, st.Frames)
	}
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(names) != 3 {
		t.Fatalf("files %v, want a ring of 3", names)
	}
	total := 0
	for n := 0; n < 3; n++ {
		p := pcap.RotatedPath(path, n)
		if n == 1 && !strings.HasSuffix(p, "run-1.pcapng") {
			t.Errorf("RotatedPath %s", p)
		}
		frames, err := pcap.ReadFile(p)
		must(t, err)
		if len(frames) == 0 {
			t.Errorf("%s is empty", p)
		}
		total += len(frames)
	}
	if uint64(total) >= st.Frames {
		t.Errorf("the ring kept %d of %d frames: nothing was overwritten", total, st.Frames)
	}

	// By age: a new file every 5 µs of fake time.
	path = filepath.Join(t.TempDir(), "age.pcapng")
	tap = tapped(t, path, pcap.TapOptions{RotateEvery: 5 * time.Microsecond}, func(e *engines) {
		for range 4 {
			e.post(transport.WR_RDMA_WRITE, 4096, 16)
		}
	})
	if tap.Stats().Files < 2 {
		t.Errorf("%d files", tap.Stats().Files)
	}
}

// TestTapErrors: bad options and unwritable files fail clearly; a write error
// later stops the recording but not the link, and Close reports it.
func TestTapErrors(t *testing.T) {
	a, _ := transport.NewPipe(transport.PipeConfig{}, transport.PipeConfig{})
	for _, c := range []struct {
		path string
		o    pcap.TapOptions
		want string
	}{
		{"x.pcapng", pcap.TapOptions{Snaplen: -1}, "snaplen"},
		{"x.pcapng", pcap.TapOptions{Snaplen: pcap.MaxSnaplen + 1}, "snaplen"},
		{"x.pcapng", pcap.TapOptions{RotateSize: -1}, "negative"},
		{"x.pcapng", pcap.TapOptions{Format: 9}, "format"},
		{filepath.Join(t.TempDir(), "no", "such", "dir.pcapng"), pcap.TapOptions{}, "no such file"},
		{"/dev/full", pcap.TapOptions{}, "no space"},
	} {
		if _, err := pcap.NewTap(a, c.path, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: %v, want %q", c.path, c.o, err, c.want)
		}
	}
	if _, err := pcap.NewTap(nil, "x", pcap.TapOptions{}); err == nil {
		t.Error("nil link accepted")
	}
	if _, err := pcap.NewTap(a, "/dev/full", pcap.TapOptions{Format: pcap.PCAP}); err == nil || !strings.Contains(err.Error(), "no space") {
		t.Errorf("/dev/full as classic pcap: %v", err)
	}

	// A failure after the start (here: the next file of a rotation cannot be
	// created) stops the recording, not the traffic; OnError hears of it then,
	// once, and Close reports it.
	dir := t.TempDir()
	sub := filepath.Join(dir, "gone")
	must(t, os.Mkdir(sub, 0o755))
	var tap *pcap.Tap
	var told []error
	e := newEngines(t, func(l transport.Link, clock *transport.FakeClock) transport.Link {
		var err error
		tap, err = pcap.NewTap(l, filepath.Join(sub, "c.pcapng"), pcap.TapOptions{RotateSize: 1, Now: clock.Now,
			OnError: func(err error) { told = append(told, err) }})
		must(t, err)
		return tap
	})
	must(t, os.RemoveAll(sub))
	e.post(transport.WR_RDMA_WRITE, 4096, 16) // completes: the link works on
	if st := tap.Stats(); st.Lost == 0 || tap.Err() == nil {
		t.Errorf("stats %+v, err %v", st, tap.Err())
	}
	if len(told) != 1 || told[0] != tap.Err() {
		t.Errorf("OnError was told %v before Close; want once, %v", told, tap.Err())
	}
	if err := tap.Close(); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("close: %v", err)
	}
	if len(told) != 1 {
		t.Errorf("OnError was told %d errors; want 1", len(told))
	}
}

// TestTapFlushes: what a Tap recorded reaches its file within a few seconds while
// the Tap stays open, as a daemon's capture must to be read before the daemon
// stops (flushEvery).
func TestTapFlushes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "live.pcapng")
	var tap *pcap.Tap
	e := newEngines(t, func(l transport.Link, clock *transport.FakeClock) transport.Link {
		var err error
		tap, err = pcap.NewTap(l, path, pcap.TapOptions{Now: clock.Now})
		must(t, err)
		return tap
	})
	defer tap.Close()
	e.post(transport.WR_RDMA_WRITE, 4096, 8)
	want := tap.Stats().Frames
	var got []pcap.Frame
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got, _ = pcap.ReadFile(path); uint64(len(got)) == want {
			return
		}
	}
	t.Errorf("the open capture holds %d of the %d frames recorded after 5 s", len(got), want)
}

// TestTapForwards: the Tap passes the Link methods through, Caps included, and
// notes in the pcapng "rx" interface's description that the inner link recomputes
// ICRCs.
func TestTapForwards(t *testing.T) {
	caps := transport.LinkCaps{MaxPathMTU: roce.MTU1024, MaxPathMTUReason: "a test limit", ICRCRecomputed: true}
	a, b := transport.NewPipe(transport.PipeConfig{MAC: srvMAC, Addrs: []netip.Addr{srvAddr}, MTU: 9000, Caps: caps},
		transport.PipeConfig{MAC: cliMAC, Addrs: []netip.Addr{cliAddr}})
	path := filepath.Join(t.TempDir(), "f.pcapng")
	tap, err := pcap.NewTap(a, path, pcap.TapOptions{})
	must(t, err)
	defer tap.Close()
	if tap.MTU() != 9000 || tap.HardwareAddr() != srvMAC || len(tap.Addrs()) != 1 || tap.Link != a {
		t.Error("link attributes")
	}
	if m, err := tap.Resolve(cliAddr); err != nil || m != cliMAC {
		t.Errorf("resolve: %v %v", m, err)
	}
	if c := tap.Caps(); c != caps {
		t.Errorf("caps %+v, want %+v", c, caps)
	}
	must(t, tap.Flush())
	f, err := os.Open(path)
	must(t, err)
	defer f.Close()
	ng, err := pcapgo.NewNgReader(f, pcapgo.DefaultNgReaderOptions)
	must(t, err)
	if _, _, err := ng.ReadPacketData(); err != io.EOF {
		t.Errorf("a frame in a capture of no traffic: %v", err)
	}
	tx, err1 := ng.Interface(0)
	rx, err2 := ng.Interface(1)
	if err1 != nil || err2 != nil || tx.Description != "frames xroce sent" ||
		rx.Description != "frames xroce received; the link recomputes the ICRC of some of them (e.g. IPv4 over the kernel UDP link), so a good ICRC there was not checked" {
		t.Errorf("interfaces %q %q (%v %v)", tx.Description, rx.Description, err1, err2)
	}
	tap.Wake()
	if err := tap.Wait(time.Now().Add(time.Millisecond)); err != nil {
		t.Error(err)
	}
	_, _ = b.Send([][]byte{{1, 2, 3}})
	out := make([][]byte, 4)
	if n, err := tap.Recv(out); n != 1 || err != nil {
		t.Errorf("recv %d %v", n, err)
	}
}

// TestTapReserveRx: a Tap passes the engine's receive reservation on to an inner
// link that takes one (a review found --pcap turning it off), and takes it without
// effect over one that does not.
func TestTapReserveRx(t *testing.T) {
	a, _ := transport.NewPipe(transport.PipeConfig{MAC: srvMAC, Addrs: []netip.Addr{srvAddr}},
		transport.PipeConfig{MAC: cliMAC, Addrs: []netip.Addr{cliAddr}})
	inner := &testlink.Reserving{Link: a}
	tap, err := pcap.NewTap(inner, filepath.Join(t.TempDir(), "r.pcapng"), pcap.TapOptions{})
	must(t, err)
	defer tap.Close()
	var link transport.Link = tap
	r, ok := link.(transport.RxReserver)
	if !ok {
		t.Fatal("a Tap is not a transport.RxReserver")
	}
	r.ReserveRx(256)
	if len(inner.Frames) != 1 || inner.Frames[0] != 256 {
		t.Errorf("the inner link got %v, want [256]", inner.Frames)
	}
	plain, err := pcap.NewTap(a, filepath.Join(t.TempDir(), "p.pcapng"), pcap.TapOptions{})
	must(t, err)
	defer plain.Close()
	plain.ReserveRx(128) // a Pipe holds no receive buffers: nothing to pass on
}
