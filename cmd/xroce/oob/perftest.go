// Package oob implements the out-of-band TCP exchanges that set up a connection
// with a real perftest (Debian 12's perftest 4.5+0.17, which announces version
// "6.06") or ibv_rc_pingpong (rdma-core) peer, in both roles, byte for byte as in the
// rdma_rxe captures (shared/pcaps/rxe/ib_*.pcap, ibv_rc_pingpong.pcap).
package oob

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/xroce/xroce/roce"
)

// Version is the perftest exchange version xroce speaks: the string Debian 12's
// perftest 4.5+0.17 sends in its 16-byte version field.
const Version = "6.06"

// DefaultPort is perftest's and rc_pingpong's TCP port.
const DefaultPort = 18515

// Dest is one side's connection parameters, as perftest's key message carries them
// (struct pingpong_dest in perftest_communication.c).
type Dest struct {
	LID      uint16
	OutReads int    // the side's max outstanding RDMA READ/atomic (max_rd_atomic)
	QPN      uint32 // 24 bits
	PSN      uint32 // 24 bits
	RKey     uint32
	VAddr    uint64
	GID      roce.GID
	SRQN     uint32
}

// keyMsgLen is the size of the key message: "%04x:%04x:%06x:%06x:%08x:%016llx:" then
// 16 × "%02x:" for the GID, then "%08x:" for the SRQ number, then a NUL.
const keyMsgLen = 5 + 5 + 7 + 7 + 9 + 17 + 16*3 + 9 + 1

// MarshalKey renders d as perftest's 108-byte key message.
func (d Dest) MarshalKey() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "%04x:%04x:%06x:%06x:%08x:%016x:", d.LID, d.OutReads, d.QPN&0xFFFFFF, d.PSN&0xFFFFFF, d.RKey, d.VAddr)
	for _, x := range d.GID {
		fmt.Fprintf(&b, "%02x:", x)
	}
	fmt.Fprintf(&b, "%08x:", d.SRQN)
	return append([]byte(b.String()), 0)
}

// ParseKey parses a key message. Errors say which field is malformed.
func ParseKey(msg []byte) (Dest, error) {
	if len(msg) != keyMsgLen || msg[len(msg)-1] != 0 {
		return Dest{}, fmt.Errorf("oob: key message of %d bytes, want %d ending in NUL", len(msg), keyMsgLen)
	}
	f := strings.Split(string(msg[:len(msg)-1]), ":")
	if len(f) != 6+16+1+1 || f[len(f)-1] != "" {
		return Dest{}, fmt.Errorf("oob: key message has %d fields: %q", len(f), msg)
	}
	var d Dest
	nums := []struct {
		name string
		bits int
		set  func(uint64)
	}{
		{"LID", 16, func(v uint64) { d.LID = uint16(v) }},
		{"out_reads", 16, func(v uint64) { d.OutReads = int(v) }},
		{"QPN", 24, func(v uint64) { d.QPN = uint32(v) }},
		{"PSN", 24, func(v uint64) { d.PSN = uint32(v) }},
		{"rkey", 32, func(v uint64) { d.RKey = uint32(v) }},
		{"vaddr", 64, func(v uint64) { d.VAddr = v }},
	}
	for i, n := range nums {
		v, err := strconv.ParseUint(f[i], 16, n.bits)
		if err != nil {
			return Dest{}, fmt.Errorf("oob: key message field %s %q: %v", n.name, f[i], err)
		}
		n.set(v)
	}
	for i := range d.GID {
		v, err := strconv.ParseUint(f[6+i], 16, 8)
		if err != nil {
			return Dest{}, fmt.Errorf("oob: key message GID byte %d %q: %v", i, f[6+i], err)
		}
		d.GID[i] = byte(v)
	}
	v, err := strconv.ParseUint(f[22], 16, 32)
	if err != nil {
		return Dest{}, fmt.Errorf("oob: key message field srqn %q: %v", f[22], err)
	}
	d.SRQN = uint32(v)
	return d, nil
}

// Kind selects the exchange sequence, which differs between perftest's tests.
type Kind int

// Exchange sequences, as the captures show them:
//   - BW (write_bw, read_bw, atomic_bw): the key message 3 times before the test and
//     once after it, the results block, the key message once more, then "done" from
//     each side;
//   - SendBW (send_bw): the key message 4 times before the test, once after it, then
//     "done";
//   - Lat (write_lat, send_lat): the key message 4 times, nothing after;
//   - ReadLat (read_lat): the key message 4 times, then after the test perftest's
//     ctx_close_connection: the key message and "done" (only the client reads, so the
//     server must wait for it).
const (
	BW Kind = iota
	SendBW
	Lat
	ReadLat
)

// Results is the results block a bw client sends its server: the message size, the
// iterations, peak and average bandwidth (MB/s, or Gb/s with --report_gbits) and the
// message rate (Mpps), as big-endian 64-bit words.
type Results struct {
	Size, Iters            uint64
	PeakBW, AvgBW, MsgRate float64
}

// Session is one side of a perftest exchange on a TCP connection. The client writes
// first and the server reads first in every step, as perftest does.
type Session struct {
	conn    net.Conn
	client  bool
	kind    Kind
	timeout time.Duration
	local   []byte // our key message
}

// ErrVersion is wrapped by the error for a peer speaking another exchange version.
var ErrVersion = errors.New("unsupported perftest version")

// Dial connects to a perftest or xroce server. Errors name the address and say
// whether the connection was refused or timed out.
func Dial(addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		var ne net.Error
		switch {
		case errors.As(err, &ne) && ne.Timeout():
			return nil, fmt.Errorf("oob: no answer from %s within %v: is the server running and the address right?", addr, timeout)
		case errors.Is(err, syscall.ECONNREFUSED):
			return nil, fmt.Errorf("oob: %s refused the connection: start the server first, or check the port (-p)", addr)
		case errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH):
			return nil, fmt.Errorf("oob: no route to %s: nothing answers at that address on this network (wrong address, or the host is down)", addr)
		}
		return nil, fmt.Errorf("oob: connecting to %s: %w", addr, err)
	}
	return c, nil
}

// NewSession wraps an established connection. Every step must finish within timeout
// (0: no limit, for runs that last until interrupted).
func NewSession(c net.Conn, client bool, kind Kind, timeout time.Duration) *Session {
	return &Session{conn: c, client: client, kind: kind, timeout: timeout}
}

// xchg sends out and receives len(out) bytes (want bytes if want > 0): the client
// writes first, the server reads first.
func (s *Session) xchg(out []byte, want int) ([]byte, error) {
	if want == 0 {
		want = len(out)
	}
	in := make([]byte, want)
	s.deadline()
	read := func() error {
		if _, err := io.ReadFull(s.conn, in); err != nil {
			return s.ioErr("reading", err)
		}
		return nil
	}
	write := func() error {
		if _, err := s.conn.Write(out); err != nil {
			return s.ioErr("writing", err)
		}
		return nil
	}
	first, second := read, write
	if s.client {
		first, second = write, read
	}
	if err := first(); err != nil {
		return nil, err
	}
	if err := second(); err != nil {
		return nil, err
	}
	return in, nil
}

// deadline arms the per-step timeout; 0 means none.
func (s *Session) deadline() {
	if s.timeout > 0 {
		_ = s.conn.SetDeadline(time.Now().Add(s.timeout))
	} else {
		_ = s.conn.SetDeadline(time.Time{})
	}
}

func (s *Session) ioErr(what string, err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("oob: timed out %s the exchange with %s after %v", what, s.conn.RemoteAddr(), s.timeout)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("oob: %s closed the exchange early (a different test, or an incompatible tool on the other side?)", s.conn.RemoteAddr())
	}
	return fmt.Errorf("oob: %s the exchange with %s: %w", what, s.conn.RemoteAddr(), err)
}

// Handshake exchanges versions, buffer and cache-line sizes, path MTUs and the key
// messages. It returns the peer's Dest and path MTU. A peer with another version is
// refused with an error naming both.
func (s *Session) Handshake(local Dest, mtu roce.MTU) (Dest, roce.MTU, error) {
	var ver [16]byte
	copy(ver[:], Version)
	in, err := s.xchg(ver[:], 0)
	if err != nil {
		return Dest{}, 0, err
	}
	peer := string(bytes.TrimRight(in, "\x00"))
	if peer != Version {
		return Dest{}, 0, fmt.Errorf("oob: %w: the peer speaks %q, xroce speaks %q (perftest 4.5+0.17 as in Debian 12); use a matching perftest", ErrVersion, peer, Version)
	}
	var w [4]byte
	binary.BigEndian.PutUint32(w[:], 4096) // cycle buffer
	if _, err := s.xchg(w[:], 0); err != nil {
		return Dest{}, 0, err
	}
	binary.BigEndian.PutUint32(w[:], 64) // cache line
	if _, err := s.xchg(w[:], 0); err != nil {
		return Dest{}, 0, err
	}
	in, err = s.xchg([]byte{'0' + byte(mtu), 0}, 0)
	if err != nil {
		return Dest{}, 0, err
	}
	peerMTU := roce.MTU(in[0] - '0')
	if !peerMTU.Valid() || in[1] != 0 {
		return Dest{}, 0, fmt.Errorf("oob: the peer sent MTU %q, not an IB MTU enum", in)
	}
	s.local = local.MarshalKey()
	in, err = s.xchg(s.local, 0)
	if err != nil {
		return Dest{}, 0, err
	}
	remote, err := ParseKey(in)
	if err != nil {
		return Dest{}, 0, err
	}
	return remote, peerMTU, nil
}

// Sync is a barrier: the key message exchanged again.
func (s *Session) Sync() error {
	_, err := s.xchg(s.local, 0)
	return err
}

// ExchangeResults sends (client) or receives (server) the results block; the server
// sends words of its own that the client ignores, as perftest's does.
func (s *Session) ExchangeResults(r Results) (Results, error) {
	words := []uint64{r.Size, r.Iters, math.Float64bits(r.PeakBW), math.Float64bits(r.AvgBW), math.Float64bits(r.MsgRate)}
	var got [5]uint64
	for i, w := range words {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], w)
		in, err := s.xchg(b[:], 0)
		if err != nil {
			return Results{}, err
		}
		got[i] = binary.BigEndian.Uint64(in)
	}
	return Results{Size: got[0], Iters: got[1], PeakBW: math.Float64frombits(got[2]),
		AvgBW: math.Float64frombits(got[3]), MsgRate: math.Float64frombits(got[4])}, nil
}

// Close ends the exchange as the test kind does and closes the connection: after
// bandwidth tests and read_lat each side writes "done" (perftest's
// ctx_close_connection writes it and closes without reading the peer's, so reading
// it is best effort).
func (s *Session) Close() error {
	defer s.conn.Close()
	if s.kind == Lat {
		return nil
	}
	s.deadline()
	if _, err := s.conn.Write([]byte("done\x00")); err != nil {
		return s.ioErr("writing", err)
	}
	in := make([]byte, 5)
	_, _ = io.ReadFull(s.conn, in)
	return nil
}

// Connect runs the part of the sequence before the test: handshake, then the
// barriers around moving the QP to RTR and RTS (toRTS is called between them).
func (s *Session) Connect(local Dest, mtu roce.MTU, toRTS func(remote Dest, mtu roce.MTU) error) (Dest, roce.MTU, error) {
	remote, peerMTU, err := s.Handshake(local, mtu)
	if err != nil {
		return Dest{}, 0, err
	}
	use := roce.MinMTU(mtu, peerMTU)
	if err := toRTS(remote, use); err != nil {
		return Dest{}, 0, err
	}
	// Barriers before the test: 2 for write/read/atomic bandwidth tests, 3 for
	// send_bw and the latency tests (the captures show 3 and 4 key messages before
	// the first RoCE frame).
	syncs := 3
	if s.kind == BW {
		syncs = 2
	}
	for i := 0; i < syncs; i++ {
		if err := s.Sync(); err != nil {
			return Dest{}, 0, err
		}
	}
	return remote, peerMTU, nil
}

// Finish runs the part after the test: for bandwidth tests the barrier, the results
// block (BW only), the closing barrier and "done"; latency tests just close.
func (s *Session) Finish(r Results) (Results, error) {
	switch s.kind {
	case Lat:
		return r, s.Close()
	case ReadLat, SendBW: // perftest's ctx_close_connection: a barrier, then "done"
		if err := s.Sync(); err != nil {
			return Results{}, err
		}
		return r, s.Close()
	}
	if err := s.Sync(); err != nil {
		return Results{}, err
	}
	got, err := s.ExchangeResults(r)
	if err != nil {
		return Results{}, err
	}
	if err := s.Sync(); err != nil {
		return Results{}, err
	}
	return got, s.Close()
}
