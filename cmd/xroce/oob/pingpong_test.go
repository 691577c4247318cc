package oob

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/test/captures"
)

// pingpongServer is, per source, the server's QPN and PSN in the first exchange of
// ibv_rc_pingpong.pcap (its second message).
var pingpongServer = map[string]PingpongDest{
	captures.Shared:   {QPN: 0x19, PSN: 0x5807ae},
	captures.Testdata: {QPN: 0x19, PSN: 0xe3595a},
}

// TestPingpongAgainstCapture plays both roles against ibv_rc_pingpong.pcap.
func TestPingpongAgainstCapture(t *testing.T) {
	captures.Run(t, pingpongAgainstCapture)
}

func pingpongAgainstCapture(t *testing.T, src captures.Source) {
	path := src.Path(t, "ibv_rc_pingpong.pcap")
	msgs := exchange(t, path)
	if len(msgs) != 3 || len(msgs[0].data) != 52 || string(msgs[2].data) != "done\x00" {
		t.Fatalf("capture: %d messages", len(msgs))
	}
	want := pingpongServer[src.Name]
	capServer, err := ParsePingpong(msgs[1].data)
	if err != nil || capServer.QPN != want.QPN || capServer.PSN != want.PSN || capServer.GID != roce.GIDFromAddr(mustAddr("10.77.0.11")) {
		t.Fatalf("captured server message: %+v %v", capServer, err)
	}
	if !bytes.Equal(capServer.Marshal(), msgs[1].data) {
		t.Errorf("Marshal of the parsed message differs from the capture")
	}
	ours := PingpongDest{QPN: 0x42, PSN: 0x123456, GID: roce.GIDFromAddr(mustAddr("10.77.0.12"))}
	check := func(i int, want, got []byte) {
		if len(want) == 52 {
			if !bytes.Equal(got, ours.Marshal()) {
				t.Errorf("message %d: %q, want %q", i, got, ours.Marshal())
			}
		} else if !bytes.Equal(got, want) {
			t.Errorf("message %d: %q, want %q", i, got, want)
		}
	}
	for _, client := range []bool{true, false} {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		go func() {
			var conn net.Conn
			var err error
			if client {
				conn, err = ln.Accept()
			} else {
				conn, err = net.Dial("tcp", ln.Addr().String())
			}
			if err != nil {
				t.Error(err)
				return
			}
			script(t, msgs, !client, conn, check)
		}()
		var conn net.Conn
		if client {
			conn, err = net.Dial("tcp", ln.Addr().String())
		} else {
			conn, err = ln.Accept()
		}
		if err != nil {
			t.Fatal(err)
		}
		// rc_pingpong's server connects before it answers; its client after the
		// exchange (after writing "done").
		var connected PingpongDest
		wc := &writeCounter{Conn: conn}
		peer, err := PingpongExchange(wc, client, ours, 5*time.Second, func(d PingpongDest) error {
			connected = d
			if want := map[bool]int{true: 2, false: 0}[client]; wc.writes != want {
				t.Errorf("client=%v: connect after %d writes, want %d", client, wc.writes, want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// The capture has all three messages before the first RoCE frame.
		if _, before := exchangeAndTest(t, path); before != 3 {
			t.Fatalf("capture: %d messages before the test, want 3", before)
		}
		// The peer is the captured server when xroce is the client, else the
		// captured client (in both sources its QPN is also 0x19: separate guests).
		wantQPN := want.QPN
		if !client {
			c, err := ParsePingpong(msgs[0].data)
			if err != nil || c.QPN != 0x19 {
				t.Fatalf("captured client message: %+v %v", c, err)
			}
			wantQPN = c.QPN
		}
		if connected != peer {
			t.Errorf("client=%v: connected to %+v, the exchange returned %+v", client, connected, peer)
		}
		if peer.QPN != wantQPN {
			t.Errorf("client=%v: peer %+v", client, peer)
		}
		ln.Close()
	}
}

// writeCounter counts the writes on a connection.
type writeCounter struct {
	net.Conn
	writes int
}

func (w *writeCounter) Write(b []byte) (int, error) {
	w.writes++
	return w.Conn.Write(b)
}

// TestPingpongEchoRefused: a client whose "server" echoes back what it is sent
// (an echo service on the port) would connect its QP to itself; it is refused
// with the cause named, and no connect.
func TestPingpongEchoRefused(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	go func() {
		msg := make([]byte, pingpongMsgLen)
		if _, err := io.ReadFull(b, msg); err == nil {
			b.Write(msg)
		}
		io.Copy(io.Discard, b)
	}()
	local := PingpongDest{QPN: 0x11, PSN: 0x4333, GID: ourDest.GID}
	connected := false
	_, err := PingpongExchange(a, true, local, time.Second, func(PingpongDest) error { connected = true; return nil })
	want := "oob: pipe sent back this side's own key message (QPN 0x000011, PSN 0x004333, GID " + ourDest.GID.String() + "): it echoes what it gets, and is no ibv_rc_pingpong server; check the address and port (-p)"
	if err == nil || err.Error() != want || connected {
		t.Fatalf("echo peer: %v (connected %v)\nwant %s", err, connected, want)
	}
}
