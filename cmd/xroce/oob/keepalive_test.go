package oob

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestPeerEndNotUnanswered: a connection whose peer closed it (FIN: this side in
// CLOSE_WAIT) or reset it (SO_LINGER 0, as a peer that exits with unread data
// does: TCP_CLOSE, no probes out) is not one whose keepalives went unanswered, and
// its error says the peer closed the exchange. TestCutOffPeerEnds (cmd/xroce)
// covers the unanswered keepalives, which need a host cut off.
func TestPeerEndNotUnanswered(t *testing.T) {
	for _, reset := range []bool{false, true} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		peer, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c, err := ln.Accept()
		ln.Close()
		if err != nil {
			t.Fatal(err)
		}
		if reset {
			_ = peer.(*net.TCPConn).SetLinger(0)
		}
		peer.Close()
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err = c.Read(make([]byte, 1))
		if err == nil || (!reset && err != io.EOF) {
			t.Fatalf("reset %v: read %v", reset, err)
		}
		if keepalivesUnanswered(c) {
			t.Errorf("reset %v: keepalivesUnanswered", reset)
		}
		s := &Session{conn: c}
		if msg := s.ioErr("reading", err).Error(); !strings.Contains(msg, "closed the exchange early: the peer exited or failed") {
			t.Errorf("reset %v: %s", reset, msg)
		}
		if msg := s.ioErr("reading", err).Error(); strings.HasSuffix(msg, resetNote(keepAliveSpan)) != reset {
			t.Errorf("reset %v: the note on resets: %s", reset, msg)
		}
		// A connection younger than the keepalives' span cannot have been reset by
		// them: no note.
		young := &Session{conn: c, opened: time.Now()}
		if msg := young.ioErr("reading", err).Error(); strings.Contains(msg, "keepalives unanswered") {
			t.Errorf("reset %v, a young connection: %s", reset, msg)
		}
		c.Close()
	}
}
