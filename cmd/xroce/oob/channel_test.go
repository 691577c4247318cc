package oob

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/test/captures"
)

// commMessages returns the SENDs of the first run's comm connection in
// ib_write_bw_rdmacm.pcap (perftest 4.5-0.17 -R on rdma_rxe): the RC SEND_ONLY
// payloads to QP 0x1d, the client's first (it sends first).
func commMessages(t *testing.T, path string) []message {
	t.Helper()
	frames, err := pcap.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []message
	var client roce.Packet
	for _, f := range frames {
		var p roce.Packet
		if p.Decode(f.Data) != nil || p.BTH.DestQP != 0x1d || p.BTH.Opcode != roce.RC_SEND_ONLY {
			continue
		}
		if len(out) == 0 {
			client = p
		}
		out = append(out, message{p.SrcAddr() == client.SrcAddr(), append([]byte(nil), p.Payload...)})
	}
	if len(out) == 0 {
		t.Fatalf("%s: no SEND on the comm connection", path)
	}
	return out
}

// scripted is a Channel that plays one side of a captured exchange: Recv hands
// over the captured side's next message, Send checks ours against check.
type scripted struct {
	t          *testing.T
	msgs       []message
	playClient bool // the captured side is the client
	next       int
	check      func(i int, want, got []byte)
}

func (c *scripted) Send(msg []byte, _ time.Time) error {
	if c.next >= len(c.msgs) || c.msgs[c.next].fromClient == c.playClient {
		return fmt.Errorf("message %d: we sent %d bytes where the capture has none from our side", c.next, len(msg))
	}
	c.check(c.next, c.msgs[c.next].data, msg)
	c.next++
	return nil
}

func (c *scripted) Recv(time.Time) ([]byte, error) {
	if c.next >= len(c.msgs) || c.msgs[c.next].fromClient != c.playClient {
		return nil, fmt.Errorf("message %d: we wait for the peer where the capture has our turn or its end", c.next)
	}
	c.next++
	return c.msgs[c.next-1].data, nil
}

func (c *scripted) Pending() (bool, error) { return false, nil }
func (c *scripted) String() string         { return "capture" }

// TestChannelAgainstCapture: perftest's rdma_cm exchange (write_bw -R) against
// both sides of rdma_rxe's capture: xroce sends each message where and as long as
// perftest did (fixed messages byte for byte, the zero hand-shakes around the
// test connection, which DataConnect stands for, as zeros, its own key messages as
// struct pingpong_dest) and reads the peer's, to the capture's last message.
func TestChannelAgainstCapture(t *testing.T) {
	for _, src := range captures.Sources(t) {
		msgs := commMessages(t, src.Path(t, "ib_write_bw_rdmacm.pcap"))
		if src.Name == "testdata" {
			// The client's key message of frame 31 (docs/rdmacm-peers.md §1).
			want := Dest{OutReads: 1, QPN: 0x1e, PSN: 0xcbab3a, RKey: 0x0ff5, VAddr: 0x558dfedeb000, GID: roce.GIDFromAddr(mustAddr("10.77.0.12"))}
			if d, err := ParseDest(msgs[12].data); err != nil || d != want {
				t.Errorf("the client's key message reads as %+v (%v), want %+v", d, err, want)
			}
		}
		for _, client := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/client=%v", src.Name, client), func(t *testing.T) {
				ours := ourDests(1)
				ch := &scripted{t: t, msgs: msgs, playClient: !client}
				ch.check = func(i int, want, got []byte) {
					switch {
					case len(got) != len(want):
						t.Errorf("message %d: %d bytes, perftest sent %d", i, len(got), len(want))
					case len(want) == DestLen && bytes.Equal(want, make([]byte, DestLen)):
						if !bytes.Equal(got, want) {
							t.Errorf("message %d: %x, want the zero hand-shake", i, got)
						}
					case len(want) == DestLen:
						if d, err := ParseDest(got); err != nil || d != ours[0] || !bytes.Equal(got, ours[0].MarshalDest()) {
							t.Errorf("message %d: %x, want our key message", i, got)
						}
					case len(want) != 8 && !bytes.Equal(got, want): // reports carry our own figures
						t.Errorf("message %d: %q, want %q", i, got, want)
					}
				}
				s := NewChannelSession(ch, client, BW, time.Second)
				connected := 0
				s.DataConnect = func() error {
					if connected++; ch.next != 10 {
						t.Errorf("the test connection comes after %d messages, perftest's after 10", ch.next)
					}
					return nil
				}
				remote, mtu, err := s.Connect(ours, roce.MTU1024, func([]Dest, roce.MTU) error { return nil })
				if err != nil {
					t.Fatal(err)
				}
				if ch.next != 18 || connected != 1 || mtu != roce.MTU1024 || len(remote) != 1 {
					t.Errorf("test after %d messages (perftest: 18), %d connections, MTU %v, %d remote QPs", ch.next, connected, mtu, len(remote))
				}
				if _, err := s.Finish(Results{Size: 64, Iters: 5}); err != nil {
					t.Fatal(err)
				}
				if ch.next != len(msgs) {
					t.Errorf("the exchange ended after %d of the capture's %d messages", ch.next, len(msgs))
				}
			})
		}
	}
}

// TestDestSRQN: the SRQ number field, which carries xroce's --verify-all mark and
// -n, goes through both key message formats: big-endian at byte 48 of struct
// pingpong_dest (-R), "%08x" before the NUL of the text key message.
func TestDestSRQN(t *testing.T) {
	d := Dest{OutReads: 1, QPN: 0x1e, PSN: 0xcbab3a, RKey: 0x0ff5, VAddr: 0x558dfedeb000, SRQN: 0x8000012c}
	b := d.MarshalDest()
	if got := b[48:52]; !bytes.Equal(got, []byte{0x80, 0x00, 0x01, 0x2c}) {
		t.Errorf("srqn bytes % x, want 80 00 01 2c", got)
	}
	if got, err := ParseDest(b); err != nil || got != d {
		t.Errorf("ParseDest: %+v, %v; want %+v", got, err, d)
	}
	k := d.MarshalKey()
	if got := string(k[len(k)-10 : len(k)-1]); got != "8000012c:" {
		t.Errorf("text key message ends %q, want \"8000012c:\"", got)
	}
	if got, err := ParseKey(k); err != nil || got != d {
		t.Errorf("ParseKey: %+v, %v; want %+v", got, err, d)
	}
}
