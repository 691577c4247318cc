// Package daemon is xroce's device daemon: it serves one xroce device (an engine on
// a network interface) to local processes over a unix SOCK_SEQPACKET control
// socket, RUNDIR/NAME.sock, that the verbs library (cmd/libxroce) and `xroce daemon
// status` talk to with the protocol in proto.go. RUNDIR is /run/xroce, or
// $XROCE_RUN_DIR.
package daemon

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultRunDir is where daemons put their sockets unless $XROCE_RUN_DIR says
// otherwise.
const DefaultRunDir = "/run/xroce"

// RunDir returns $XROCE_RUN_DIR, or DefaultRunDir.
func RunDir() string {
	if d := os.Getenv("XROCE_RUN_DIR"); d != "" {
		return d
	}
	return DefaultRunDir
}

// SocketPath is the control socket of device name in dir.
func SocketPath(dir, name string) string { return filepath.Join(dir, name+".sock") }

// Options configure a Server.
type Options struct {
	Dir string // the run directory; "" means RunDir()
	// AnyUser lets processes of every user connect (socket mode 0666); by default
	// the socket is 0600 and only the daemon's own user and root are served.
	AnyUser bool
	Log     *log.Logger // nil: stderr
}

// Server serves one device's control socket.
type Server struct {
	src     Source
	opts    Options
	path    string
	ln      *net.UnixListener
	log     *log.Logger
	mu      sync.Mutex
	clients map[*client]struct{}
	wg      sync.WaitGroup
	closed  bool
}

type client struct {
	conn   *net.UnixConn
	pid    uint32
	uid    uint32
	since  time.Time
	sess   *session // nil when the source has no engine
	counts objCounts
}

// Listen creates the run directory (0755) and the device's socket. A socket file
// left by a daemon that died is replaced; one a live daemon answers on is an
// error.
func Listen(src Source, o Options) (*Server, error) {
	if o.Dir == "" {
		o.Dir = RunDir()
	}
	if o.Log == nil {
		o.Log = log.New(os.Stderr, "xroce daemon: ", log.LstdFlags)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, runDirError(o.Dir, err)
	}
	// The directory's lock orders the check, the removal of a stale socket and the
	// bind against other daemons starting at the same moment.
	lock, err := os.OpenFile(filepath.Join(o.Dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, runDirError(o.Dir, err)
	}
	defer lock.Close() // releases the lock
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return nil, err
	}
	path := SocketPath(o.Dir, src.Name())
	if alive(path) {
		return nil, fmt.Errorf("%w: device %s is already served at %s (xroce daemon status lists the devices; --name gives another)", ErrNameTaken, src.Name(), path)
	}
	if err := os.Remove(path); err == nil { // a stale socket: its daemon died (kill -9, a crash)
		o.Log.Printf("%s: took over the socket a daemon that no longer answers left at %s", src.Name(), path)
	}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("%w: another xroce daemon took %s at %s at the same moment: give each daemon its own --name (or, one per network namespace, its own XROCE_RUN_DIR)", ErrNameTaken, src.Name(), path)
	}
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(true)
	mode := os.FileMode(0o600)
	if o.AnyUser {
		mode = 0o666
	}
	if err := os.Chmod(path, mode); err != nil {
		ln.Close()
		return nil, err
	}
	return &Server{src: src, opts: o, path: path, ln: ln, log: o.Log, clients: map[*client]struct{}{}}, nil
}

// runDirError names the fix when the run directory is another user's (root's
// /run/xroce, for a daemon started by a user on --link udp).
func runDirError(dir string, err error) error {
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("%w: the run directory %s is not this user's: set XROCE_RUN_DIR to a directory of yours, for the daemon and for the applications and xroce stat alike", err, dir)
	}
	return err
}

// ErrNameTaken is Listen's error when another daemon bound the same name first.
var ErrNameTaken = errors.New("device name taken")

// alive reports whether something accepts connections at path.
func alive(path string) bool {
	c, err := net.DialTimeout("unixpacket", path, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// FreeName returns the first xroceN (N = 0, 1, …) that no live daemon serves in dir.
func FreeName(dir string) string {
	for i := 0; ; i++ {
		n := fmt.Sprintf("xroce%d", i)
		if !alive(SocketPath(dir, n)) {
			return n
		}
	}
}

// Path is the socket's path.
func (s *Server) Path() string { return s.path }

// Serve accepts clients until ctx ends or Close is called, then closes every
// client, removes the socket and returns.
func (s *Server) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { s.Close() })
	defer stop()
	if es, ok := s.src.(engineSource); ok {
		// The connection manager answers peers from the start: a REQ for a port
		// nobody listens on gets its REJ, not silence.
		if _, err := cmFor(es.Engine(), s.log.Printf); err != nil {
			s.log.Printf("no connection manager (librdmacm applications cannot connect): %v", err)
		}
	} // Close ends it, after the sessions

	for {
		c, err := s.ln.AcceptUnix()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				s.Close()
				s.wg.Wait()
				return nil
			}
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			s.log.Printf("accept: %v", err)
			time.Sleep(10 * time.Millisecond) // EMFILE and the like: do not spin
			continue
		}
		cl, err := s.admit(c)
		if err != nil {
			s.log.Printf("refused a client: %v", err)
			c.Close()
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveClient(cl)
		}()
	}
}

// admit reads the peer's credentials and applies the user policy.
func (s *Server) admit(c *net.UnixConn) (*client, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) { cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) }); err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, cerr
	}
	if !s.opts.AnyUser && cred.Uid != 0 && int(cred.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("pid %d of uid %d: only uid %d and root may use this device (start the daemon with --any-user to allow every user)", cred.Pid, cred.Uid, os.Geteuid())
	}
	cl := &client{conn: c, pid: uint32(cred.Pid), uid: cred.Uid, since: time.Now()}
	cl.sess = newSession(s.src, &cl.counts, s.log.Printf)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("shutting down")
	}
	s.clients[cl] = struct{}{}
	return cl, nil
}

// Close stops accepting, disconnects every client and removes the socket. It is
// safe to call more than once.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for c := range s.clients {
		c.conn.Close()
	}
	s.mu.Unlock()
	err := s.ln.Close() // removes the socket file (SetUnlinkOnClose)
	_ = os.Remove(s.path)
	// The sessions end (their connections disconnect: DREQs, REJs), then the
	// connection manager, while the engine still runs to send those last MADs.
	waitTimeout(&s.wg, 2*time.Second)
	if es, ok := s.src.(engineSource); ok {
		closeCM(es.Engine())
	}
	return err
}

// waitTimeout waits for wg, at most d.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// serveClient answers one client's requests in order until it disconnects. A
// malformed message gets an error reply; nothing a client sends ends the daemon.
func (s *Server) serveClient(c *client) {
	defer func() {
		c.sess.close() // the client's QPs, CQs, MRs: gone with its session
		s.mu.Lock()
		delete(s.clients, c)
		s.mu.Unlock()
		c.conn.Close()
	}()
	buf := make([]byte, MaxMessage+1)
	oob := make([]byte, unix.CmsgSpace(MRPieces*4))
	for {
		n, oobn, flags, _, err := c.conn.ReadMsgUnix(buf, oob)
		if err != nil || n == 0 && flags == 0 && oobn == 0 {
			return // closed by the peer (a zero-length read on SEQPACKET is EOF) or by Close
		}
		fds := rights(oob[:oobn])
		var reply []byte
		var out []int
		if flags&syscall.MSG_TRUNC != 0 || n > MaxMessage {
			closeAll(fds)
			reply = errReply(0, 0, unix.EMSGSIZE, fmt.Sprintf("message longer than %d bytes", MaxMessage))
		} else {
			reply, out = s.handle(c, buf[:n], fds)
		}
		var rights []byte
		if len(out) > 0 {
			rights = unix.UnixRights(out...)
		}
		_, _, err = c.conn.WriteMsgUnix(reply, rights, nil)
		closeAll(out) // the client has its own copies now
		if err != nil {
			return
		}
	}
}

// errReply is a reply with a non-zero status and a message.
func errReply(op uint16, seq uint32, errno unix.Errno, msg string) []byte {
	p := make([]byte, 4, 4+len(msg))
	binary.LittleEndian.PutUint32(p, uint32(errno))
	p = append(p, msg...)
	if len(p) > MaxMessage-HeaderSize {
		p = p[:MaxMessage-HeaderSize]
	}
	m, _ := Encode(op|ReplyBit, seq, p)
	return m
}

// okReply is a reply with status 0 and body (a fixed-size struct or bytes).
func okReply(op uint16, seq uint32, body any) []byte {
	var p []byte
	switch v := body.(type) {
	case []byte:
		p = v
	case nil:
	default:
		b := make([]byte, 0, binary.Size(v))
		var err error
		if p, err = binary.Append(b, binary.LittleEndian, v); err != nil {
			return errReply(op, seq, unix.EIO, err.Error())
		}
	}
	m, err := Encode(op|ReplyBit, seq, append(make([]byte, 4), p...))
	if err != nil {
		return errReply(op, seq, unix.EMSGSIZE, err.Error())
	}
	return m
}

// rights returns the descriptors an SCM_RIGHTS message carried (the kernel
// closes those that did not fit the control buffer).
func rights(oob []byte) []int {
	if len(oob) == 0 {
		return nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if f, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, f...)
		}
	}
	return fds
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// handle answers one message with a reply and the descriptors it carries.
func (s *Server) handle(c *client, m []byte, fds []int) ([]byte, []int) {
	h, p, err := ParseHeader(m)
	if err != nil {
		closeAll(fds)
		return errReply(h.Op, h.Seq, unix.EBADMSG, err.Error()), nil
	}
	if h.Op >= OpAllocPD && h.Op <= opLastSRQ || h.Op >= opFirstCMAppQP && h.Op <= opLastCMAppQP {
		return c.sess.handle(h.Op, h.Seq, p, fds)
	}
	closeAll(fds)
	return s.handleDevice(h, p), nil
}

// handleDevice answers the device-wide ops: hello, queries, counters, clients.
func (s *Server) handleDevice(h Header, p []byte) []byte {
	switch h.Op {
	case OpHello:
		var req HelloReq
		if err := decodeBody(p, &req); err != nil {
			return errReply(h.Op, h.Seq, unix.EBADMSG, "hello: "+err.Error())
		}
		if req.Version != ProtoVersion {
			return errReply(h.Op, h.Seq, unix.EPROTO, fmt.Sprintf("protocol version %d, the daemon speaks %d: use the library and daemon of one build", req.Version, ProtoVersion))
		}
		r := HelloReply{Version: ProtoVersion, Ports: 1, NodeGUID: s.src.DeviceAttr().NodeGUID, Ifindex: uint32(s.src.Ifindex())}
		copy(r.Name[:len(r.Name)-1], s.src.Name())
		copy(r.Ifname[:len(r.Ifname)-1], s.src.Ifname())
		return okReply(h.Op, h.Seq, &r)
	case OpQueryDevice:
		if len(p) != 0 {
			return errReply(h.Op, h.Seq, unix.EBADMSG, "query device takes no body")
		}
		a := s.src.DeviceAttr()
		return okReply(h.Op, h.Seq, &a)
	case OpQueryPort:
		var req PortReq
		if err := decodeBody(p, &req); err != nil {
			return errReply(h.Op, h.Seq, unix.EBADMSG, "query port: "+err.Error())
		}
		if req.Port != 1 {
			return errReply(h.Op, h.Seq, unix.EINVAL, fmt.Sprintf("port %d: the device has port 1 only", req.Port))
		}
		a := s.src.PortAttr()
		return okReply(h.Op, h.Seq, &a)
	case OpQueryGID:
		var req GIDReq
		if err := decodeBody(p, &req); err != nil {
			return errReply(h.Op, h.Seq, unix.EBADMSG, "query gid: "+err.Error())
		}
		if req.Port != 1 || req.Index >= GIDTableLen {
			return errReply(h.Op, h.Seq, unix.EINVAL, fmt.Sprintf("port %d GID index %d: port 1 has indexes 0..%d", req.Port, req.Index, GIDTableLen-1))
		}
		r := GIDReply{Index: req.Index}
		if t := s.src.GIDTable(); int(req.Index) < len(t) && !t[req.Index].Empty() {
			e := t[req.Index]
			r.Raw, r.Valid, r.Ifindex = e.GID, 1, uint32(s.src.Ifindex())
			r.Type = GIDTypeRoCEv2
			if e.Version == 1 {
				r.Type = GIDTypeRoCEv1
			}
		}
		return okReply(h.Op, h.Seq, &r)
	case OpCounters:
		cs := s.src.Counters()
		b := binary.LittleEndian.AppendUint32(nil, uint32(len(cs)))
		for _, c := range cs {
			var e CounterEntry
			copy(e.Name[:len(e.Name)-1], c.Name)
			e.Value = c.Value
			b, _ = binary.Append(b, binary.LittleEndian, &e)
		}
		return okReply(h.Op, h.Seq, b)
	case OpClients:
		s.mu.Lock()
		var es []ClientEntry
		for cl := range s.clients {
			es = append(es, ClientEntry{PID: cl.pid, UID: cl.uid, Since: cl.since.Unix(), PDs: uint32(cl.counts.pds.Load()),
				MRs: uint32(cl.counts.mrs.Load()), CQs: uint32(cl.counts.cqs.Load()), QPs: uint32(cl.counts.qps.Load()),
				SRQs: uint32(cl.counts.srqs.Load())})
		}
		s.mu.Unlock()
		sort.Slice(es, func(i, j int) bool { return es[i].PID < es[j].PID })
		max := (MaxMessage - HeaderSize - 8) / binary.Size(ClientEntry{})
		if len(es) > max {
			es = es[:max]
		}
		b := binary.LittleEndian.AppendUint32(nil, uint32(len(es)))
		for i := range es {
			b, _ = binary.Append(b, binary.LittleEndian, &es[i])
		}
		return okReply(h.Op, h.Seq, b)
	default:
		return errReply(h.Op, h.Seq, unix.EOPNOTSUPP, fmt.Sprintf("unknown op %d", h.Op))
	}
}

// Devices lists the device names with a socket in dir, sorted.
func Devices(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".sock"); ok && e.Type()&os.ModeSocket != 0 {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out, nil
}
