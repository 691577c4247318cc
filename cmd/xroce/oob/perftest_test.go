package oob

import (
	"bytes"
	"github.com/xroce/xroce/test/captures"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/roce"
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
// RoCE frame, i.e. before the test runs.
func exchangeAndTest(t *testing.T, file string) ([]message, int) {
	t.Helper()
	frames, err := pcap.ReadFile(captures.Path(t, file))
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

// checkShape asserts xroce sent what perftest would: identical bytes for fixed
// messages, a well-formed key message where the capture has one, and 8-byte words
// for the results block.
func checkShape(t *testing.T, ours Dest) func(i int, want, got []byte) {
	return func(i int, want, got []byte) {
		switch len(want) {
		case keyMsgLen:
			d, err := ParseKey(got)
			if err != nil || d != ours || !bytes.Equal(got, ours.MarshalKey()) {
				t.Errorf("message %d: key %q (%v), want our own %q", i, got, err, ours.MarshalKey())
			}
		case 8: // results word: values are ours
		default:
			if !bytes.Equal(got, want) {
				t.Errorf("message %d: %q, want %q", i, got, want)
			}
		}
	}
}

var ourDest = Dest{OutReads: 1, QPN: 0x123, PSN: 0xabcdef, RKey: 0x4455, VAddr: 0x7f00deadb000,
	GID: roce.GIDFromAddr(mustAddr("10.77.0.12"))}

// TestClientAgainstCapturedServer: xroce's client role against the server side of
// each captured perftest exchange.
func TestClientAgainstCapturedServer(t *testing.T) {
	for _, c := range []struct {
		file string
		kind Kind
		peer Dest // the captured server's key message
	}{
		{"ib_write_bw.pcap", BW, Dest{OutReads: 1, QPN: 0x11, PSN: 0x31856d, RKey: 0x28e, VAddr: 0x564da7911000, GID: roce.GIDFromAddr(mustAddr("10.77.0.11"))}},
		{"ib_read_bw.pcap", BW, Dest{OutReads: 0x80, QPN: 0x13, PSN: 0x3f6f0f, RKey: 0x436, VAddr: 0x5653c13fa000, GID: roce.GIDFromAddr(mustAddr("10.77.0.11"))}},
		{"ib_send_bw.pcap", SendBW, Dest{OutReads: 1, QPN: 0x15, PSN: 0xb00ba2, VAddr: 0x55642a26c000, GID: roce.GIDFromAddr(mustAddr("10.77.0.11"))}},
		{"ib_atomic_bw.pcap", BW, Dest{OutReads: 0x80, QPN: 0x1f, PSN: 0x6e80e8, RKey: 0x101c, VAddr: 0x55b64eac5000, GID: roce.GIDFromAddr(mustAddr("10.77.0.11"))}},
		{"ib_write_lat.pcap", Lat, Dest{OutReads: 1, QPN: 0x17, PSN: 0xe2b93a, RKey: 0x8a2, VAddr: 0x564013697000, GID: roce.GIDFromAddr(mustAddr("10.77.0.11"))}},
	} {
		t.Run(c.file, func(t *testing.T) {
			msgs, beforeTest := exchangeAndTest(t, c.file)
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
				script(t, msgs, false, conn, checkShape(t, ourDest), &progress)
			}()
			conn, err := Dial(ln.Addr().String(), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			s := NewSession(conn, true, c.kind, 5*time.Second)
			var gotMTU roce.MTU
			remote, peerMTU, err := s.Connect(ourDest, roce.MTU1024, func(r Dest, m roce.MTU) error { gotMTU = m; return nil })
			if err != nil {
				t.Fatal(err)
			}
			if remote != c.peer || peerMTU != roce.MTU1024 || gotMTU != roce.MTU1024 {
				t.Errorf("parsed the peer as %+v MTU %v, want %+v", remote, peerMTU, c.peer)
			}
			// The test starts where the capture's first RoCE frame is: after exactly
			// the messages perftest exchanged before it.
			time.Sleep(50 * time.Millisecond)
			if got := int(progress.Load()); got != beforeTest {
				t.Errorf("Connect returned after %d messages; perftest starts the test after %d", got, beforeTest)
			}
			if _, err := s.Finish(Results{Size: 64, Iters: 5, PeakBW: 1, AvgBW: 1, MsgRate: 0.1}); err != nil {
				t.Fatal(err)
			}
			<-done
		})
	}
}

// TestServerAgainstCapturedClient: xroce's server role against the client side; the
// server reads the client's results block.
func TestServerAgainstCapturedClient(t *testing.T) {
	for _, c := range []struct {
		file  string
		kind  Kind
		iters uint64
		size  uint64
	}{
		{"ib_write_bw.pcap", BW, 5, 64}, {"ib_read_bw.pcap", BW, 5, 64}, {"ib_send_bw.pcap", SendBW, 0, 0},
		{"ib_atomic_bw.pcap", BW, 5, 8}, {"ib_write_lat.pcap", Lat, 0, 0},
	} {
		t.Run(c.file, func(t *testing.T) {
			msgs := exchange(t, c.file)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				conn, err := net.Dial("tcp", ln.Addr().String())
				if err != nil {
					t.Error(err)
					return
				}
				script(t, msgs, true, conn, checkShape(t, ourDest))
			}()
			conn, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			s := NewSession(conn, false, c.kind, 5*time.Second)
			remote, _, err := s.Connect(ourDest, roce.MTU1024, func(Dest, roce.MTU) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			if remote.GID != roce.GIDFromAddr(mustAddr("10.77.0.12")) || remote.QPN == 0 || remote.PSN == 0 {
				t.Errorf("parsed the client as %+v", remote)
			}
			res, err := s.Finish(Results{})
			if err != nil {
				t.Fatal(err)
			}
			if c.kind == BW && (res.Size != c.size || res.Iters != c.iters || res.AvgBW <= 0 || res.MsgRate <= 0) {
				t.Errorf("results block %+v", res)
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
	_, _, err := s.Handshake(ourDest, roce.MTU1024)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte(`"6.28"`)) || !bytes.Contains([]byte(err.Error()), []byte(`"6.06"`)) {
		t.Fatalf("error %v: want both versions named", err)
	}
}

func TestKeyMessage(t *testing.T) {
	// The client key message of ib_write_bw.pcap, frame 16.
	want := "0000:0001:000011:18ab7f:000002a9:0000555b7579f000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:4d:00:0c:00000000:\x00"
	d := Dest{OutReads: 1, QPN: 0x11, PSN: 0x18ab7f, RKey: 0x2a9, VAddr: 0x555b7579f000, GID: roce.GIDFromAddr(mustAddr("10.77.0.12"))}
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
}
