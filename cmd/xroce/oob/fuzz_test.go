package oob

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
)

// FuzzParseKey: any 108 bytes parse or fail with an error, never a panic, and what
// parses re-marshals to a message that parses to the same Dest.
func FuzzParseKey(f *testing.F) {
	f.Add(Dest{OutReads: 16, QPN: 0x11, PSN: 0xabcdef, RKey: 0x1234, VAddr: 0x7f0000001000, GID: roce.GIDFromAddr(netip.AddrFrom4([4]byte{10, 0, 0, 1}))}.MarshalKey())
	f.Add(make([]byte, keyMsgLen))
	f.Fuzz(func(t *testing.T, msg []byte) {
		d, err := ParseKey(msg)
		if err != nil {
			return
		}
		again, err := ParseKey(d.MarshalKey())
		if err != nil || again != d {
			t.Fatalf("%q parsed to %+v, which re-parses to %+v (%v)", msg, d, again, err)
		}
	})
}

// FuzzParsePingpong: the same for rc_pingpong's 52-byte message.
func FuzzParsePingpong(f *testing.F) {
	f.Add(PingpongDest{QPN: 0x19, PSN: 0x123456, GID: roce.GIDFromAddr(netip.AddrFrom4([4]byte{10, 0, 0, 2}))}.Marshal())
	f.Add(make([]byte, pingpongMsgLen))
	f.Fuzz(func(t *testing.T, msg []byte) {
		d, err := ParsePingpong(msg)
		if err != nil {
			return
		}
		again, err := ParsePingpong(d.Marshal())
		if err != nil || again != d {
			t.Fatalf("%q parsed to %+v, which re-parses to %+v (%v)", msg, d, again, err)
		}
	})
}

// FuzzHandshake: a peer that sends arbitrary bytes gets an error or a handshake,
// never a panic or a hang.
func FuzzHandshake(f *testing.F) {
	var valid []byte
	ver := make([]byte, 16)
	copy(ver, Version)
	valid = append(valid, ver...)
	valid = append(valid, 0, 0, 0x10, 0, 0, 0, 0, 64, '3', 0)
	valid = append(valid, Dest{QPN: 0x11, GID: roce.GIDFromAddr(netip.AddrFrom4([4]byte{10, 0, 0, 1}))}.MarshalKey()...)
	f.Add(valid)
	f.Add([]byte("5.99\x00"))
	f.Fuzz(func(t *testing.T, peer []byte) {
		a, b := net.Pipe()
		defer a.Close()
		go func() { // the peer: reads what comes, writes its bytes, then hangs up
			go func() {
				buf := make([]byte, 512)
				for {
					if _, err := b.Read(buf); err != nil {
						return
					}
				}
			}()
			_, _ = b.Write(peer)
			b.Close()
		}()
		s := NewSession(a, false, BW, time.Second)
		_, _, _ = s.Handshake([]Dest{{QPN: 0x12}}, roce.MTU1024)
	})
}
