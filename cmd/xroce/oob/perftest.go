// Package oob implements the out-of-band TCP exchanges that set up a connection
// with a real perftest (Debian 12's perftest 4.5+0.17, which announces version
// "6.06") or ibv_rc_pingpong (rdma-core) peer, in both roles, byte for byte as those
// programs send them (linux-rdma/perftest src/perftest_communication.c; rdma-core
// libibverbs/examples/rc_pingpong.c), as recorded from runs against rdma_rxe.
package oob

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
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

// Exchange sequences of perftest 4.5+0.17 with q QPs (k0..kq-1 are the key
// messages of QP 0..q-1; "k0" alone is a barrier), as the captures and live runs of
// that perftest against itself on rdma_rxe show them (testdata/):
//   - BW (write_bw, read_bw, atomic_bw): k0..kq-1, then the QPs move to RTR/RTS,
//     k0..kq-1 again, k0; the test; then k0, the results block, k0, and "done" from
//     each side. With -a (RUN_ALL) the client runs every size with no exchange in
//     between, and the results block carries the last size;
//   - SendBW (send_bw): k0..kq-1, RTR/RTS, k0, k0..kq-1, then before each size k0
//     and the test; with -a also k0 after each size; then k0 and "done";
//   - Lat (write_lat): k0..kq-1, RTR/RTS, k0, k0..kq-1, k0; nothing after the test,
//     whatever the number of sizes;
//   - ReadLat (read_lat) and SendLat (send_lat): as Lat, then after the test
//     perftest's ctx_close_connection: k0 and "done"; send_lat has a k0 before
//     every size after the first too (the receivers post their receives first).
const (
	BW Kind = iota
	SendBW
	Lat
	ReadLat
	SendLat
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
	opened  time.Time // when the connection was made (resetNote)
	ch      Channel   // perftest's rdma_cm exchange (-R) instead of conn
	client  bool
	kind    Kind
	timeout time.Duration
	local   [][]byte // our key messages, one per QP
	remote  []Dest   // the peer's, from the handshake
	// Check, when set, is run every second while a step waits for the peer; its
	// error (this side's interface gone, say) ends the exchange.
	Check func() error
	// RunAll is perftest's -a: the sequence of a run over every size (set it
	// before Connect).
	RunAll bool
	// Duplex is perftest's -b (bandwidth tests): both sides run the test, with a
	// barrier before each size of write/read/atomic bw (and after it with -a),
	// and each side sends the other its results after each size (send_bw: not
	// with -D, Duration); then a barrier and "done" (perftest's
	// ctx_close_connection). Set them before Connect.
	Duplex, Duration bool
	// Alive, when set, reports whether the peer showed signs of life (RoCE
	// frames) since it was last called. A step whose timeout passes while it
	// does is given another timeout: the barrier at the end of a long test
	// waits as long as the test runs, as perftest's blocking exchange does.
	Alive func() bool
	// Quiet, when set, is called once the peer has shown no sign of life (Alive)
	// for QuietAfter while a step after Connect waits, with that silence and the
	// step's timeout (0: none); again after each later silence that long.
	Quiet func(silent, limit time.Duration)
	begun bool // Connect returned: the test's frames are due
	// DataConnect, on a Channel session (-R), connects the test QPs by the RDMA
	// CM, as perftest's create_rdma_cm_connection does: the handshake runs it
	// between the MTU and the key messages, with a key message of zeros
	// exchanged before and after it.
	DataConnect func() error
}

// Channel carries perftest's rdma_cm exchange (-R): every message is one SEND on
// the RC QP of the "comm" connection, so messages keep their bounds.
type Channel interface {
	// Send sends msg as one message; past deadline (zero: none) it gives up with
	// an error wrapping os.ErrDeadlineExceeded.
	Send(msg []byte, deadline time.Time) error
	// Recv returns the next message, or an error wrapping
	// os.ErrDeadlineExceeded when deadline (zero: none) passes first, or one
	// wrapping ErrPeerClosed when the peer ended the connection.
	Recv(deadline time.Time) ([]byte, error)
	// Pending says, without waiting, whether a message waits unread; an error
	// wrapping ErrPeerClosed says the peer ended the connection.
	Pending() (bool, error)
	// String names the peer.
	String() string
}

// ErrVersion is wrapped by the error for a peer speaking another exchange version.
var ErrVersion = errors.New("unsupported perftest version")

// Dial connects to a perftest or xroce server. The host may be a name, resolved
// as perftest's getaddrinfo does. Errors name the address and say whether the
// name did not resolve, or the connection was refused or timed out (dialError).
func Dial(addr string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, dialError(addr, timeout, err)
	}
	return c, nil
}

// dialError explains err, from dialling addr with timeout: its cause and the fix.
func dialError(addr string, timeout time.Duration, err error) error {
	var ne net.Error
	var dns *net.DNSError
	switch {
	case errors.As(err, &dns): // before the errors of reaching a DNS server
		return fmt.Errorf("oob: %s: the host name %s does not resolve (%v): give the server's IP address, or make the name resolve here (/etc/hosts, DNS)", addr, dns.Name, dns.Err)
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("oob: no answer from %s within %v: is the server running and the address right?", addr, timeout.Round(time.Millisecond))
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("oob: %s refused the connection: start the server first (it serves one client at a time: it may be busy with another), or check the port (-p); a server started with -R (RDMA CM) listens on no TCP port: give both sides -R, or neither", addr)
	case errors.Is(err, syscall.ENETUNREACH): // no route in this namespace's tables
		return fmt.Errorf("oob: no route to %s in this network namespace (network is unreachable): check the address, or add a route (ip route)", addr)
	case errors.Is(err, syscall.EHOSTUNREACH): // a route, but no neighbour answered
		return fmt.Errorf("oob: no route to %s: nothing answers at that address on this network (wrong address, or the host is down)", addr)
	}
	return fmt.Errorf("oob: connecting to %s: %w", addr, err)
}

// NewSession wraps an established connection. Every step must finish within timeout
// (0: no limit, for runs that last until interrupted). The connection probes its
// peer's host with TCP keepalives (keepAlive), so that a host cut off or down ends
// the wait within seconds, while a peer whose process is only stopped or busy, whose
// kernel answers them, is waited for.
func NewSession(c net.Conn, client bool, kind Kind, timeout time.Duration) *Session {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetKeepAliveConfig(keepAlive)
	}
	return &Session{conn: c, opened: time.Now(), client: client, kind: kind, timeout: timeout}
}

// NewChannelSession runs perftest's rdma_cm exchange (-R) on ch: the same steps
// as on TCP, each message one SEND, the key messages as perftest's 56-byte
// struct pingpong_dest (MarshalDest), and no "done" at the end. Closing ch is
// the caller's.
func NewChannelSession(ch Channel, client bool, kind Kind, timeout time.Duration) *Session {
	return &Session{ch: ch, opened: time.Now(), client: client, kind: kind, timeout: timeout}
}

// Abort closes the exchange's TCP connection without its closing steps (a
// Channel is the caller's to close).
func (s *Session) Abort() {
	if s.conn != nil {
		s.conn.Close()
	}
}

// xchg sends out and receives len(out) bytes (want bytes if want > 0): the client
// writes first, the server reads first.
func (s *Session) xchg(out []byte, want int) ([]byte, error) {
	if want == 0 {
		want = len(out)
	}
	in := make([]byte, want)
	read := func() error { return s.read(in) }
	write := func() error {
		if s.ch != nil {
			if err := s.ch.Send(out, s.stepEnd()); err != nil {
				return s.ioErr("writing", err)
			}
			return nil
		}
		_ = s.conn.SetWriteDeadline(s.stepEnd())
		if _, err := s.conn.Write(out); err != nil {
			return s.ioErr("writing", err)
		}
		return nil
	}
	if s.ch != nil {
		read = func() error { return s.recv(in) }
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

// read reads len(in) bytes of one message from the peer, within the step's
// timeout, counted from the peer's last sign of life (Alive, asked every
// checkEvery, as is Check). A message that stops half-way for partialLimit means
// the two sides are out of step.
func (s *Session) read(in []byte) error {
	end := s.stepEnd()
	lv := s.watchLife()
	var partialEnd time.Time
	for got := 0; got < len(in); {
		dl := time.Now().Add(checkEvery)
		if got > 0 && partialEnd.Before(dl) {
			dl = partialEnd
		}
		if !end.IsZero() && end.Before(dl) {
			dl = end
		}
		_ = s.conn.SetReadDeadline(dl)
		n, err := s.conn.Read(in[got:])
		if n > 0 && got == 0 && n < len(in) {
			// The peer writes each message at once: the rest follows at once,
			// unless the peer sent a message of another length.
			partialEnd = time.Now().Add(partialLimit)
		}
		got += n
		var ne net.Error
		switch {
		case err == nil:
		case errors.Is(err, syscall.ETIMEDOUT): // keepalives unanswered, not a deadline
			return s.ioErr("reading", err)
		case errors.As(err, &ne) && ne.Timeout():
			now := time.Now()
			if got > 0 && !now.Before(partialEnd) {
				return fmt.Errorf("oob: the peer's exchange is out of step: it sent %d bytes where a %d-byte message belongs, then nothing for %v: the two sides run different tests (or -a on one side only); give both the same", got, len(in), partialLimit)
			}
			if s.Check != nil {
				if err := s.Check(); err != nil {
					return fmt.Errorf("oob: waiting for the peer's exchange: %w", err)
				}
			}
			if lv.tick(now) && got == 0 {
				end = s.stepEnd()
			}
			if end.IsZero() || now.Before(end) {
				continue
			}
			return s.ioErr("reading", err)
		case errors.Is(err, io.EOF) && got > 0:
			return s.ioErr("reading", io.ErrUnexpectedEOF)
		default:
			return s.ioErr("reading", err)
		}
	}
	return nil
}

// recv is read on a Channel: one message of exactly len(in) bytes, within the
// step's timeout counted from the peer's last sign of life, running Check every
// checkEvery.
func (s *Session) recv(in []byte) error {
	end := s.stepEnd()
	lv := s.watchLife()
	for {
		dl := time.Now().Add(checkEvery)
		if !end.IsZero() && end.Before(dl) {
			dl = end
		}
		m, err := s.ch.Recv(dl)
		switch {
		case err == nil && len(m) != len(in):
			return fmt.Errorf("oob: the peer's exchange is out of step: it sent a %d-byte message where a %d-byte one belongs: the two sides run different tests (or -a on one side only); give both the same", len(m), len(in))
		case err == nil:
			copy(in, m)
			return nil
		case !errors.Is(err, os.ErrDeadlineExceeded):
			return s.ioErr("reading", err)
		}
		if s.Check != nil {
			if err := s.Check(); err != nil {
				return fmt.Errorf("oob: waiting for the peer's exchange: %w", err)
			}
		}
		now := time.Now()
		if lv.tick(now) {
			end = s.stepEnd()
		}
		if end.IsZero() || now.Before(end) {
			continue
		}
		return s.ioErr("reading", err)
	}
}

// stepEnd is when a step started now times out; zero without a timeout.
func (s *Session) stepEnd() time.Time {
	if s.timeout <= 0 {
		return time.Time{}
	}
	return time.Now().Add(s.timeout)
}

// firstLimit bounds the wait for a connected peer's first exchange message:
// perftest and rc_pingpong send theirs as soon as they are connected.
var firstLimit = 10 * time.Second // a variable for the tests

// errTimedOut marks ioErr's timeouts.
var errTimedOut = errors.New("timed out")

// silent names a peer that connected and sent nothing within firstLimit (a
// timed-out first message), instead of the bare timeout.
func (s *Session) silent(err error) error {
	if errors.Is(err, errTimedOut) {
		return fmt.Errorf("oob: %s connected but sent no exchange message within %v: it runs something other than this tool, or hung; run the same tool on both sides", s.peer(), firstLimit)
	}
	return err
}

// partialLimit is how long the rest of a message may take once its first bytes
// arrived.
const partialLimit = 5 * time.Second

// checkEvery is how often a read that waits runs Check.
const checkEvery = time.Second

// deadline arms the per-step timeout; 0 means none.
func (s *Session) deadline() {
	if s.timeout > 0 {
		_ = s.conn.SetDeadline(time.Now().Add(s.timeout))
	} else {
		_ = s.conn.SetDeadline(time.Time{})
	}
}

func (s *Session) ioErr(what string, err error) error {
	if errors.Is(err, syscall.ETIMEDOUT) || s.conn != nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) && keepalivesUnanswered(s.conn) {
		return errUnanswered(what, s.peer())
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("oob: %w %s the exchange with %s after %v: the peer neither answered nor closed the connection, so it is cut off (its link or address gone, a firewall between) or stopped or hung; see its output",
			errTimedOut, what, s.peer(), s.timeout)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, ErrPeerClosed) {
		note := ""
		if errors.Is(err, syscall.ECONNRESET) {
			note = resetNote(time.Since(s.opened))
		}
		if s.Check != nil {
			if local := s.Check(); local != nil { // what made the peer fail may be here
				return fmt.Errorf("oob: %s closed the exchange early, and on this side %w%s", s.peer(), local, note)
			}
		}
		return fmt.Errorf("oob: %s closed the exchange early: the peer exited or failed (see its output), or runs another test or tool%s", s.peer(), note)
	}
	return fmt.Errorf("oob: %s the exchange with %s: %w", what, s.peer(), err)
}

// peer names the other side.
func (s *Session) peer() string {
	if s.ch != nil {
		return s.ch.String()
	}
	return s.conn.RemoteAddr().String()
}

// Handshake exchanges versions, buffer and cache-line sizes, path MTUs and one key
// message per QP (perftest's first handshake loop). It returns the peer's Dests, one
// per QP in order, and its path MTU. A peer with another version is refused with an
// error naming both.
func (s *Session) Handshake(local []Dest, mtu roce.MTU) ([]Dest, roce.MTU, error) {
	if len(local) == 0 {
		return nil, 0, errors.New("oob: no QP to exchange")
	}
	var ver [16]byte
	copy(ver[:], Version)
	t := s.timeout
	if t <= 0 || t > firstLimit {
		s.timeout = firstLimit
	}
	in, err := s.xchg(ver[:], 0)
	s.timeout = t
	if err != nil {
		return nil, 0, s.silent(err)
	}
	peer := string(bytes.TrimRight(in, "\x00"))
	if peer != Version {
		if len(peer) >= 5 && peer[4] == ':' {
			// ibv_rc_pingpong's exchange starts with its key message "LID:QPN:PSN:GID".
			return nil, 0, fmt.Errorf("oob: %w: the peer sent %q, the start of an ibv_rc_pingpong key message: it runs pingpong, so run pingpong here too", ErrVersion, peer)
		}
		return nil, 0, fmt.Errorf("oob: %w: the peer speaks %q, xroce speaks %q (perftest 4.5+0.17 as in Debian 12); use a matching perftest", ErrVersion, peer, Version)
	}
	var w [4]byte
	binary.BigEndian.PutUint32(w[:], 4096) // cycle buffer
	if _, err := s.xchg(w[:], 0); err != nil {
		return nil, 0, err
	}
	binary.BigEndian.PutUint32(w[:], 64) // cache line
	if _, err := s.xchg(w[:], 0); err != nil {
		return nil, 0, err
	}
	in, err = s.xchg([]byte{'0' + byte(mtu), 0}, 0)
	if err != nil {
		return nil, 0, err
	}
	peerMTU := roce.MTU(in[0] - '0')
	if !peerMTU.Valid() || in[1] != 0 {
		return nil, 0, fmt.Errorf("oob: the peer sent MTU %q, not an IB MTU enum", in)
	}
	if s.ch != nil && s.DataConnect != nil {
		if err := s.dataConnect(); err != nil {
			return nil, 0, err
		}
	}
	s.local = s.local[:0]
	for _, d := range local {
		s.local = append(s.local, s.marshal(d))
	}
	remote := make([]Dest, len(local))
	for i, k := range s.local {
		in, err = s.xchg(k, 0)
		if err != nil {
			return nil, 0, err
		}
		if remote[i], err = s.parse(in); err != nil {
			return nil, 0, fmt.Errorf("%w (QP %d of %d: both sides need the same -q)", err, i+1, len(local))
		}
	}
	s.remote = remote
	return remote, peerMTU, nil
}

// Sync is a barrier: the first QP's key message exchanged again.
func (s *Session) Sync() error { return s.again(0) }

// again exchanges QP i's key message again; the peer's must be the one it sent in
// the handshake, or the two sides are out of step.
func (s *Session) again(i int) error {
	in, err := s.xchg(s.local[i], 0)
	if err != nil {
		return err
	}
	if d, err := s.parse(in); err != nil || d != s.remote[i] {
		return fmt.Errorf("oob: the peer's exchange is out of step: where its key message of QP %d belongs it sent %q; give both sides the same -q and -a", i+1, in)
	}
	return nil
}

// syncEach exchanges every QP's key message again, in order, as perftest's second
// handshake loop does; a peer with another number of QPs shows here.
func (s *Session) syncEach() error {
	for i := range s.local {
		if err := s.again(i); err != nil {
			return err
		}
	}
	return nil
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

// Kind returns the test kind the session runs the exchange of.
func (s *Session) Kind() Kind { return s.kind }

// Close ends the exchange as the test kind does and closes the connection: after
// bandwidth tests, read_lat and send_lat each side writes "done" (perftest's
// ctx_close_connection writes it and closes without reading the peer's, so reading
// it is best effort).
func (s *Session) Close() error {
	if s.ch != nil {
		return nil // rdma_cm: no "done"; the connections end when the caller closes them
	}
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

// Connect runs the part of the sequence before the test (before the first size with
// -a): the handshake with one key message per QP, toRTS (which moves the QPs to RTR
// and RTS, and posts the receives of the first size), then the barriers perftest
// has before its test.
func (s *Session) Connect(local []Dest, mtu roce.MTU, toRTS func(remote []Dest, mtu roce.MTU) error) ([]Dest, roce.MTU, error) {
	remote, peerMTU, err := s.Handshake(local, mtu)
	if err != nil {
		return nil, 0, err
	}
	if err := toRTS(remote, roce.MinMTU(mtu, peerMTU)); err != nil {
		return nil, 0, err
	}
	// write/read/atomic bw: every key again, then k0; the others: k0, every key
	// again, then k0 (for send_bw and send_lat the barrier before the first size).
	steps := []func() error{s.syncEach, s.Sync}
	if s.kind != BW {
		steps = []func() error{s.Sync, s.syncEach, s.Sync}
	}
	if s.kind == BW && s.Duplex {
		steps = append(steps, s.Sync) // before the first size
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, 0, err
		}
	}
	s.begun = true
	return remote, peerMTU, nil
}

// NextSize runs what perftest exchanges between two sizes of a -a run: send_bw has
// a barrier after each size and one before the next, send_lat (and the other
// bandwidth tests with -b) one before the next; the other tests none. prepare runs before the barrier that starts the next size
// (receivers post their receives there).
func (s *Session) NextSize(prepare func() error) error {
	if s.kind == SendBW {
		if err := s.Sync(); err != nil {
			return err
		}
	}
	if err := prepare(); err != nil {
		return err
	}
	if s.kind == SendBW || s.kind == SendLat || s.kind == BW && s.Duplex {
		return s.Sync()
	}
	return nil
}

// AfterSize runs what a -b run exchanges after each size: for write/read/atomic
// bw a barrier with -a, then both sides' results (send_bw: the results, not with
// -D). It returns the peer's results, or r unchanged (and no exchange) without
// -b or where perftest exchanges none.
func (s *Session) AfterSize(r Results) (Results, bool, error) {
	if !s.Duplex || s.kind == SendBW && s.Duration {
		return r, false, nil
	}
	if s.kind == BW && s.RunAll {
		if err := s.Sync(); err != nil {
			return Results{}, false, err
		}
	}
	got, err := s.ExchangeResults(r)
	return got, err == nil, err
}

// Finish runs the part after the test (after the last size with -a): for write,
// read and atomic bw the barrier, the results block, the closing barrier and "done"
// (with -b only the closing barrier and "done");
// send_bw (after its -a barrier), read_lat and send_lat a barrier and "done";
// write_lat just closes.
func (s *Session) Finish(r Results) (Results, error) {
	switch {
	case s.kind == BW && s.Duplex: // ctx_close_connection: a barrier, then "done"
		if err := s.Sync(); err != nil {
			return Results{}, err
		}
		return r, s.Close()
	}
	switch s.kind {
	case Lat:
		return r, s.Close()
	case SendBW, ReadLat, SendLat: // perftest's ctx_close_connection: a barrier, then "done"
		if s.kind == SendBW && s.RunAll {
			if err := s.Sync(); err != nil {
				return Results{}, err
			}
		}
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

// DestLen is the size of perftest 4.5's struct pingpong_dest, the key message of
// its rdma_cm exchange.
const DestLen = 56

// MarshalDest renders d as perftest's rdma_write_keys sends it under -R: struct
// pingpong_dest with every integer big-endian: lid, out_reads, qpn, psn, rkey, 4
// bytes of padding, vaddr, the raw GID, srqn and gid_index (0 here; the reader
// ignores it).
func (d Dest) MarshalDest() []byte {
	b := make([]byte, DestLen)
	be := binary.BigEndian
	be.PutUint32(b[0:], uint32(d.LID))
	be.PutUint32(b[4:], uint32(d.OutReads))
	be.PutUint32(b[8:], d.QPN)
	be.PutUint32(b[12:], d.PSN)
	be.PutUint32(b[16:], d.RKey)
	be.PutUint64(b[24:], d.VAddr)
	copy(b[32:48], d.GID[:])
	be.PutUint32(b[48:], d.SRQN)
	return b
}

// ParseDest reads a struct pingpong_dest as perftest's rdma_read_keys does, lid
// to the GID (not gid_index nor the padding), and srqn, which perftest's reader
// skips and sends as 0 without an SRQ: xroce's --verify-all mark and -n.
func ParseDest(b []byte) (Dest, error) {
	if len(b) != DestLen {
		return Dest{}, fmt.Errorf("oob: rdma_cm key message of %d bytes, want %d (struct pingpong_dest of perftest 4.5)", len(b), DestLen)
	}
	be := binary.BigEndian
	d := Dest{LID: uint16(be.Uint32(b[0:])), OutReads: int(be.Uint32(b[4:])), QPN: be.Uint32(b[8:]) & 0xFFFFFF,
		PSN: be.Uint32(b[12:]) & 0xFFFFFF, RKey: be.Uint32(b[16:]), VAddr: be.Uint64(b[24:]), SRQN: be.Uint32(b[48:])}
	copy(d.GID[:], b[32:48])
	return d, nil
}

// marshal and parse are the session's key message format: text on TCP, struct
// pingpong_dest on a Channel.
func (s *Session) marshal(d Dest) []byte {
	if s.ch != nil {
		return d.MarshalDest()
	}
	return d.MarshalKey()
}

func (s *Session) parse(b []byte) (Dest, error) {
	if s.ch != nil {
		return ParseDest(b)
	}
	return ParseKey(b)
}

// dataConnect is perftest's create_rdma_cm_connection: a hand-shake of zeros
// (my_dest is not filled in yet), the test QPs' connections, another.
func (s *Session) dataConnect() error {
	zero := make([]byte, DestLen)
	if _, err := s.xchg(zero, 0); err != nil {
		return err
	}
	if err := s.DataConnect(); err != nil {
		return err
	}
	_, err := s.xchg(zero, 0)
	return err
}
