package xdp

import (
	"encoding/binary"
	"testing"
)

// udpFrame is a minimal Ethernet frame of the given EtherType whose UDP (IP
// protocol proto) source port is sport, with IPv4 options of optWords 32-bit words.
func udpFrame(etherType uint16, proto byte, optWords int, sport uint16) []byte {
	f := make([]byte, 14+40+8)
	binary.BigEndian.PutUint16(f[12:], etherType)
	udp := 14 + 40
	if etherType == 0x0800 {
		f[14] = byte(0x40 | (5 + optWords))
		f[23] = proto
		udp = 14 + 20 + 4*optWords
	} else {
		f[14] = 0x60
		f[20] = proto
	}
	binary.BigEndian.PutUint16(f[udp:], sport)
	return f
}

// TestTxQueue: the queue is the UDP source port modulo the queues for IPv4 (with
// and without options) and IPv6; anything else, and any truncated frame, goes to
// queue 0.
func TestTxQueue(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame []byte
		n     int
		want  int
	}{
		{"IPv4", udpFrame(0x0800, 17, 0, 0xC00B), 4, 3},
		{"IPv4 one queue", udpFrame(0x0800, 17, 0, 0xC00B), 1, 0},
		{"IPv4 options", udpFrame(0x0800, 17, 2, 0xC00A), 4, 2},
		{"IPv6", udpFrame(0x86DD, 17, 0, 0xC005), 3, 0xC005 % 3},
		{"IPv4 not UDP", udpFrame(0x0800, 6, 0, 0xC00B), 4, 0},
		{"IPv6 not UDP", udpFrame(0x86DD, 6, 0, 0xC00B), 4, 0},
		{"ARP", udpFrame(0x0806, 17, 0, 0xC00B), 4, 0},
		{"truncated IPv4", udpFrame(0x0800, 17, 0, 0xC00B)[:35], 4, 0},
		{"truncated IPv6", udpFrame(0x86DD, 17, 0, 0xC00B)[:55], 4, 0},
		{"short", []byte{1, 2, 3}, 4, 0},
	} {
		if got := txQueue(tc.frame, tc.n); got != tc.want {
			t.Errorf("%s: queue %d, want %d", tc.name, got, tc.want)
		}
	}
}

// FuzzTxQueue: any bytes give a queue in range, without a panic.
func FuzzTxQueue(f *testing.F) {
	f.Add(udpFrame(0x0800, 17, 0, 0xC00B), 4)
	f.Add(udpFrame(0x86DD, 17, 0, 0xC00B), 2)
	f.Fuzz(func(t *testing.T, frame []byte, n int) {
		if n < 1 || n > 64 {
			return
		}
		if q := txQueue(frame, n); q < 0 || q >= n {
			t.Fatalf("queue %d of %d", q, n)
		}
	})
}
