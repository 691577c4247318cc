package oob

import (
	"io"
	"net"
	"testing"
	"time"
)

// TestEndedUnclosed: a connection whose peer closed it (FIN: this side in
// CLOSE_WAIT) ended by the peer's choice; one the peer's kernel reset (SO_LINGER 0,
// as a restarted host answers) ended unclosed, as one whose keepalives went
// unanswered (TCP_CLOSE either way).
func TestEndedUnclosed(t *testing.T) {
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
		if _, err := c.Read(make([]byte, 1)); err == nil || (!reset && err != io.EOF) {
			t.Fatalf("reset %v: read %v", reset, err)
		}
		if got := endedUnclosed(c); got != reset {
			t.Errorf("reset %v: endedUnclosed %v", reset, got)
		}
		c.Close()
	}
}
