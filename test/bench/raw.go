package main

import (
	"flag"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/xroce/xroce/bpf"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/xdp"
)

// The raw AF_XDP helpers: each runs as its own process in a namespace (this program
// re-executed as `bench raw-tx|raw-rx|raw-ping|raw-pong ...`), moves valid RoCEv2
// frames through an xdp.Link with no engine and no protocol work, prints "ready" once
// its link is open and one "result key=value ..." line at the end.

// rawQPN is the destination QP of data frames; nothing parses it.
const rawQPN = 99

// openRaw opens the AF_XDP link on dev (native XDP) and the frame of payload bytes
// to dst: RDMA WRITE MIDDLE (the body of a multi-packet WRITE) or, with only, RDMA
// WRITE ONLY with its RETH (a whole small WRITE, as write_lat and 64 B write_bw send).
func openRaw(dev, dst string, payload int, only bool) (*xdp.Link, []byte, error) {
	l, err := xdp.Open(xdp.Config{Interface: dev, Mode: bpf.ModeNative})
	if err != nil {
		return nil, nil, err
	}
	f, err := rawFrame(l, dst, payload, only)
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	return l, f, nil
}

func rawFrame(l *xdp.Link, dst string, payload int, only bool) ([]byte, error) {
	ip, err := netip.ParseAddr(dst)
	if err != nil {
		return nil, err
	}
	var src netip.Addr
	for _, a := range l.Addrs() {
		if a.Is4() {
			src = a
			break
		}
	}
	if !src.IsValid() {
		return nil, fmt.Errorf("%s has no IPv4 address", l.Name())
	}
	mac, err := l.Resolve(ip)
	if err != nil {
		return nil, err
	}
	p := roce.Packet{Eth: roce.Ethernet{Src: l.HardwareAddr(), Dst: mac},
		IPv4:    roce.IPv4{FlagsFrag: 0x4000, TTL: 64, Src: src.As4(), Dst: ip.As4()},
		UDP:     roce.UDP{SrcPort: 0xc000, DstPort: roce.UDPPort},
		BTH:     roce.BTH{Opcode: roce.RC_RDMA_WRITE_MIDDLE, PKey: 0xffff, DestQP: rawQPN},
		Payload: make([]byte, payload)}
	if only {
		p.BTH.Opcode = roce.RC_RDMA_WRITE_ONLY
		p.RETH = roce.RETH{VA: 0x1000, RKey: 1, DMALen: uint32(payload)}
	}
	f := make([]byte, p.Len())
	if _, err := p.Encode(f); err != nil {
		return nil, err
	}
	return f, nil
}

// rawTx sends one frame as fast as the link takes it for -for, in batches of 64.
func rawTx(args []string) error {
	fs := flag.NewFlagSet("raw-tx", flag.ContinueOnError)
	dev := fs.String("d", "", "interface")
	dst := fs.String("dst", "", "receiver's IPv4 address")
	payload := fs.Int("payload", 1024, "payload bytes per frame")
	only := fs.Bool("only", false, "RDMA WRITE ONLY frames (with RETH) instead of WRITE MIDDLE")
	dur := fs.Duration("for", time.Second, "how long to send")
	if err := fs.Parse(args); err != nil {
		return err
	}
	l, f, err := openRaw(*dev, *dst, *payload, *only)
	if err != nil {
		return err
	}
	defer l.Close()
	c := l.Caps()
	pmtu, reason := c.MaxPathMTU, c.MaxPathMTUReason
	fmt.Println("ready")
	batch := make([][]byte, 64)
	for i := range batch {
		batch[i] = f
	}
	sent := 0
	start := time.Now()
	for time.Since(start) < *dur {
		k, err := l.Send(batch)
		if err != nil {
			return err
		}
		sent += k // none taken (the ring full): try again at once, as the engine's loop does
	}
	fmt.Printf("result sent=%d seconds=%g frame=%d maxpmtu=%d reason=%q\n", sent, time.Since(start).Seconds(), len(f), pmtu.Bytes(), reason)
	return nil
}

// rawRx counts the frames of -len bytes it receives and reports their rate between
// the first and the last batch; it stops -idle after the last one (or after -max).
func rawRx(args []string) error {
	fs := flag.NewFlagSet("raw-rx", flag.ContinueOnError)
	dev := fs.String("d", "", "interface")
	want := fs.Int("len", 0, "frame length to count (bytes)")
	idle := fs.Duration("idle", 300*time.Millisecond, "stop this long after the last frame")
	limit := fs.Duration("max", 30*time.Second, "stop after this long in any case")
	place := fs.Bool("place", false, "copy every counted frame's payload into a 64 KiB buffer, as a WRITE's responder places it in its MR (docs/bench.md, \"A receiver that places its data\")")
	if err := fs.Parse(args); err != nil {
		return err
	}
	mr, off := make([]byte, placeBuf), 0
	l, err := xdp.Open(xdp.Config{Interface: *dev, Mode: bpf.ModeNative})
	if err != nil {
		return err
	}
	defer l.Close()
	fmt.Println("ready")
	frames := make([][]byte, 64)
	var n, firstBatch int
	var first, last time.Time
	start := time.Now()
	for time.Since(start) < *limit {
		k, err := l.Recv(frames)
		if err != nil {
			return err
		}
		got := 0
		for _, f := range frames[:k] {
			if len(f) == *want {
				got++
				if *place {
					off = placePayload(mr, off, f)
				}
			}
		}
		if got > 0 {
			last = time.Now()
			if n == 0 {
				first, firstBatch = last, got
			}
			n += got
			continue
		}
		if n > 0 && time.Since(last) > *idle {
			break
		}
		// Poll while frames flow, as the engine does for transport.DefaultBusyPoll
		// after its last work; sleep in the link's Wait only when they stopped.
		if k == 0 && (n == 0 || time.Since(last) > transport.DefaultBusyPoll) {
			_ = l.Wait(time.Now().Add(10 * time.Millisecond))
		}
	}
	if n <= firstBatch {
		return fmt.Errorf("raw-rx: %d frames of %d bytes received", n, *want)
	}
	fmt.Printf("result frames=%d pps=%g\n", n, float64(n-firstBatch)/last.Sub(first).Seconds())
	return nil
}

// placeBuf is the size in bytes of raw-rx -place's buffer: the MR of a 64 KiB
// write_bw.
const placeBuf = 64 << 10

// placePayload copies the payload of f, one of the raw helpers' frames (IPv4: the
// bytes between the BTH, or the RETH of a WRITE ONLY, and the ICRC), into mr at off,
// from the start again when it would not fit, and returns the next offset.
func placePayload(mr []byte, off int, f []byte) int {
	hdr := rawFrameLen(0, false) - roce.ICRCLen
	if len(f) == rawFrameLen(latSize, true) {
		hdr = rawFrameLen(0, true) - roce.ICRCLen
	}
	p := f[hdr : len(f)-roce.ICRCLen]
	if off+len(p) > len(mr) {
		off = 0
	}
	return off + copy(mr[off:], p)
}

// rawPing sends one frame and waits for the peer's answer, -n times after -warm
// round trips, and reports the round-trip times: with -spin it polls the RX ring
// without sleeping, otherwise it sleeps in the link's Wait (ppoll), as the engine
// does when it has nothing to do.
func rawPing(args []string) error {
	fs := flag.NewFlagSet("raw-ping", flag.ContinueOnError)
	dev := fs.String("d", "", "interface")
	dst := fs.String("dst", "", "ponger's IPv4 address")
	payload := fs.Int("payload", 64, "payload bytes of the RDMA WRITE ONLY frame")
	n := fs.Int("n", 10000, "round trips measured")
	warm := fs.Int("warm", 200, "round trips before measuring")
	spin := fs.Bool("spin", false, "busy-poll instead of sleeping in Wait")
	if err := fs.Parse(args); err != nil {
		return err
	}
	l, f, err := openRaw(*dev, *dst, *payload, true)
	if err != nil {
		return err
	}
	defer l.Close()
	fmt.Println("ready")
	rx := make([][]byte, 64)
	one := [][]byte{f}
	rtts := make([]time.Duration, 0, *n)
	lost := 0
	for i := 0; i < *warm+*n; i++ {
		t0 := time.Now()
		if err := sendAll(l, one); err != nil {
			return err
		}
		for {
			k, err := l.Recv(rx)
			if err != nil {
				return err
			}
			if k > 0 {
				break
			}
			if time.Since(t0) > 200*time.Millisecond { // lost: send again
				lost++
				t0 = time.Now()
				if err := sendAll(l, one); err != nil {
					return err
				}
			}
			if !*spin {
				_ = l.Wait(t0.Add(200 * time.Millisecond))
			}
		}
		if i >= *warm {
			rtts = append(rtts, time.Since(t0))
		}
	}
	stop, err := rawFrame(l, *dst, 0, true) // a shorter frame: the ponger stops
	if err != nil {
		return err
	}
	for range 3 {
		_ = sendAll(l, [][]byte{stop})
	}
	slices.Sort(rtts)
	fmt.Printf("result p50=%g p99=%g lost=%d frame=%d\n", quantile(rtts, 0.50).Seconds(), quantile(rtts, 0.99).Seconds(), lost, len(f))
	return nil
}

// rawPong answers every frame as long as the ping frame with one of its own, until a
// shorter frame (the pinger's stop) arrives.
func rawPong(args []string) error {
	fs := flag.NewFlagSet("raw-pong", flag.ContinueOnError)
	dev := fs.String("d", "", "interface")
	dst := fs.String("dst", "", "pinger's IPv4 address")
	payload := fs.Int("payload", 64, "payload bytes of the RDMA WRITE ONLY frame")
	spin := fs.Bool("spin", false, "busy-poll instead of sleeping in Wait")
	limit := fs.Duration("max", 60*time.Second, "stop after this long in any case")
	if err := fs.Parse(args); err != nil {
		return err
	}
	l, f, err := openRaw(*dev, *dst, *payload, true)
	if err != nil {
		return err
	}
	defer l.Close()
	fmt.Println("ready")
	rx := make([][]byte, 64)
	one := [][]byte{f}
	start := time.Now()
	answered := 0
	for time.Since(start) < *limit {
		k, err := l.Recv(rx)
		if err != nil {
			return err
		}
		for _, g := range rx[:k] {
			if len(g) < len(f) {
				fmt.Printf("result answered=%d\n", answered)
				return nil
			}
			if len(g) == len(f) {
				if err := sendAll(l, one); err != nil {
					return err
				}
				answered++
			}
		}
		if k == 0 && !*spin {
			_ = l.Wait(time.Now().Add(100 * time.Millisecond))
		}
	}
	return fmt.Errorf("raw-pong: no stop frame within %v (%d answered)", *limit, answered)
}

// sendAll hands frames to the link until it has taken them all.
func sendAll(l *xdp.Link, frames [][]byte) error {
	for len(frames) > 0 {
		k, err := l.Send(frames)
		if err != nil {
			return err
		}
		frames = frames[k:]
	}
	return nil
}

// quantile returns the q-quantile (0..1) of sorted durations (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*q+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
