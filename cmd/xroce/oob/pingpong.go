package oob

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/xroce/xroce/roce"
)

// PingpongDest is ibv_rc_pingpong's connection message (rdma-core
// libibverbs/examples/rc_pingpong.c): "%04x:%06x:%06x:%s" of LID, QPN, PSN and the
// GID as 32 hex digits, sent with its NUL: 52 bytes.
type PingpongDest struct {
	LID uint16
	QPN uint32
	PSN uint32
	GID roce.GID
}

const pingpongMsgLen = 4 + 1 + 6 + 1 + 6 + 1 + 32 + 1

// Marshal renders the message.
func (d PingpongDest) Marshal() []byte {
	return append([]byte(fmt.Sprintf("%04x:%06x:%06x:%s", d.LID, d.QPN&0xFFFFFF, d.PSN&0xFFFFFF, hex.EncodeToString(d.GID[:]))), 0)
}

// ParsePingpong parses the message.
func ParsePingpong(b []byte) (PingpongDest, error) {
	if len(b) != pingpongMsgLen {
		return PingpongDest{}, fmt.Errorf("oob: rc_pingpong message of %d bytes, want %d", len(b), pingpongMsgLen)
	}
	if b[len(b)-1] != 0 {
		return PingpongDest{}, fmt.Errorf("oob: rc_pingpong message %q does not end in NUL", b)
	}
	f := strings.Split(string(b[:len(b)-1]), ":")
	if len(f) != 4 || len(f[3]) != 32 {
		return PingpongDest{}, fmt.Errorf("oob: malformed rc_pingpong message %q", b)
	}
	var d PingpongDest
	lid, err1 := strconv.ParseUint(f[0], 16, 16)
	qpn, err2 := strconv.ParseUint(f[1], 16, 24)
	psn, err3 := strconv.ParseUint(f[2], 16, 24)
	gid, err4 := hex.DecodeString(f[3])
	for _, err := range []error{err1, err2, err3, err4} {
		if err != nil {
			return PingpongDest{}, fmt.Errorf("oob: malformed rc_pingpong message %q: %v", b, err)
		}
	}
	d.LID, d.QPN, d.PSN = uint16(lid), uint32(qpn), uint32(psn)
	copy(d.GID[:], gid)
	return d, nil
}

// shortMessage names a peer that sent the first bytes b of an exchange message
// and then nothing more within the limit (err a timeout); other errors pass.
func (s *Session) shortMessage(b []byte, err error) error {
	if !errors.Is(err, errTimedOut) {
		return err
	}
	return fmt.Errorf("oob: %s sent %d bytes (%q), then nothing for %v: ibv_rc_pingpong's exchange message is %d bytes (LID:QPN:PSN:GID in hex, then NUL); run ibv_*_pingpong or xroce pingpong there, or choose another port (-p)",
		s.peer(), len(b), b, s.timeout, pingpongMsgLen)
}

// PingpongExchange sends local and returns the peer's message, as rc_pingpong's
// pp_client_exch_dest and pp_server_exch_dest do: the client writes its message,
// reads the server's and writes "done"; the server reads the client's, connects,
// answers, and reads the "done". connect (may be nil) brings the QP to RTS toward
// the peer: the server calls it before it answers, as pp_server_exch_dest calls
// pp_connect_ctx before writing, so the server's QP is ready before the client can
// send; the client calls it after the exchange. The connection is then closed.
func PingpongExchange(c net.Conn, client bool, local PingpongDest, timeout time.Duration, connect func(PingpongDest) error) (PingpongDest, error) {
	defer c.Close()
	if connect == nil {
		connect = func(PingpongDest) error { return nil }
	}
	s := &Session{conn: c, opened: time.Now(), client: client, timeout: min(timeout, firstLimit)} // each message comes at once
	write := func(b []byte) error {
		s.deadline()
		if _, err := c.Write(b); err != nil {
			return s.ioErr("writing", err)
		}
		return nil
	}
	read := func(n int) ([]byte, error) {
		s.deadline()
		b := make([]byte, n)
		if k, err := io.ReadFull(c, b); err != nil {
			return b[:k], s.ioErr("reading", err) // what came before the error
		}
		return b, nil
	}
	readPeer := func() (PingpongDest, error) {
		// A perftest peer sends its 16-byte version field first and waits for
		// ours: look at the first 16 bytes before waiting for the rest.
		head, err := read(versionLen)
		if err != nil && len(head) == 0 {
			return PingpongDest{}, s.silent(err)
		}
		if err != nil {
			return PingpongDest{}, s.shortMessage(head, err)
		}
		if v, ok := perftestVersion(head); ok {
			return PingpongDest{}, fmt.Errorf("oob: the peer sent %q, perftest's version field: it runs a perftest tool (send_lat, write_bw, ...), not ibv_rc_pingpong; run pingpong on both sides", v)
		}
		rest, err := read(pingpongMsgLen - versionLen)
		if err != nil {
			return PingpongDest{}, s.shortMessage(append(head, rest...), err)
		}
		d, err := ParsePingpong(append(head, rest...))
		if err != nil {
			return PingpongDest{}, fmt.Errorf("%w: %s is not ibv_rc_pingpong's exchange (LID:QPN:PSN:GID in hex); run ibv_*_pingpong or xroce pingpong there, or choose another port (-p)", err, c.RemoteAddr())
		}
		return d, nil
	}
	if client {
		if err := write(local.Marshal()); err != nil {
			return PingpongDest{}, err
		}
		peer, err := readPeer()
		if err != nil {
			return PingpongDest{}, err
		}
		if peer == local {
			return PingpongDest{}, fmt.Errorf("oob: %s sent back this side's own key message (QPN 0x%06x, PSN 0x%06x, GID %s): it echoes what it gets, and is no ibv_rc_pingpong server; check the address and port (-p)", c.RemoteAddr(), local.QPN, local.PSN, local.GID)
		}
		if err := write([]byte("done\x00")); err != nil {
			return PingpongDest{}, err
		}
		return peer, connect(peer)
	}
	peer, err := readPeer()
	if err != nil {
		return PingpongDest{}, err
	}
	if err := connect(peer); err != nil {
		return PingpongDest{}, err
	}
	if err := write(local.Marshal()); err != nil {
		return PingpongDest{}, err
	}
	b, err := read(5)
	if err != nil {
		return PingpongDest{}, err
	}
	if string(b) != "done\x00" {
		return PingpongDest{}, fmt.Errorf("oob: rc_pingpong client sent %q, not \"done\"", b)
	}
	return peer, nil
}

// versionLen is the length of perftest's version field.
const versionLen = 16

// perftestVersion reports whether b is perftest's NUL-padded version field (such
// as "6.06"), and the version.
func perftestVersion(b []byte) (string, bool) {
	v, pad, _ := strings.Cut(string(b), "\x00")
	if strings.Trim(pad, "\x00") != "" {
		return "", false
	}
	major, minor, ok := strings.Cut(v, ".")
	if !ok {
		return "", false
	}
	for _, part := range []string{major, minor} {
		if _, err := strconv.ParseUint(part, 10, 16); err != nil {
			return "", false
		}
	}
	return v, true
}
