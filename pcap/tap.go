package pcap

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/xroce/xroce/transport"
)

// Format is a capture file format.
type Format uint8

// Capture formats.
const (
	// PCAPNG writes pcapng with two interfaces, "tx" (interface 0: frames the link
	// sent) and "rx" (interface 1: frames it received), so every frame carries its
	// direction; Read reports it as Frame.Dir and Wireshark shows it as the
	// interface. Nanosecond timestamps.
	PCAPNG Format = iota
	// PCAP writes classic pcap with nanosecond timestamps (magic 0xa1b23c4d). It has
	// no place for the direction: a frame's addresses are all that tell it, and
	// Replay, not knowing which frames one Recv returned, feeds them one at a time
	// (so ACKs the engine coalesced over a batch show up as differences).
	PCAP
)

// FormatFor returns PCAP for a path ending in ".pcap" and PCAPNG otherwise.
func FormatFor(path string) Format {
	if strings.EqualFold(filepath.Ext(path), ".pcap") {
		return PCAP
	}
	return PCAPNG
}

// DefaultSnaplen is the snapshot length written in a file's header when TapOptions
// leaves Snaplen 0 (whole frames are kept): tcpdump's default.
const DefaultSnaplen = 262144

// TapOptions configure a Tap. The zero value records whole frames as pcapng into one
// file, stamped with the system clock.
type TapOptions struct {
	Format Format
	// Snaplen is how many bytes of each frame are stored (1..MaxSnaplen); the
	// frame's full length is recorded too, as tcpdump -s does. 0 keeps whole frames.
	Snaplen int
	// RotateSize starts a new file before a batch of frames once the current one
	// holds at least this many bytes; 0 never does. Files are named as RotatedPath
	// says.
	RotateSize int64
	// RotateEvery starts a new file once the current one is this old (by Now); 0
	// never does.
	RotateEvery time.Duration
	// RotateFiles, with rotation, keeps at most this many files by reusing their
	// names in a ring, as tcpdump -W does; 0 keeps them all.
	RotateFiles int
	// Now stamps the frames; nil means time.Now. Tests pass a fake clock's Now.
	Now func() time.Time
	// OnError, when set, is told the recording's first error (Err's) when it
	// happens, so that a disk that fills up is reported then and not at Close: a
	// recording stops at its first error. It runs once, on the goroutine that was
	// recording (the engine's), and must not block.
	OnError func(error)
}

// RotatedPath returns the name of the n-th file (from 0) of a rotated capture:
// path itself for 0, then "-1", "-2", ... inserted before the extension
// ("run.pcapng", "run-1.pcapng", ...).
func RotatedPath(path string, n int) string {
	if n == 0 {
		return path
	}
	ext := filepath.Ext(path)
	return fmt.Sprintf("%s-%d%s", strings.TrimSuffix(path, ext), n, ext)
}

// TapStats counts what a Tap recorded.
type TapStats struct {
	Frames    uint64 // frames written
	TX, RX    uint64 // of which sent and received
	Truncated uint64 // frames cut to Snaplen
	Files     int    // files opened
	Lost      uint64 // frames not written after a write error
}

// Tap is a transport.Link around an inner Link: it records every frame the inner
// link accepts for sending and every frame it returns from Recv, with a timestamp
// and its direction. It embeds the inner link, so every method but Send, Recv and
// Close is the inner link's own (Caps included: recording changes nothing the link
// carries).
//
// All frames of one Send or Recv call carry one timestamp, taken when the call
// returns; the timestamps of successive calls strictly increase (a clock that did
// not move is nudged by a nanosecond). So in a pcapng capture the frames that one
// Recv call returned are exactly the consecutive "rx" frames with equal timestamps,
// which Replay uses to feed the engine the same batches (its ACK coalescing depends
// on them).
//
// Writing is synchronous, on the caller's goroutine, into a 1 MiB buffer, which
// goes to the file when full and every flushEvery; a Recv that returns no frames
// costs a call and nothing else. A write error does not fail
// the link: recording stops, Err reports the error and Close returns it. When no
// capture is wanted, leave the Tap out of the chain: then it costs nothing.
type Tap struct {
	transport.Link // the inner link

	path string
	opts TapOptions

	mu     sync.Mutex
	f      *os.File
	bw     *bufio.Writer
	ng     *pcapgo.NgWriter
	pw     *pcapgo.Writer
	cw     *countingWriter // bytes in the current file, as the writers hand them on
	opened time.Time
	fileNo int // files opened so far
	last   time.Time
	err    error
	closed bool
	stats  TapStats
	stop   chan struct{} // closed by Close: ends flushLoop
}

// flushEvery is how often a Tap writes what its buffer holds to the file, so that
// a capture a long-running process (xroce daemon --pcap) is still writing can be
// read: with only the 1 MiB buffer, a quiet daemon's frames reached the file at
// SIGTERM.
const flushEvery = time.Second

var _ transport.Link = (*Tap)(nil)

// NewTap opens (creating or truncating) the capture file at path and returns a Tap
// around inner. Errors: a bad option, or the file cannot be created or written.
func NewTap(inner transport.Link, path string, opts TapOptions) (*Tap, error) {
	switch {
	case inner == nil:
		return nil, fmt.Errorf("pcap: tap needs a link")
	case opts.Snaplen < 0 || opts.Snaplen > MaxSnaplen:
		return nil, fmt.Errorf("pcap: snaplen %d out of range 0..%d", opts.Snaplen, MaxSnaplen)
	case opts.Format != PCAP && opts.Format != PCAPNG:
		return nil, fmt.Errorf("pcap: unknown format %d", opts.Format)
	case opts.RotateSize < 0 || opts.RotateEvery < 0 || opts.RotateFiles < 0:
		return nil, fmt.Errorf("pcap: negative rotation option")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	t := &Tap{Link: inner, path: path, opts: opts, stop: make(chan struct{})}
	if err := t.open(opts.Now()); err != nil {
		return nil, err
	}
	go t.flushLoop()
	return t, nil
}

// flushLoop writes the buffered frames to the file every flushEvery until Close.
func (t *Tap) flushLoop() {
	tick := time.NewTicker(flushEvery)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
			t.mu.Lock()
			if !t.closed && t.err == nil && t.f != nil {
				if err := t.flush(); err != nil {
					t.fail(err)
				}
			}
			t.mu.Unlock()
		}
	}
}

// flush hands what the writers hold to the file; under t.mu.
func (t *Tap) flush() error {
	if t.ng != nil {
		if err := t.ng.Flush(); err != nil {
			return err
		}
	}
	return t.bw.Flush()
}

// open starts the next file. Called with t.mu held (or before t is shared).
func (t *Tap) open(now time.Time) error {
	n := t.fileNo
	if t.opts.RotateFiles > 0 {
		n %= t.opts.RotateFiles
	}
	name := RotatedPath(t.path, n)
	f, err := os.Create(name)
	if err != nil {
		return fmt.Errorf("pcap: %w", err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	cw := &countingWriter{w: bw}
	snap := uint32(t.opts.Snaplen)
	switch t.opts.Format {
	case PCAPNG:
		intf := pcapgo.NgInterface{Name: "tx", Description: "frames xroce sent", LinkType: layers.LinkTypeEthernet, SnapLength: snap}
		ng, err := pcapgo.NewNgWriterInterface(cw, intf, pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{Application: "xroce"}})
		if err == nil {
			intf.Name, intf.Description = "rx", "frames xroce received"
			if t.Link.Caps().ICRCRecomputed {
				intf.Description += rxICRCRecomputed
			}
			_, err = ng.AddInterface(intf)
		}
		if err == nil {
			err = ng.Flush() // the headers, through our count
		}
		if err != nil {
			f.Close()
			return fmt.Errorf("pcap: %s: %w", name, err)
		}
		t.ng, t.pw = ng, nil
	case PCAP:
		pw := pcapgo.NewWriterNanos(cw)
		if snap == 0 {
			snap = DefaultSnaplen
		}
		if err := pw.WriteFileHeader(snap, layers.LinkTypeEthernet); err != nil {
			f.Close()
			return fmt.Errorf("pcap: %s: %w", name, err)
		}
		t.ng, t.pw = nil, pw
	}
	// The headers reach the file now, so an unwritable one fails here, not later.
	if err := bw.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("pcap: %s: %w", name, err)
	}
	t.f, t.bw, t.cw = f, bw, cw
	t.opened = now
	t.fileNo++
	t.stats.Files++
	return nil
}

// rxICRCRecomputed ends the "rx" interface's description when the inner link
// recomputes the ICRC of received frames (transport.LinkCaps.ICRCRecomputed): a good
// ICRC on those frames is the link's, not the sender's.
const rxICRCRecomputed = "; the link recomputes the ICRC of some of them (e.g. IPv4 over the kernel UDP link), so a good ICRC there was not checked"

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w interface{ Write([]byte) (int, error) }
	n int64
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// closeFile flushes and closes the current file.
func (t *Tap) closeFile() error {
	if t.f == nil {
		return nil
	}
	err := t.flush()
	if e := t.f.Close(); err == nil {
		err = e
	}
	t.f = nil
	return err
}

// record writes frames in one direction under one timestamp.
func (t *Tap) record(frames [][]byte, dir Direction) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || t.err != nil {
		t.stats.Lost += uint64(len(frames))
		return
	}
	now := t.opts.Now()
	if !now.After(t.last) {
		now = t.last.Add(time.Nanosecond)
	}
	t.last = now
	if t.rotateDue(now) {
		err := t.closeFile()
		if err == nil {
			err = t.open(now)
		}
		if err != nil {
			t.fail(err)
			t.stats.Lost += uint64(len(frames))
			return
		}
	}
	ci := gopacket.CaptureInfo{Timestamp: now}
	if dir == DirRX {
		ci.InterfaceIndex = 1
	}
	for i, fr := range frames {
		ci.Length = len(fr)
		data := fr
		if t.opts.Snaplen > 0 && len(data) > t.opts.Snaplen {
			data = data[:t.opts.Snaplen]
			t.stats.Truncated++
		}
		ci.CaptureLength = len(data)
		var err error
		if t.ng != nil {
			err = t.ng.WritePacket(ci, data)
		} else {
			err = t.pw.WritePacket(ci, data)
		}
		if err != nil {
			t.fail(err)
			t.stats.Lost += uint64(len(frames) - i)
			return
		}
		t.stats.Frames++
		if dir == DirRX {
			t.stats.RX++
		} else {
			t.stats.TX++
		}
	}
}

func (t *Tap) rotateDue(now time.Time) bool {
	o := &t.opts
	return (o.RotateSize > 0 && t.cw.n >= o.RotateSize) || (o.RotateEvery > 0 && now.Sub(t.opened) >= o.RotateEvery)
}

func (t *Tap) fail(err error) {
	if t.err == nil {
		t.err = fmt.Errorf("pcap: recording to %s: %w", t.path, err)
		if t.opts.OnError != nil {
			t.opts.OnError(t.err)
		}
	}
}

// Send implements transport.Link: the frames the inner link accepts are recorded
// on the "tx" interface.
func (t *Tap) Send(frames [][]byte) (int, error) {
	n, err := t.Link.Send(frames)
	if n > 0 {
		t.record(frames[:n], DirTX)
	}
	return n, err
}

// Recv implements transport.Link: the frames received are recorded on the "rx"
// interface.
func (t *Tap) Recv(frames [][]byte) (int, error) {
	n, err := t.Link.Recv(frames)
	if n > 0 {
		t.record(frames[:n], DirRX)
	}
	return n, err
}

// ReserveRx implements transport.RxReserver by passing the reservation on to the
// inner link when it holds receive buffers (the AF_XDP link): a Tap hides the
// inner link's other methods, and without it a capture turned the reservation
// off.
func (t *Tap) ReserveRx(frames int) {
	if r, ok := t.Link.(transport.RxReserver); ok {
		r.ReserveRx(frames)
	}
}

// Flush writes buffered frames to the file.
func (t *Tap) Flush() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.f == nil || t.err != nil {
		return t.err
	}
	var err error
	if t.ng != nil {
		err = t.ng.Flush()
	}
	if err == nil {
		err = t.bw.Flush()
	}
	if err != nil {
		t.fail(err)
	}
	return t.err
}

// Err returns the first recording error, or nil.
func (t *Tap) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// Stats returns what the tap recorded so far.
func (t *Tap) Stats() TapStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stats
}

// Close closes the inner link, then flushes and closes the capture. It returns the
// inner link's error, else the first recording error.
func (t *Tap) Close() error {
	err := t.Link.Close()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return err
	}
	t.closed = true
	close(t.stop)
	if e := t.closeFile(); e != nil {
		t.fail(e)
	}
	if err == nil {
		err = t.err
	}
	return err
}
