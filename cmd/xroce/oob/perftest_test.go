package oob

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/test/captures"
)

// message is one TCP payload of an out-of-band exchange.
type message struct {
	fromClient bool
	data       []byte
}

// exchange returns the TCP port-18515 payloads of the first connection of a capture.
func exchange(t *testing.T, file string) []message {
	msgs, _ := exchangeAndTest(t, file)
	return msgs
}

// exchangeAndTest also returns how many of those messages come before the first
// RoCE frame, i.e. before the test runs (-1 for a capture without RoCE frames).
func exchangeAndTest(t *testing.T, file string) ([]message, int) {
	t.Helper()
	frames, err := pcap.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []message
	var clientPort layers.TCPPort
	before := -1
	for _, f := range frames {
		p := gopacket.NewPacket(f.Data, layers.LayerTypeEthernet, gopacket.Default)
		if udp, ok := p.Layer(layers.LayerTypeUDP).(*layers.UDP); ok && udp.DstPort == 4791 && before < 0 && clientPort != 0 {
			before = len(out)
		}
		tcp, ok := p.Layer(layers.LayerTypeTCP).(*layers.TCP)
		if !ok {
			continue
		}
		if clientPort == 0 && tcp.DstPort == DefaultPort {
			clientPort = tcp.SrcPort
		}
		if tcp.SrcPort != clientPort && tcp.DstPort != clientPort {
			continue // a later connection
		}
		if len(tcp.Payload) > 0 {
			out = append(out, message{tcp.SrcPort == clientPort, append([]byte(nil), tcp.Payload...)})
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no exchange", file)
	}
	return out, before
}

// script plays one side of a captured exchange against the other side under test
// over loopback TCP: it writes the captured messages of its side and reads the
// other side's, handing each to check. done counts the messages handled.
func script(t *testing.T, msgs []message, playClient bool, conn net.Conn, check func(i int, want, got []byte), done ...*atomic.Int32) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	for i, m := range msgs {
		if m.fromClient == playClient {
			if _, err := conn.Write(m.data); err != nil {
				t.Errorf("script write %d: %v", i, err)
				return
			}
		} else {
			got := make([]byte, len(m.data))
			if _, err := readFull(conn, got); err != nil {
				t.Errorf("message %d: reading %d bytes from xroce: %v", i, len(m.data), err)
				return
			}
			check(i, m.data, got)
		}
		if len(done) > 0 {
			done[0].Store(int32(i + 1))
		}
	}
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := c.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// keysOf returns one side's key messages of the handshake, one per QP: the first
// qps key messages it sent.
func keysOf(msgs []message, client bool, qps int) [][]byte {
	var keys [][]byte
	for _, m := range msgs {
		if m.fromClient == client && len(m.data) == keyMsgLen && len(keys) < qps {
			keys = append(keys, m.data)
		}
	}
	return keys
}

// checkShape asserts xroce sent what perftest would: identical bytes for fixed
// messages; where the captured side sent the key message of its QP j, our key
// message of QP j; 8-byte words for the results block.
func checkShape(t *testing.T, ours []Dest, theirs [][]byte) func(i int, want, got []byte) {
	var check func(i int, want, got []byte)
	check = func(i int, want, got []byte) {
		if len(want) > keyMsgLen && want[keyMsgLen-1] == 0 && bytes.Count(want[:keyMsgLen], []byte(":")) == 23 {
			// A key message and what followed it in one segment ("done").
			check(i, want[:keyMsgLen], got[:keyMsgLen])
			check(i, want[keyMsgLen:], got[keyMsgLen:])
			return
		}
		switch len(want) {
		case keyMsgLen:
			j := 0
			for j < len(theirs) && !bytes.Equal(theirs[j], want) {
				j++
			}
			if j == len(theirs) {
				t.Fatalf("message %d: the capture has a key message of no QP of its handshake: %q", i, want)
			}
			if d, err := ParseKey(got); err != nil || d != ours[j] || !bytes.Equal(got, ours[j].MarshalKey()) {
				t.Errorf("message %d: key %q (%v), want our own of QP %d %q", i, got, err, j, ours[j].MarshalKey())
			}
		case 8: // results word: values are ours
		default:
			if !bytes.Equal(got, want) {
				t.Errorf("message %d: %q, want %q", i, got, want)
			}
		}
	}
	return check
}

var ourDest = Dest{OutReads: 1, QPN: 0x123, PSN: 0xabcdef, RKey: 0x4455, VAddr: 0x7f00deadb000,
	GID: roce.GIDFromAddr(mustAddr("10.77.0.12"))}

// ourDests are the key messages of qps QPs.
func ourDests(qps int) []Dest {
	d := make([]Dest, qps)
	for i := range d {
		d[i] = ourDest
		d[i].QPN += uint32(i)
		d[i].PSN -= uint32(i * 0x1111)
		d[i].VAddr += uint64(i) * 0x1000
	}
	return d
}

// exchangeCase is one captured perftest exchange: the rdma_rxe captures (one QP,
// one size; file names a capture of each source) and perftest against itself with
// -q 2 and -a (this package's testdata/, recorded by test/interop's
// TestRecordExchange).
type exchangeCase struct {
	file string
	kind Kind
	qps  int
	all  bool
}

// namedCase is a case with its subtest name and the path of its capture.
type namedCase struct {
	exchangeCase
	name, path string
}

// casesOf returns every case: the rdma_rxe captures once for each source (named
// source/file), this package's testdata/ once.
func casesOf(t *testing.T) []namedCase {
	var out []namedCase
	srcs := captures.Sources(t)
	for _, c := range exchangeCases {
		if strings.HasPrefix(c.file, "testdata/") {
			out = append(out, namedCase{c, strings.TrimPrefix(c.file, "testdata/"), c.file})
			continue
		}
		for _, s := range srcs {
			out = append(out, namedCase{c, s.Name + "/" + c.file, s.Path(t, c.file)})
		}
	}
	return out
}

var exchangeCases = []exchangeCase{
	{"ib_write_bw.pcap", BW, 1, false}, {"ib_read_bw.pcap", BW, 1, false}, {"ib_send_bw.pcap", SendBW, 1, false},
	{"ib_atomic_bw.pcap", BW, 1, false}, {"ib_write_lat.pcap", Lat, 1, false},
	{"testdata/ib_write_bw_q2.pcap", BW, 2, false}, {"testdata/ib_write_bw_a.pcap", BW, 1, true},
	{"testdata/ib_read_bw_q2.pcap", BW, 2, false}, {"testdata/ib_read_bw_a.pcap", BW, 1, true},
	{"testdata/ib_atomic_bw_q2.pcap", BW, 2, false},
	{"testdata/ib_send_bw_q2.pcap", SendBW, 2, false}, {"testdata/ib_send_bw_a.pcap", SendBW, 1, true},
	{"testdata/ib_send_bw_q2_a.pcap", SendBW, 2, true},
	{"testdata/ib_write_lat_a.pcap", Lat, 1, true}, {"testdata/ib_read_lat_a.pcap", ReadLat, 1, true},
	{"testdata/ib_send_lat.pcap", SendLat, 1, false}, {"testdata/ib_send_lat_a.pcap", SendLat, 1, true},
}

// sizes is how many sizes the case runs: perftest's -a runs 23.
func (c exchangeCase) sizes() int {
	if c.all {
		return 23
	}
	return 1
}

// play runs xroce's side of the whole exchange as perf.go does: Connect, NextSize
// between the sizes, Finish.
func (c exchangeCase) play(t *testing.T, s *Session, toRTS func([]Dest, roce.MTU) error, afterConnect func()) ([]Dest, roce.MTU, Results) {
	t.Helper()
	s.RunAll = c.all
	remote, peerMTU, err := s.Connect(ourDests(c.qps), roce.MTU1024, toRTS)
	if err != nil {
		t.Fatal(err)
	}
	if afterConnect != nil {
		afterConnect()
	}
	prepared := 0
	for k := 1; k < c.sizes(); k++ {
		if err := s.NextSize(func() error { prepared++; return nil }); err != nil {
			t.Fatalf("before size %d: %v", k+1, err)
		}
	}
	if prepared != c.sizes()-1 {
		t.Errorf("NextSize prepared %d sizes, want %d", prepared, c.sizes()-1)
	}
	res, err := s.Finish(Results{Size: 64, Iters: 5, PeakBW: 1, AvgBW: 1, MsgRate: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	return remote, peerMTU, res
}

// TestClientAgainstCapturedServer: xroce's client role against the server side of
// each captured perftest exchange.
func TestClientAgainstCapturedServer(t *testing.T) {
	for _, c := range casesOf(t) {
		t.Run(c.name, func(t *testing.T) {
			msgs, beforeTest := exchangeAndTest(t, c.path)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			done := make(chan struct{})
			var progress atomic.Int32
			go func() {
				defer close(done)
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				script(t, msgs, false, conn, checkShape(t, ourDests(c.qps), keysOf(msgs, true, c.qps)), &progress)
			}()
			conn, err := Dial(ln.Addr().String(), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			s := NewSession(conn, true, c.kind, 5*time.Second)
			var gotMTU roce.MTU
			// The test starts where the capture's first RoCE frame is: after exactly
			// the messages perftest exchanged before it.
			afterConnect := func() {
				time.Sleep(50 * time.Millisecond)
				if got := int(progress.Load()); beforeTest >= 0 && got != beforeTest {
					t.Errorf("Connect returned after %d messages; perftest starts the test after %d", got, beforeTest)
				}
			}
			remote, peerMTU, _ := c.play(t, s, func(r []Dest, m roce.MTU) error { gotMTU = m; return nil }, afterConnect)
			keys := keysOf(msgs, false, c.qps)
			for i := range c.qps {
				if want, err := ParseKey(keys[i]); err != nil || remote[i] != want {
					t.Errorf("parsed the peer's QP %d as %+v, want %+v (%v)", i, remote[i], want, err)
				}
			}
			if len(remote) != c.qps || peerMTU != roce.MTU1024 || gotMTU != roce.MTU1024 {
				t.Errorf("%d peer QPs, MTU %v %v", len(remote), peerMTU, gotMTU)
			}
			<-done
			if got := int(progress.Load()); got != len(msgs) {
				t.Errorf("the exchange stopped after %d of %d messages", got, len(msgs))
			}
		})
	}
}

// TestServerAgainstCapturedClient: xroce's server role against the client side; the
// server reads the client's results block (the last size's with -a).
func TestServerAgainstCapturedClient(t *testing.T) {
	for _, c := range casesOf(t) {
		t.Run(c.name, func(t *testing.T) {
			msgs := exchange(t, c.path)
			var words []uint64 // the client's results block
			for _, m := range msgs {
				if m.fromClient && len(m.data) == 8 {
					words = append(words, binary.BigEndian.Uint64(m.data))
				}
			}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			var progress atomic.Int32
			done := make(chan struct{})
			go func() {
				defer close(done)
				conn, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					t.Error(err)
					return
				}
				script(t, msgs, true, conn, checkShape(t, ourDests(c.qps), keysOf(msgs, false, c.qps)), &progress)
			}()
			conn, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			s := NewSession(conn, false, c.kind, 5*time.Second)
			remote, _, res := c.play(t, s, func([]Dest, roce.MTU) error { return nil }, nil)
			keys := keysOf(msgs, true, c.qps)
			for i := range c.qps {
				if want, err := ParseKey(keys[i]); err != nil || remote[i] != want {
					t.Errorf("parsed the client's QP %d as %+v, want %+v (%v)", i, remote[i], want, err)
				}
			}
			if c.kind == BW && (len(words) != 5 || res.Size != words[0] || res.Iters != words[1] || res.AvgBW <= 0 || res.MsgRate <= 0) {
				t.Errorf("results block %+v, the client sent %v", res, words)
			}
			<-done
			if got := int(progress.Load()); got != len(msgs) {
				t.Errorf("the exchange stopped after %d of %d messages", got, len(msgs))
			}
		})
	}
}

func TestVersionRefused(t *testing.T) {
	a, b := net.Pipe()
	go func() {
		var v [16]byte
		copy(v[:], "6.28")
		readFull(b, make([]byte, 16))
		b.Write(v[:])
		b.Close()
	}()
	s := NewSession(a, true, BW, time.Second)
	_, _, err := s.Handshake([]Dest{ourDest}, roce.MTU1024)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte(`"6.28"`)) || !bytes.Contains([]byte(err.Error()), []byte(`"6.06"`)) {
		t.Fatalf("error %v: want both versions named", err)
	}
}

func TestKeyMessage(t *testing.T) {
	// The client key message of the repository's ib_write_bw.pcap, frame 17.
	want := "0000:0001:000011:db3909:000002a2:000055e9dbea2000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:0c:00000000:\x00"
	if keys := keysOf(exchange(t, captures.Repo(t).Path(t, "ib_write_bw.pcap")), true, 1); len(keys) != 1 || string(keys[0]) != want {
		t.Fatalf("the capture's client key message is %q", keys)
	}
	d := Dest{OutReads: 1, QPN: 0x11, PSN: 0xdb3909, RKey: 0x2a2, VAddr: 0x55e9dbea2000, GID: roce.GIDFromAddr(mustAddr("10.77.0.12"))}
	if got := string(d.MarshalKey()); got != want {
		t.Errorf("MarshalKey\n%q\nwant\n%q", got, want)
	}
	if p, err := ParseKey([]byte(want)); err != nil || p != d {
		t.Errorf("ParseKey: %+v %v", p, err)
	}
	for _, bad := range []string{"", want[:107], want[:50] + "zz" + want[52:], want[:107] + "x"} {
		if _, err := ParseKey([]byte(bad)); err == nil {
			t.Errorf("ParseKey(%q) succeeded", bad)
		}
	}
}

func TestDialErrors(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	if _, err := Dial(addr, time.Second); err == nil || !bytes.Contains([]byte(err.Error()), []byte("refused the connection")) {
		t.Errorf("refused: %v", err)
	}
	// A host name that does not resolve: the resolver's errors, built here so that
	// no query leaves the machine (as a fresh user's trial met them in a namespace
	// with no route to its DNS server, and for a name the server denies).
	unreach := &net.OpError{Op: "dial", Net: "udp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ENETUNREACH}}
	for _, c := range []struct {
		err  error
		want string
	}{
		{&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: unreach.Error(), Name: "not-an-addr", Server: "10.255.255.53:53"}},
			"oob: not-an-addr:18515: the host name not-an-addr does not resolve (" + unreach.Error() + "): give the server's IP address, or make the name resolve here (/etc/hosts, DNS)"},
		{&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "not-an-addr", IsNotFound: true}},
			"oob: not-an-addr:18515: the host name not-an-addr does not resolve (no such host): give the server's IP address, or make the name resolve here (/etc/hosts, DNS)"},
	} {
		if got := dialError("not-an-addr:18515", time.Second, c.err).Error(); got != c.want {
			t.Errorf("dialError(%v):\n%s\nwant\n%s", c.err, got, c.want)
		}
	}
}

// TestQPCountMismatch: sides with different -q find out in the exchange, and say so,
// instead of connecting QPs to the wrong peers.
func TestQPCountMismatch(t *testing.T) {
	for _, kind := range []Kind{BW, SendBW} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srvErr := make(chan error, 1)
		go func() {
			conn, err := ln.Accept()
			if err != nil {
				srvErr <- err
				return
			}
			_, _, err = NewSession(conn, false, kind, 2*time.Second).Connect(ourDests(2), roce.MTU1024, func([]Dest, roce.MTU) error { return nil })
			conn.Close()
			srvErr <- err
		}()
		conn, err := Dial(ln.Addr().String(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = NewSession(conn, true, kind, 2*time.Second).Connect(ourDests(1), roce.MTU1024, func([]Dest, roce.MTU) error { return nil })
		conn.Close()
		if err == nil || !strings.Contains(err.Error(), "same -q") {
			t.Errorf("kind %d: client with 1 QP against 2: %v", kind, err)
		}
		if err := <-srvErr; err == nil {
			t.Errorf("kind %d: the server with 2 QPs connected to a client with 1", kind)
		}
		ln.Close()
	}
}

// TestStepOutlivesTimeoutWhilePeerAlive: a server step whose timeout passes while
// the peer's frames still arrive (Alive) waits on, and reads the whole message
// even when it comes in pieces; once Alive says nothing arrived, the step times
// out with the timeout named.
func TestStepOutlivesTimeoutWhilePeerAlive(t *testing.T) {
	for _, alive := range []int{3, 0} {
		a, b := net.Pipe()
		calls := 0
		s := NewSession(a, false, BW, 40*time.Millisecond)
		s.Alive = func() bool { calls++; return calls <= alive }
		msg := []byte("0000:000011:4333:00000000:0000000000000000")
		go func() {
			time.Sleep(100 * time.Millisecond) // 2.5 timeouts
			b.Write(msg[:10])
			time.Sleep(10 * time.Millisecond)
			b.Write(msg[10:])
			readFull(b, make([]byte, len(msg)))
		}()
		in, err := s.xchg(msg, 0)
		switch {
		case alive > 0 && (err != nil || string(in) != string(msg)):
			t.Errorf("peer alive: %q, %v; want the message", in, err)
		case alive == 0 && (err == nil || !strings.Contains(err.Error(), "timed out reading the exchange") || !strings.Contains(err.Error(), "40ms")):
			t.Errorf("peer silent: %v; want a timeout after 40ms", err)
		}
		a.Close()
		b.Close()
	}
}

// TestPingpongPeerNamed: a pingpong client talking to a perftest-style server is
// recognised by its key message and named.
func TestPingpongPeerNamed(t *testing.T) {
	a, b := net.Pipe()
	go func() {
		b.Write([]byte("0000:000011:004333:00000000000000000000ffff0a4d0001")[:16]) // what the server reads first
		readFull(b, make([]byte, 16))
		b.Close()
	}()
	s := NewSession(a, false, SendBW, time.Second)
	_, _, err := s.Handshake([]Dest{ourDest}, roce.MTU1024)
	if err == nil || !strings.Contains(err.Error(), "ibv_rc_pingpong key message") || !strings.Contains(err.Error(), "run pingpong here too") {
		t.Fatalf("error %v: want the pingpong peer named", err)
	}
}

// TestPingpongGarbage: a peer that sends 52 bytes of something else gets an error
// that quotes them, names the peer and says what to run, in both roles.
func TestPingpongGarbage(t *testing.T) {
	for _, c := range []struct{ sent, want string }{
		{"hello garbage that is not a pingpong exchange at al\n", `oob: rc_pingpong message "hello garbage that is not a pingpong exchange at al\n" does not end in NUL: pipe is not ibv_rc_pingpong's exchange (LID:QPN:PSN:GID in hex); run ibv_*_pingpong or xroce pingpong there, or choose another port (-p)`},
		{"0000:000011:004333:00000000000000000000ffff0a4d000x\x00", `oob: malformed rc_pingpong message "0000:000011:004333:00000000000000000000ffff0a4d000x\x00": encoding/hex: invalid byte: U+0078 'x': pipe is not`},
	} {
		for _, client := range []bool{false, true} {
			a, b := net.Pipe()
			go func() {
				go io.Copy(io.Discard, b)
				b.Write([]byte(c.sent))
			}()
			_, err := PingpongExchange(a, client, PingpongDest{QPN: 0x11}, time.Second, nil)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Errorf("client %v, peer sent %q: %v\nwant %q", client, c.sent, err, c.want)
			}
			b.Close()
		}
	}
}

// TestPingpongShort: a peer that sends part of a message, fewer than rc_pingpong's
// 52 bytes, and then nothing is quoted when the limit ends, in both roles.
func TestPingpongShort(t *testing.T) {
	defer func(d time.Duration) { firstLimit = d }(firstLimit)
	firstLimit = 100 * time.Millisecond
	for _, sent := range []string{"x", "hello, this is forty bytes of nonsense!!"} {
		want := fmt.Sprintf("oob: pipe sent %d bytes (%q), then nothing for 100ms: ibv_rc_pingpong's exchange message is 52 bytes (LID:QPN:PSN:GID in hex, then NUL); run ibv_*_pingpong or xroce pingpong there, or choose another port (-p)", len(sent), sent)
		for _, client := range []bool{false, true} {
			a, b := net.Pipe()
			go func() {
				go io.Copy(io.Discard, b)
				b.Write([]byte(sent))
			}()
			_, err := PingpongExchange(a, client, PingpongDest{QPN: 0x11}, 60*time.Second, nil)
			if err == nil || err.Error() != want {
				t.Errorf("client %v, peer sent %q: %v\nwant %q", client, sent, err, want)
			}
			b.Close()
		}
	}
}

// TestSilentPeer: a peer that connects and sends nothing (no tool of this kind, or
// hung) ends the handshake after firstLimit, named as such, for both exchanges and
// both roles: a perftest-style session's version field and rc_pingpong's key
// message (the session's own timeout, 60 s, stays for the later steps).
func TestSilentPeer(t *testing.T) {
	defer func(d time.Duration) { firstLimit = d }(firstLimit)
	firstLimit = 100 * time.Millisecond
	want := "connected but sent no exchange message within 100ms: it runs something other than this tool, or hung; run the same tool on both sides"
	for _, client := range []bool{false, true} {
		a, b := net.Pipe()
		go io.Copy(io.Discard, b) // reads what a writes, answers nothing
		s := NewSession(a, client, BW, 60*time.Second)
		start := time.Now()
		_, _, err := s.Handshake([]Dest{{QPN: 0x11}}, roce.MTU1024)
		if err == nil || !strings.HasSuffix(err.Error(), want) || time.Since(start) > 5*time.Second {
			t.Errorf("perftest session, client %v: %v after %v; want %q", client, err, time.Since(start), want)
		}
		a.Close()
		b.Close()
		a, b = net.Pipe()
		go io.Copy(io.Discard, b)
		start = time.Now()
		_, err = PingpongExchange(a, client, PingpongDest{QPN: 0x11}, 60*time.Second, nil)
		if err == nil || !strings.HasSuffix(err.Error(), want) || time.Since(start) > 5*time.Second {
			t.Errorf("pingpong exchange, client %v: %v after %v; want %q", client, err, time.Since(start), want)
		}
		b.Close()
	}
}
