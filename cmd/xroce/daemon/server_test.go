package daemon

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xroce/xroce/roce"
)

type fakeSource struct{ mac [6]byte }

func (f fakeSource) Name() string           { return "xrocetest0" }
func (f fakeSource) Ifname() string         { return "veth9" }
func (f fakeSource) Ifindex() int           { return 9 }
func (f fakeSource) DeviceAttr() DeviceAttr { return RXEDeviceAttr(f.mac) }
func (f fakeSource) PortAttr() PortAttr     { return RXEPortAttr(true, roce.MTU1024, 10000) }
func (f fakeSource) GIDTable() roce.GIDTable {
	return roce.BuildGIDTable(f.mac, []netip.Addr{netip.MustParseAddr("10.81.0.11")})
}
func (f fakeSource) Counters() []Counter { return []Counter{{"sent_pkts", 7}, {"rcvd_pkts", 9}} }

// start serves a fake device in a temporary run directory.
func start(t *testing.T) (*Server, func()) {
	t.Helper()
	s, err := Listen(fakeSource{[6]byte{0x52, 0x54, 0, 0x81, 0, 0x0b}}, Options{Dir: t.TempDir(), Log: log.New(io.Discard, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	return s, func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Serve did not return after cancel")
		}
	}
}

func TestOps(t *testing.T) {
	s, stop := start(t)
	defer stop()
	c, hello, err := Dial(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if hello.DeviceName() != "xrocetest0" || hello.Interface() != "veth9" || hello.NodeGUID != 0x505400fffe81000b {
		t.Errorf("hello: %+v", hello)
	}
	var a DeviceAttr
	if err := c.Call(OpQueryDevice, nil, &a); err != nil {
		t.Fatal(err)
	}
	if a.VendorID != 0xffffff || a.PhysPortCnt != 1 || cstr(a.FwVer[:]) != "0.0.0" {
		t.Errorf("device: %+v", a)
	}
	var p PortAttr
	if err := c.Call(OpQueryPort, &PortReq{Port: 1}, &p); err != nil {
		t.Fatal(err)
	}
	if p.State != PortActive || p.ActiveMTU != 3 || p.LinkLayer != LinkLayerEth || p.ActiveWidth != 1 || p.ActiveSpeed != 8 {
		t.Errorf("port: %+v", p)
	}
	var e *Error
	if err := c.Call(OpQueryPort, &PortReq{Port: 2}, &p); !errors.As(err, &e) || e.Errno != unix.EINVAL {
		t.Errorf("port 2: %v", err)
	}
	for i, want := range []string{"fe80::5054:ff:fe81:b", "::ffff:10.81.0.11", "::"} {
		var g GIDReply
		if err := c.Call(OpQueryGID, &GIDReq{Port: 1, Index: uint32(i)}, &g); err != nil {
			t.Fatal(err)
		}
		if got := netip.AddrFrom16(g.Raw).String(); got != want || (g.Valid == 1) != (i < 2) || i < 2 && g.Type != GIDTypeRoCEv2 {
			t.Errorf("GID %d: %s %+v, want %s", i, got, g, want)
		}
	}
	if err := c.Call(OpQueryGID, &GIDReq{Port: 1, Index: GIDTableLen}, nil); !errors.As(err, &e) || e.Errno != unix.EINVAL {
		t.Errorf("GID index 1024: %v", err)
	}
	cs, err := c.Counters()
	if err != nil || len(cs) != 2 || cs[0] != (Counter{"sent_pkts", 7}) {
		t.Errorf("counters: %v %v", cs, err)
	}
	cl, err := c.Clients()
	if err != nil || len(cl) != 1 || cl[0].PID != uint32(os.Getpid()) {
		t.Errorf("clients: %v %v", cl, err)
	}
}

// TestGarbage sends malformed messages: each gets an error reply (or, for an
// empty datagram, the session ends), and the daemon keeps serving.
func TestGarbage(t *testing.T) {
	s, stop := start(t)
	defer stop()
	c, _, err := Dial(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hdr := func(op, n uint16, seq uint32) []byte {
		b := binary.LittleEndian.AppendUint16(nil, op)
		b = binary.LittleEndian.AppendUint16(b, n)
		return binary.LittleEndian.AppendUint32(b, seq)
	}
	cases := []struct {
		name  string
		m     []byte
		errno unix.Errno
	}{
		{"short", []byte{1, 2, 3}, unix.EBADMSG},
		{"length mismatch", append(hdr(OpQueryPort, 40, 1), 1, 0, 0, 0), unix.EBADMSG},
		{"short body", append(hdr(OpQueryPort, 2, 2), 1, 0), unix.EBADMSG},
		{"long body", append(hdr(OpQueryGID, 12, 3), make([]byte, 12)...), unix.EBADMSG},
		{"body on query device", append(hdr(OpQueryDevice, 1, 4), 0), unix.EBADMSG},
		{"unknown op", hdr(0x7777, 0, 5), unix.EOPNOTSUPP},
		{"reply op", hdr(OpHello|ReplyBit, 0, 6), unix.EOPNOTSUPP},
		{"bad version", append(hdr(OpHello, 8, 7), 99, 0, 0, 0, 0, 0, 0, 0), unix.EPROTO},
		{"oversize", make([]byte, MaxMessage+100), unix.EMSGSIZE},
	}
	for _, tc := range cases {
		h, p, err := c.Raw(tc.m)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if h.Op&ReplyBit == 0 || len(p) < 4 || unix.Errno(binary.LittleEndian.Uint32(p)) != tc.errno {
			t.Errorf("%s: reply %+v %q, want errno %v", tc.name, h, p, tc.errno)
		}
	}
	// Random bytes on other connections, some of which close mid-way.
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		conn, err := net.Dial("unixpacket", s.Path())
		if err != nil {
			t.Fatal(err)
		}
		m := make([]byte, 1+r.IntN(64))
		for j := range m {
			m[j] = byte(r.Uint32())
		}
		if i%3 == 0 && len(m) >= 8 {
			binary.LittleEndian.PutUint16(m[2:], uint16(len(m)-8)) // a valid length: reaches the op handlers
		}
		if _, err := conn.Write(m); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := conn.Read(make([]byte, MaxMessage)); err != nil {
				t.Fatalf("message %d: no reply: %v", i, err)
			}
		}
		conn.Close()
	}
	// An empty datagram ends that session only.
	conn, err := net.Dial("unixpacket", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = conn.Write(nil)
	conn.Close()
	// The first session still works.
	var a DeviceAttr
	if err := c.Call(OpQueryDevice, nil, &a); err != nil {
		t.Fatalf("after garbage: %v", err)
	}
}

func TestCloseRemovesSocket(t *testing.T) {
	s, stop := start(t)
	c, _, err := Dial(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := os.Stat(s.Path()); err != nil {
		t.Fatal(err)
	}
	stop()
	if _, err := os.Stat(s.Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket still there after shutdown: %v", err)
	}
	if _, _, err := Dial(s.Path()); err == nil {
		t.Error("dial after shutdown succeeded")
	}
	// The connected client sees the end of its session, not a hang.
	c.Timeout = 2 * time.Second
	if err := c.Call(OpQueryDevice, nil, nil); err == nil {
		t.Error("call after shutdown succeeded")
	}
}

func TestFreeNameAndStale(t *testing.T) {
	dir := t.TempDir()
	if n := FreeName(dir); n != "xroce0" {
		t.Errorf("FreeName = %s", n)
	}
	// A stale socket file (no listener) does not take the name.
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: SocketPath(dir, "xroce0"), Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	if n := FreeName(dir); n != "xroce1" {
		t.Errorf("FreeName with xroce0 live = %s", n)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if n := FreeName(dir); n != "xroce0" {
		t.Errorf("FreeName with xroce0 stale = %s", n)
	}
	if ds, _ := Devices(dir); len(ds) != 1 || ds[0] != "xroce0" {
		t.Errorf("Devices = %v", ds)
	}
	// A daemon takes a stale socket of its name over and says so.
	var logged strings.Builder
	src := fakeSource{[6]byte{0x52, 0x54, 0, 0x81, 0, 0x0b}}
	ln, err = net.ListenUnix("unixpacket", &net.UnixAddr{Name: SocketPath(dir, src.Name()), Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	srv, err := Listen(src, Options{Dir: dir, Log: log.New(&logged, "", 0)})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if want := src.Name() + ": took over the socket a daemon that no longer answers left at " + SocketPath(dir, src.Name()) + "\n"; logged.String() != want {
		t.Errorf("log %q, want %q", logged.String(), want)
	}
}

func TestEthSpeed(t *testing.T) {
	for _, c := range []struct {
		mbps         int
		width, speed uint8
	}{{0, 1, 1}, {-1, 1, 1}, {1000, 1, 1}, {10000, 1, 8}, {20000, 2, 2}, {25000, 1, 32}, {40000, 2, 8}, {100000, 2, 32}} {
		if w, s := EthSpeed(c.mbps); w != c.width || s != c.speed {
			t.Errorf("EthSpeed(%d) = %d %d, want %d %d", c.mbps, w, s, c.width, c.speed)
		}
	}
}
