package daemon

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// Client is a control-socket session, for `xroce daemon status` and tests (the
// verbs library speaks the same protocol in C).
type Client struct {
	conn    *net.UnixConn
	path    string
	seq     uint32
	Timeout time.Duration // per request; 0 means 5 s
}

// Error is a non-zero status from the daemon.
type Error struct {
	Errno unix.Errno
	Msg   string
}

func (e *Error) Error() string { return fmt.Sprintf("%s (%v)", e.Msg, e.Errno) }

// ErrRefused is Dial's error when the daemon's socket does not let this user in:
// the daemon serves only its own user and root unless started with --any-user.
var ErrRefused = errors.New("permission denied")

// Dial connects to the socket at path and says hello.
func Dial(path string) (*Client, *HelloReply, error) {
	c, err := net.DialTimeout("unixpacket", path, 5*time.Second)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ECONNREFUSED) {
			return nil, nil, fmt.Errorf("no xroce daemon at %s: start one with `xroce daemon -d IFACE`", path)
		}
		if errors.Is(err, os.ErrPermission) {
			return nil, nil, fmt.Errorf("%w: the daemon at %s serves only its own user and root (start it with --any-user to serve every user)", ErrRefused, path)
		}
		return nil, nil, err
	}
	cl := &Client{conn: c.(*net.UnixConn), path: path}
	var r HelloReply
	if err := cl.Call(OpHello, &HelloReq{Version: ProtoVersion}, &r); err != nil {
		cl.Close()
		return nil, nil, err
	}
	return cl, &r, nil
}

// Close ends the session.
func (c *Client) Close() error { return c.conn.Close() }

// Raw sends m as one message and returns the reply's header and payload (status
// included), for tests.
func (c *Client) Raw(m []byte) (Header, []byte, error) {
	t := c.Timeout
	if t == 0 {
		t = 5 * time.Second
	}
	_ = c.conn.SetDeadline(time.Now().Add(t))
	if _, err := c.conn.Write(m); err != nil {
		return Header{}, nil, err
	}
	buf := make([]byte, MaxMessage+1)
	n, err := c.conn.Read(buf)
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			return Header{}, nil, fmt.Errorf("the xroce daemon at %s did not answer in %v: is it alive? (stopped with SIGSTOP, or busy; restart it with `xroce daemon -d IFACE`)", c.path, t)
		}
		return Header{}, nil, err
	}
	return ParseHeader(buf[:n])
}

// Call sends op with body (a fixed-size struct or nil) and decodes the reply body
// into out (a pointer to a fixed-size struct, a *[]byte for the raw body, or nil).
func (c *Client) Call(op uint16, body, out any) error {
	c.seq++
	m, err := Encode(op, c.seq, body)
	if err != nil {
		return err
	}
	h, p, err := c.Raw(m)
	if err != nil {
		return err
	}
	if h.Op != op|ReplyBit || h.Seq != c.seq {
		return fmt.Errorf("reply op 0x%x seq %d to op %d seq %d", h.Op, h.Seq, op, c.seq)
	}
	if len(p) < 4 {
		return fmt.Errorf("reply without a status")
	}
	if st := binary.LittleEndian.Uint32(p); st != 0 {
		return &Error{unix.Errno(st), string(p[4:])}
	}
	switch v := out.(type) {
	case nil:
		return nil
	case *[]byte:
		*v = p[4:]
		return nil
	default:
		return decodeBody(p[4:], out)
	}
}

// Counters returns the device's counters.
func (c *Client) Counters() ([]Counter, error) {
	var b []byte
	if err := c.Call(OpCounters, nil, &b); err != nil {
		return nil, err
	}
	var es []CounterEntry
	if err := readList(b, &es); err != nil {
		return nil, err
	}
	out := make([]Counter, len(es))
	for i, e := range es {
		out[i] = Counter{cstr(e.Name[:]), e.Value}
	}
	return out, nil
}

// Clients returns the connected clients (this session included).
func (c *Client) Clients() ([]ClientEntry, error) {
	var b []byte
	if err := c.Call(OpClients, nil, &b); err != nil {
		return nil, err
	}
	var es []ClientEntry
	return es, readList(b, &es)
}

// readList decodes a uint32 count followed by that many fixed-size entries.
func readList[T any](b []byte, out *[]T) error {
	if len(b) < 4 {
		return fmt.Errorf("list without a count")
	}
	n := binary.LittleEndian.Uint32(b)
	var zero T
	if sz := binary.Size(zero); uint64(len(b)-4) != uint64(n)*uint64(sz) {
		return fmt.Errorf("list of %d entries in %d bytes", n, len(b)-4)
	}
	*out = make([]T, n)
	return binary.Read(bytes.NewReader(b[4:]), binary.LittleEndian, *out)
}

// DeviceName returns the NUL-padded device name of a HelloReply.
func (r *HelloReply) DeviceName() string { return cstr(r.Name[:]) }

// Interface returns the network interface of a HelloReply.
func (r *HelloReply) Interface() string { return cstr(r.Ifname[:]) }

// CallFD is Call with a descriptor passed along (SCM_RIGHTS), as OpRegMR and
// OpCreateChannel take one; for tests.
func (c *Client) CallFD(op uint16, body any, fd int, out any) error {
	fds, err := c.CallFDs(op, body, []int{fd}, out)
	closeAll(fds)
	return err
}

// CallFDs is Call with the descriptors send passed along, returning the
// descriptors the reply carries (OpCreateCQ's ring, OpCreateQP's rings and
// doorbell); the caller closes them. For tests.
func (c *Client) CallFDs(op uint16, body any, send []int, out any) ([]int, error) {
	c.seq++
	m, err := Encode(op, c.seq, body)
	if err != nil {
		return nil, err
	}
	_ = c.conn.SetDeadline(time.Now().Add(5 * time.Second))
	var oob []byte
	if len(send) > 0 {
		oob = unix.UnixRights(send...)
	}
	if _, _, err := c.conn.WriteMsgUnix(m, oob, nil); err != nil {
		return nil, err
	}
	buf := make([]byte, MaxMessage+1)
	roob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, _, _, err := c.conn.ReadMsgUnix(buf, roob)
	if err != nil {
		return nil, err
	}
	fds := rights(roob[:oobn])
	h, p, err := ParseHeader(buf[:n])
	if err == nil && (h.Op != op|ReplyBit || h.Seq != c.seq || len(p) < 4) {
		err = fmt.Errorf("reply op 0x%x seq %d to op %d seq %d", h.Op, h.Seq, op, c.seq)
	}
	if err == nil {
		if st := binary.LittleEndian.Uint32(p); st != 0 {
			err = &Error{unix.Errno(st), string(p[4:])}
		} else if out != nil {
			err = decodeBody(p[4:], out)
		}
	}
	if err != nil {
		closeAll(fds)
		return nil, err
	}
	return fds, nil
}
