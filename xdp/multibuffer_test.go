package xdp_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xroce/xroce/bpf"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/test/testnet"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/xdp"
)

// writeFrame encodes an RC RDMA WRITE Only frame from a to b with payload bytes of
// seeded data and a valid ICRC.
func writeFrame(t *testing.T, from, to transport.Link, src, dst netip.Addr, payload int, seed uint64) []byte {
	t.Helper()
	return flowFrame(t, from, to, src, dst, 0xc001, payload, seed)
}

// flowFrame is writeFrame from UDP source port sport.
func flowFrame(t *testing.T, from, to transport.Link, src, dst netip.Addr, sport uint16, payload int, seed uint64) []byte {
	t.Helper()
	data := make([]byte, payload)
	r := rand.New(rand.NewPCG(seed, 1))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	pk := roce.Packet{
		Eth:     roce.Ethernet{Dst: to.HardwareAddr(), Src: from.HardwareAddr(), EtherType: roce.EtherTypeIPv4},
		IPv4:    roce.IPv4{FlagsFrag: 0x4000, TTL: 64, Src: src.As4(), Dst: dst.As4()},
		UDP:     roce.UDP{SrcPort: sport, DstPort: roce.UDPPort},
		BTH:     roce.BTH{Opcode: roce.RC_RDMA_WRITE_ONLY, PKey: 0xffff, DestQP: 17, PSN: uint32(seed)},
		RETH:    roce.RETH{VA: 0x1000, RKey: 0x42, DMALen: uint32(payload)},
		Payload: data,
	}
	b := make([]byte, pk.Len())
	n, err := pk.Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	return b[:n]
}

// recvOne waits up to timeout for one frame on l and returns a copy of it, or nil.
func recvOne(t *testing.T, l transport.Link, timeout time.Duration) []byte {
	t.Helper()
	frames := make([][]byte, 8)
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		n, err := l.Recv(frames)
		if err != nil {
			t.Fatal(err)
		}
		if n > 1 {
			t.Fatalf("received %d frames, want 1", n)
		}
		if n == 1 {
			return bytes.Clone(frames[0])
		}
		if err := l.Wait(time.Now().Add(50 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
	}
	return nil
}

// recvN receives up to n frames on l within timeout and returns copies of them.
func recvN(t *testing.T, l transport.Link, n int, timeout time.Duration) [][]byte {
	t.Helper()
	var got [][]byte
	buf := make([][]byte, 64)
	for deadline := time.Now().Add(timeout); len(got) < n && time.Now().Before(deadline); {
		k, err := l.Recv(buf)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range buf[:k] {
			got = append(got, bytes.Clone(f))
		}
		if k == 0 {
			_ = l.Wait(time.Now().Add(10 * time.Millisecond))
		}
	}
	return got
}

// TestMultiBufferFrames: with multi-buffer AF_XDP (the default on Linux ≥ 6.6) RoCE
// frames longer than one UMEM chunk cross a veth pair at MTU 9000 byte for byte, ICRC
// good, in native and generic mode: frames around the RX limit of one chunk (3840
// bytes after the kernel's headroom) and the TX limit (4096), the path-MTU-4096 WRITE
// (4170 bytes) and the longest frame of the MTU (three chunks each way).
func TestMultiBufferFrames(t *testing.T) {
	for _, mode := range []bpf.Mode{bpf.ModeNative, bpf.ModeGeneric} {
		t.Run(mode.String(), func(t *testing.T) {
			n := newTestNet(t, 9000, false)
			la, lb := openXDP(t, n, mode)
			for _, l := range []*xdp.Link{la, lb} {
				if ok, why := l.MultiBuffer(); !ok {
					t.Fatalf("%s: not multi-buffer: %s", l.Name(), why)
				}
				if c := l.Caps(); c != (transport.LinkCaps{}) {
					t.Fatalf("%s: caps %+v, want no limit of the link's own", l.Name(), c)
				}
			}
			chained := uint64(0)
			for i, payload := range []int{100, 3764, 3768, 4020, 4024, 4096, 8940} {
				f := writeFrame(t, la, lb, n.ipA, n.ipB, payload, uint64(i))
				if sent, err := la.Send([][]byte{f}); sent != 1 || err != nil {
					t.Fatalf("send of a %d-byte frame: %d, %v", len(f), sent, err)
				}
				got := recvOne(t, lb, 2*time.Second)
				if got == nil {
					st, _ := lb.Stats()
					t.Fatalf("%d-byte frame (payload %d) not received; receiver's AF_XDP stats %+v", len(f), payload, st)
				}
				if !bytes.Equal(got, f) {
					t.Fatalf("%d-byte frame (payload %d) arrived as %d bytes, different", len(f), payload, len(got))
				}
				var pk roce.Packet
				if err := pk.Decode(got); err != nil || len(pk.Payload) != payload {
					t.Fatalf("%d-byte frame: decode %v, payload %d", len(f), err, len(pk.Payload))
				}
				if len(f) > xdp.MaxFrame {
					chained++
				}
				// One frame at a time through a fill ring in address order: each
				// chain's chunks are adjacent, joined in place.
				if c, j := lb.ChainedFrames(), lb.ChainedInPlace(); c != chained || j != chained {
					t.Errorf("%d-byte frame: %d frames reassembled, %d in place; want %d", len(f), c, j, chained)
				}
			}
		})
	}
}

// TestSingleBuffer: a link opened single-buffer (what the link falls back to when the
// kernel refuses XDP_USE_SG) caps the path MTU at 2048 and says why, refuses to send
// a frame longer than a chunk, and the kernel drops (and counts) a longer frame sent
// to it while shorter ones still arrive.
func TestSingleBuffer(t *testing.T) {
	n := newTestNet(t, 9000, false)
	la, err := xdp.Open(xdp.Config{Interface: n.ifA, Mode: bpf.ModeNative, Netns: nsPath(n.nsA)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { la.Close() })
	lb, err := xdp.Open(xdp.Config{Interface: n.ifB, Mode: bpf.ModeNative, Netns: nsPath(n.nsB), SingleBuffer: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lb.Close() })
	if ok, why := lb.MultiBuffer(); ok || !strings.Contains(why, "SingleBuffer") {
		t.Errorf("MultiBuffer() = %v, %q", ok, why)
	}
	c := lb.Caps()
	if c.MaxPathMTU != roce.MTU2048 || !strings.Contains(c.MaxPathMTUReason, "multi-buffer") || !strings.Contains(c.MaxPathMTUReason, "3840") {
		t.Errorf("caps %+v", c)
	}
	long := writeFrame(t, lb, la, n.ipB, n.ipA, 4096, 1)
	if b := lb.LendTx(len(long), 0xC001); b != nil {
		t.Errorf("a single-buffer link lent %d bytes for a frame longer than a chunk", len(b))
	}
	if sent, err := lb.Send([][]byte{long}); sent != 0 || !errors.Is(err, xdp.ErrFrameTooLong) || !strings.Contains(err.Error(), "single-buffer") {
		t.Errorf("single-buffer send of %d bytes: %d, %v", len(long), sent, err)
	}
	long = writeFrame(t, la, lb, n.ipA, n.ipB, 4096, 2)
	if sent, err := la.Send([][]byte{long}); sent != 1 || err != nil {
		t.Fatalf("send: %d, %v", sent, err)
	}
	if got := recvOne(t, lb, 300*time.Millisecond); got != nil {
		t.Fatalf("a single-buffer link received a %d-byte frame", len(got))
	}
	if st, err := lb.Stats(); err != nil || st.Rx_dropped != 1 {
		t.Errorf("receiver's AF_XDP stats %+v, %v: want one frame dropped", st, err)
	}
	short := writeFrame(t, la, lb, n.ipA, n.ipB, 2048, 3)
	if sent, err := la.Send([][]byte{short}); sent != 1 || err != nil {
		t.Fatalf("send: %d, %v", sent, err)
	}
	if got := recvOne(t, lb, 2*time.Second); !bytes.Equal(got, short) {
		t.Fatalf("the %d-byte frame arrived as %d bytes", len(short), len(got))
	}
}

// TestQueuesMultiBuffer: on a veth with four receive queues (numtxqueues 4
// numrxqueues 4) at MTU 9000, every queue's socket is multi-buffer: datagrams to UDP
// 4791 that are longer than a chunk, from 64 source ports (which the kernel spreads
// over the queues), all arrive whole, reassembled, on every queue.
func TestQueuesMultiBuffer(t *testing.T) {
	n := newTestNetQueues(t, 9000, false, 4)
	la, err := xdp.Open(xdp.Config{Interface: n.ifA, Mode: bpf.ModeNative, Netns: nsPath(n.nsA)})
	if err != nil {
		t.Fatal(err)
	}
	defer la.Close()
	if q := len(la.QueueFrames()); q != 4 {
		t.Fatalf("%d sockets, want one per queue (4)", q)
	}
	const flows, payload = 64, 4100
	want := 14 + 20 + 8 + payload
	inNS(t, n.nsB, func() {
		for i := range flows {
			c, err := net.DialUDP("udp4", &net.UDPAddr{Port: 21000 + i}, &net.UDPAddr{IP: n.ipA.AsSlice(), Port: 4791})
			if err != nil {
				t.Error(err)
				return
			}
			b := make([]byte, payload)
			b[0], b[payload-1] = byte(i), byte(i)
			if _, err := c.Write(b); err != nil {
				t.Error(err)
			}
			c.Close()
		}
	})
	frames := make([][]byte, 64)
	got, seen := 0, map[byte]bool{}
	deadline := time.Now().Add(5 * time.Second)
	for got < flows && time.Now().Before(deadline) {
		k, err := la.Recv(frames)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range frames[:k] {
			if len(f) != want || f[42] != f[len(f)-1] {
				t.Fatalf("frame of %d bytes (want %d), first and last payload bytes %d, %d", len(f), want, f[42], f[len(f)-1])
			}
			seen[f[42]] = true
		}
		got += k
		if k == 0 {
			la.Wait(time.Now().Add(10 * time.Millisecond))
		}
	}
	per := la.QueueFrames()
	if got != flows || len(seen) != flows || la.ChainedFrames() != flows {
		t.Fatalf("received %d of %d datagrams (%d distinct), %d reassembled; per queue %v", got, flows, len(seen), la.ChainedFrames(), per)
	}
	for q, c := range per {
		if c == 0 {
			t.Errorf("queue %d received nothing; per queue %v", q, per)
		}
	}
}

// TestQueuesTransmit: on veths with four queues each way at MTU 9000, every queue's
// socket transmits: 64 RoCE frames from 64 UDP source ports (0xC000 + i, as many QP
// pairs), short and chained, leave from the socket of queue sport mod 4 (16 from
// each), and all arrive at the peer's link byte for byte.
func TestQueuesTransmit(t *testing.T) {
	n := newTestNetQueues(t, 9000, false, 4)
	la, lb := openXDP(t, n, bpf.ModeNative)
	sendFlows(t, n, la, lb, []uint64{16, 16, 16, 16})
}

// TestQueuesFewerTx: A's veth end has four receive queues but one transmit queue
// (numtxqueues 1 numrxqueues 4). Copy-mode AF_XDP sends nothing from the socket of
// a queue the interface does not transmit on (net/xdp/xsk.c), so every flow leaves
// from queue 0's socket, and all 64 frames arrive; the header line says so.
func TestQueuesFewerTx(t *testing.T) {
	tn := testnet.New(t, testnet.Options{MTU: 9000, Queues: 4, TxA: 1})
	n := &testNet{tn.NsA, tn.NsB, tn.NsBr, tn.IfA, tn.IfB, tn.IPA, tn.IPB, tn.IP6A, tn.IP6B}
	la, lb := openXDP(t, n, bpf.ModeNative)
	if d, want := la.Describe(), "xdp native, copy, multi-buffer, 4 queues, 1 transmitting (the interface has 1 TX queue in use)"; d != want {
		t.Errorf("Describe: %q, want %q", d, want)
	}
	if d, want := lb.Describe(), "xdp native, copy, multi-buffer, 4 queues"; d != want {
		t.Errorf("B's Describe: %q, want %q", d, want)
	}
	sendFlows(t, n, la, lb, []uint64{64, 0, 0, 0})
}

// sendFlows sends 64 RoCE frames from la to lb, one from each of 64 UDP source ports
// (0xC000 + i), short and chained alternately; it checks that la's queues sent
// perQueue of them and that all arrive at lb byte for byte.
func sendFlows(t *testing.T, n *testNet, la, lb *xdp.Link, perQueue []uint64) {
	t.Helper()
	const flows = 64
	want := map[uint32][]byte{} // by PSN
	var frames [][]byte
	for i := range flows {
		payload := 100
		if i%2 == 1 {
			payload = 4100 // two chunks
		}
		f := flowFrame(t, la, lb, n.ipA, n.ipB, uint16(0xC000+i), payload, uint64(i))
		want[uint32(i)] = f
		frames = append(frames, f)
	}
	for sent := 0; sent < flows; {
		k, err := la.Send(frames[sent:])
		if err != nil {
			t.Fatal(err)
		}
		sent += k
		if k == 0 {
			la.Wait(time.Now().Add(time.Millisecond))
		}
	}
	if per := la.QueueSent(); !slices.Equal(per, perQueue) {
		t.Errorf("frames sent per queue %v, want %v", per, perQueue)
	}
	buf := make([][]byte, 64)
	got := 0
	for deadline := time.Now().Add(5 * time.Second); got < flows && time.Now().Before(deadline); {
		k, err := lb.Recv(buf)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range buf[:k] {
			psn := uint32(f[14+20+8+9])<<16 | uint32(f[14+20+8+10])<<8 | uint32(f[14+20+8+11])
			if w, ok := want[psn]; !ok || !bytes.Equal(f, w) {
				t.Fatalf("frame with PSN %d (%d bytes) is not one that was sent", psn, len(f))
			}
			delete(want, psn)
			got++
		}
		if k == 0 {
			lb.Wait(time.Now().Add(10 * time.Millisecond))
		}
	}
	if got != flows {
		t.Fatalf("received %d of %d frames; per receive queue %v", got, flows, lb.QueueFrames())
	}
}

// TestLendTx: a frame encoded in memory lent by LendTx is sent as it is (no copy)
// and arrives byte for byte, in order with copied frames around it; a path-MTU-4096
// frame (longer than a chunk) is lent two adjacent chunks, sent chained; a frame of
// more chunks than the link chains is not lent; a queue's chunks run out after
// TxFrames loans and are free again once returned.
func TestLendTx(t *testing.T) {
	n := newTestNet(t, 9000, false)
	la, lb := openXDP(t, n, bpf.ModeNative)
	var frames, want [][]byte
	for i, payload := range []int{200, 201, 4096, 203, 202} {
		f := flowFrame(t, la, lb, n.ipA, n.ipB, 0xC001, payload, uint64(i))
		want = append(want, f)
		if i%2 == 0 { // frames 0, 2 (4170 bytes) and 4 in lent chunks
			b := la.LendTx(len(f), 0xC001)
			chunks := (len(f) + xdp.FrameSize - 1) / xdp.FrameSize
			if b == nil || len(b) != len(f) || cap(b) != chunks*xdp.FrameSize {
				t.Fatalf("LendTx(%d): %d bytes, cap %d", len(f), len(b), cap(b))
			}
			copy(b, f)
			f = b
		}
		frames = append(frames, f)
	}
	if k, err := la.Send(frames); k != 5 || err != nil {
		t.Fatalf("Send: %d, %v", k, err)
	}
	got := recvN(t, lb, len(want), 5*time.Second)
	if len(got) != len(want) {
		t.Fatalf("received %d of %d frames", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("frame %d: got %d bytes, want %d, or other bytes", i, len(got[i]), len(want[i]))
		}
	}
	if in := la.TxInPlace(); in != 3 {
		t.Errorf("%d frames sent from lent chunks, want 3", in)
	}
	if c, j := lb.ChainedFrames(), lb.ChainedInPlace(); c != 1 || j != 1 {
		t.Errorf("%d frames received chained, %d of them joined in place; want 1 and 1", c, j)
	}
	if b := la.LendTx(4*xdp.FrameSize+1, 0xC001); b != nil {
		t.Errorf("lent %d bytes for a frame of 5 chunks", len(b))
	}
	var loans [][]byte
	for {
		b := la.LendTx(64, 0xC001)
		if b == nil {
			break
		}
		loans = append(loans, b)
	}
	if len(loans) != xdp.TxFrames {
		t.Errorf("%d chunks lent before they ran out, want %d (TxFrames)", len(loans), xdp.TxFrames)
	}
	for _, b := range loans {
		la.ReturnTx(b)
	}
	if b := la.LendTx(64, 0xC001); b == nil {
		t.Error("no chunk to lend after every loan was returned")
	}
}
