package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/spf13/pflag"

	"github.com/xroce/xroce/cmd/xroce/oob"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// perfOptions are perftest's flags, where they apply, and xroce's own.
type perfOptions struct {
	linkOptions
	port        int
	size        int
	iters       int
	duration    int
	mtu         int
	qps         int
	txDepth     int
	tclass      int
	reportGbits bool
	runInf      bool
	verify      bool
	counters    bool
	inline      int
	qpTimeout   int
	conn        string
	ibPort      int
	all         bool
	atomicType  string // atomic_bw's -A: FETCH_AND_ADD or CMP_AND_SWAP
	server      string // the client's server address; empty for the server
	out         io.Writer
}

func parsePerf(name string, args []string, out io.Writer) (*perfOptions, error) {
	o := &perfOptions{out: out}
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(out)
	lat := strings.HasSuffix(name, "_lat")
	defSize, defIters := 65536, 5000
	if lat {
		defSize, defIters = 2, 1000
	}
	if name == "atomic_bw" {
		defSize = 8
	}
	fs.StringVarP(&o.dev, "ib-dev", "d", "", "network interface to run on; with --provider verbs, the RDMA device (rxe0, mlx5_0)")
	fs.IntVarP(&o.ibPort, "ib-port", "i", 1, "port number (xroce devices have port 1)")
	fs.IntVarP(&o.gidIndex, "gid-index", "x", -1, "GID index (default: the interface's first IPv4 GID)")
	fs.IntVarP(&o.size, "size", "s", defSize, "message size in bytes")
	fs.BoolVarP(&o.all, "all", "a", false, "run every size from 2 to 2^23 bytes in turn, a table row each (give it on both sides)")
	fs.IntVarP(&o.iters, "iters", "n", defIters, "number of iterations")
	fs.IntVarP(&o.duration, "duration", "D", 0, "run for this many seconds instead of -n, with a progress line a second")
	fs.IntVarP(&o.mtu, "mtu", "m", 0, "path MTU: 256, 512, 1024, 2048 or 4096 (default: the largest the link carries)")
	fs.IntVarP(&o.qps, "qp", "q", 1, "number of RC QPs, each running -n iterations (give the same on both sides)")
	fs.IntVarP(&o.txDepth, "tx-depth", "t", 128, "work requests in flight")
	fs.BoolP("cpu-freq", "F", false, "accepted for perftest compatibility (no CPU frequency check here)")
	fs.IntVarP(&o.port, "port", "p", oob.DefaultPort, "TCP port of the out-of-band exchange")
	fs.IntVar(&o.tclass, "tclass", 0, "traffic class (IPv4 TOS / IPv6 traffic class)")
	fs.BoolVar(&o.reportGbits, "report_gbits", false, "report bandwidth in Gb/s")
	fs.BoolVar(&o.runInf, "run_infinitely", false, "run until interrupted, a line a second (with -D: a line every D seconds)")
	fs.IntVarP(&o.inline, "inline_size", "I", 0, "send messages up to this size inline (at most 256)")
	fs.IntVarP(&o.qpTimeout, "qp-timeout", "u", 14, "local ACK timeout: 4.096 µs × 2^u")
	fs.StringVarP(&o.conn, "connection", "c", "RC", "connection type (RC only)")
	if name == "atomic_bw" {
		fs.StringVarP(&o.atomicType, "atomic_type", "A", "FETCH_AND_ADD", "FETCH_AND_ADD or CMP_AND_SWAP (the client's choice)")
	}
	if lat {
		_ = fs.MarkHidden("duration")
		_ = fs.MarkHidden("run_infinitely")
	}
	addLinkFlags(fs, &o.linkOptions)
	fs.BoolVar(&o.verify, "verify", false, "verify the data moved (both sides must be xroce)")
	fs.BoolVar(&o.counters, "counters", false, "print the counters that moved (the engine's, or the RDMA device's hw_counters)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, errUsage
		}
		return nil, err
	}
	switch {
	case fs.NArg() > 1:
		return nil, fmt.Errorf("one server address at most, got %q", fs.Args())
	case o.conn != "RC":
		return nil, fmt.Errorf("-c %s: xroce implements RC only", o.conn)
	case o.qps < 1 || o.qps > maxQPs:
		return nil, fmt.Errorf("-q %d: the number of QPs is 1..%d", o.qps, maxQPs)
	case o.ibPort != 1:
		return nil, fmt.Errorf("-i %d: xroce devices have port 1 only", o.ibPort)
	case lat && o.qps != 1:
		return nil, fmt.Errorf("-q %d: multiple QPs only available on bw tests (as in perftest)", o.qps)
	case lat && (o.duration != 0 || o.runInf):
		return nil, fmt.Errorf("-D and --run_infinitely are for the bandwidth tests: %s runs -n iterations", name)
	case o.all && name == "atomic_bw":
		return nil, fmt.Errorf("-a: the message size cannot be changed for atomic tests (as in perftest)")
	case o.all && (o.duration > 0 || o.runInf):
		return nil, fmt.Errorf("-a runs -n iterations of each size: it does not go with -D or --run_infinitely")
	case o.size < 0 || o.size > transport.MaxMsgSize:
		return nil, fmt.Errorf("-s %d: size must be 0..%d", o.size, transport.MaxMsgSize)
	case name == "atomic_bw" && o.atomicType != "FETCH_AND_ADD" && o.atomicType != "CMP_AND_SWAP":
		return nil, fmt.Errorf("-A %s: FETCH_AND_ADD or CMP_AND_SWAP", o.atomicType)
	case o.atomicType == "CMP_AND_SWAP" && o.verify:
		return nil, fmt.Errorf("--verify checks FETCH_AND_ADD's counters: it does not go with -A CMP_AND_SWAP")
	case name == "atomic_bw" && o.size != 8:
		return nil, fmt.Errorf("-s %d: atomics move 8 bytes", o.size)
	case o.duration < 0:
		return nil, fmt.Errorf("-D %d: the duration is in seconds, at least 1", o.duration)
	case o.busyPoll < 0:
		return nil, fmt.Errorf("--busy-poll %v: 0 (never) or a positive duration", o.busyPoll)
	case o.iters <= 0 || o.txDepth <= 0:
		return nil, fmt.Errorf("-n and -t must be positive")
	case o.tclass < 0 || o.tclass > 255:
		return nil, fmt.Errorf("--tclass %d: the traffic class is 0..255", o.tclass)
	case o.gidIndex < -1:
		return nil, fmt.Errorf("-x %d: GID indexes start at 0", o.gidIndex)
	case o.port <= 0 || o.port > 65535:
		return nil, fmt.Errorf("-p %d: TCP ports are 1..65535", o.port)
	case o.qpTimeout < 0 || o.qpTimeout > 31:
		return nil, fmt.Errorf("-u %d: the QP timeout is 0..31", o.qpTimeout)
	case o.inline < 0 || o.inline > transport.MaxInline:
		return nil, fmt.Errorf("-I %d: the inline size is 0..%d", o.inline, transport.MaxInline)
	}
	if _, err := o.pcap.tapOptions(); err != nil {
		return nil, err
	}
	if o.mtu != 0 {
		if _, err := roce.MTUFromBytes(o.mtu); err != nil {
			return nil, fmt.Errorf("-m %d: %v", o.mtu, err)
		}
	}
	if fs.NArg() == 1 {
		o.server = fs.Arg(0)
	}
	if o.txDepth > o.iters && o.duration == 0 && !o.runInf {
		o.txDepth = o.iters // as perftest's parser does: no more in flight than there are
	}
	return o, nil
}

// test describes one perftest test.
type test struct {
	name string
	op   transport.WROpcode
	lat  bool
	kind oob.Kind
}

func testFor(name string) test {
	t := test{name: name, kind: oob.BW}
	switch {
	case strings.HasPrefix(name, "write"):
		t.op = transport.WR_RDMA_WRITE
	case strings.HasPrefix(name, "read"):
		t.op = transport.WR_RDMA_READ
	case strings.HasPrefix(name, "send"):
		t.op = transport.WR_SEND
		t.kind = oob.SendBW
	default:
		t.op = transport.WR_ATOMIC_FETCH_AND_ADD
	}
	if strings.HasSuffix(name, "_lat") {
		t.lat, t.kind = true, oob.Lat
		switch t.op {
		case transport.WR_RDMA_READ:
			t.kind = oob.ReadLat
		case transport.WR_SEND:
			t.kind = oob.SendLat
		}
	}
	return t
}

func runPerf(name string, args []string) error {
	o, err := parsePerf(name, args, os.Stdout)
	if err != nil {
		return err
	}
	t := testFor(name)
	if o.atomicType == "CMP_AND_SWAP" {
		t.op = transport.WR_ATOMIC_CMP_AND_SWP
	}
	return perf(context.Background(), t, o)
}

// conn is a running perftest connection.
type conn struct {
	t      test
	o      *perfOptions
	env    *env
	client bool
	cq     compQueue
	qps    []queuePair
	mr     memRegion
	buf    []byte
	half   int // each QP has 2*half bytes of buf; the receive half (latency tests) starts at half
	size   int // the message size being run (each in turn with -a)
	local  []oob.Dest
	remote []oob.Dest
	mtu    roce.MTU

	recvd       int       // receive completions (send_lat)
	lastPoll    time.Time // write_lat client: when the peer's previous write arrived
	remoteIters uint64    // iterations the client reported (bandwidth server)
	verified    int       // sizes whose data was verified
	gidFlag     string    // the flag that sets the GID index, for messages: -x, or pingpong's -g
}

// gidOpt names the tool's GID index flag in messages.
func (c *conn) gidOpt() string {
	if c.gidFlag != "" {
		return c.gidFlag
	}
	return "-x"
}

// maxQPs bounds -q: each QP has its own buffer, and the CQ is sized for all of them.
const maxQPs = 64

// allSizes are perftest's -a sizes: 2 to 2^23 bytes.
func allSizes() []int {
	var s []int
	for i := 1; i < 24; i++ {
		s = append(s, 1<<i)
	}
	return s
}

// sizes are the message sizes run, in order.
func (c *conn) sizes() []int {
	if c.o.all {
		return allSizes()
	}
	return []int{c.o.size}
}

// maxSize is the largest message size run: what the buffers are sized for.
func (c *conn) maxSize() int {
	s := c.sizes()
	return s[len(s)-1]
}

func perf(ctx context.Context, t test, o *perfOptions) error {
	e, err := openEnv(o.linkOptions)
	if err != nil {
		return err
	}
	defer e.stop()
	if o.counters {
		before := e.prov.Counters()
		defer func() { printCounters(o.out, providerName(o.provider), before, e.prov.Counters()) }()
	}
	c := &conn{t: t, o: o, env: e, client: o.server != ""}
	if err := c.setup(); err != nil {
		return err
	}
	nc, err := oobConn(o.server, o.port, o.out, true)
	if err != nil {
		return err
	}
	// Each exchange step gets a minute, plus the test's duration for the barrier
	// that waits for the test to end, and more while the peer's frames keep
	// arriving (a long -n); --run_infinitely waits without limit. A -a run's
	// bandwidth server waits for every size.
	timeout := 60*time.Second + time.Duration(o.duration)*time.Second
	if o.all && t.kind == oob.BW {
		timeout = 10 * time.Minute
	}
	if o.runInf {
		timeout = 0
	}
	s := oob.NewSession(nc, c.client, t.kind, timeout)
	s.RunAll = o.all
	s.Alive = c.peerAlive()
	ours := c.ourMTU()
	remote, peerMTU, err := s.Connect(c.local, ours, c.connect)
	if err != nil {
		nc.Close()
		return err
	}
	c.remote = remote
	c.printHeader(peerMTU)
	if t.lat {
		if !c.client && t.op == transport.WR_RDMA_READ {
			fmt.Fprintf(o.out, " The client reads; the server waits for it to finish.\n")
		}
		table := false
		for k, size := range c.sizes() {
			if k > 0 {
				if err := s.NextSize(func() error { return c.startSize(size) }); err != nil {
					nc.Close()
					return err
				}
			}
			lats, err := c.runLat()
			if err == nil {
				err = c.verifySize(false)
			}
			if err != nil {
				nc.Close()
				return err
			}
			if len(lats) > 0 {
				if !table {
					c.printLatHead()
					table = true
				}
				c.printLat(lats)
			}
		}
		if table {
			fmt.Fprintln(o.out, rule)
		}
		if _, err := s.Finish(oob.Results{}); err != nil {
			return err
		}
		return c.verifyEnd()
	}
	// A bandwidth server of write/read/atomic waits for its client and prints the
	// client's results (of the last size with -a), as perftest's does.
	moves := c.client || t.op == transport.WR_SEND
	if moves {
		c.printBWHead()
	}
	var res oob.Results
	for k, size := range c.sizes() {
		if k > 0 {
			if err := s.NextSize(func() error { return c.startSize(size) }); err != nil {
				nc.Close()
				return err
			}
		}
		if moves {
			res, err = c.runBW(ctx)
			if err == nil {
				err = c.verifySize(true)
			}
			if err != nil {
				nc.Close()
				return err
			}
			c.printBWRow(res)
		}
	}
	if moves {
		fmt.Fprintln(o.out, rule)
	}
	got, err := s.Finish(res)
	if err != nil {
		return err
	}
	if !moves {
		c.remoteIters = got.Iters
		c.printBWHead()
		c.printBWRow(got)
		fmt.Fprintln(o.out, rule)
	}
	return c.verifyEnd()
}

// ourMTU is -m, or the largest path MTU the link carries.
func (c *conn) ourMTU() roce.MTU {
	if c.o.mtu != 0 {
		m, _ := roce.MTUFromBytes(c.o.mtu)
		return m
	}
	return c.env.prov.MaxMTU()
}

// base is where QP i's part of the buffer starts.
func (c *conn) base(i int) int { return i * 2 * c.half }

// atomic is the atomic_bw test.
func (c *conn) atomic() bool { return c.t.name == "atomic_bw" }

// setup creates the PD, buffer, MR, CQ and QPs (in INIT), and our key messages.
func (c *conn) setup() error {
	prov := c.env.prov
	q := c.o.qps
	c.half = max(c.maxSize(), 4096) // perftest's BUFF_SIZE with a 4096-byte cycle buffer
	var err error
	if c.buf, err = prov.Alloc(q * 2 * c.half); err != nil {
		return err
	}
	c.mr, err = prov.RegMR(c.buf, transport.AccessLocalWrite|transport.AccessRemoteWrite|transport.AccessRemoteRead|transport.AccessRemoteAtomic)
	if err != nil {
		return err
	}
	depth := c.o.txDepth
	if c.cq, err = prov.CreateCQ(max(4, 2*q) * (depth + 512)); err != nil {
		return err
	}
	outReads := 1
	if c.t.op == transport.WR_RDMA_READ || c.atomic() {
		outReads = 16
	}
	rkey := c.mr.RKey()
	if c.t.op == transport.WR_SEND {
		rkey = 0 // as perftest's send tests advertise
	}
	for i := 0; i < q; i++ {
		qp, err := prov.CreateQP(c.cq, c.cq, transport.QPCap{MaxSendWR: depth, MaxRecvWR: 512, MaxSendSGE: 1, MaxRecvSGE: 1,
			MaxInlineData: c.o.inline})
		if err != nil {
			return err
		}
		if err := transport.BringUp(qp, transport.QPS_RESET, transport.QPS_INIT, transport.ConnectParams{Access: remoteAccess}); err != nil {
			return err
		}
		c.qps = append(c.qps, qp)
		vaddr := c.mr.Addr() + uint64(c.base(i))
		if c.t.lat {
			vaddr += uint64(c.half)
		}
		c.local = append(c.local, oob.Dest{OutReads: outReads, QPN: qp.QPN(), PSN: rand.Uint32() & 0xFFFFFF, RKey: rkey,
			VAddr: vaddr, GID: c.env.gid.GID})
	}
	if c.o.verify && !c.client && c.t.op == transport.WR_RDMA_READ {
		for i := range c.qps { // what the client reads: the advertised area
			off := int(c.local[i].VAddr - c.mr.Addr())
			pattern(c.buf[off:off+c.maxSize()], c.readSeed())
		}
	}
	return c.startSize(c.sizes()[0])
}

// readSeed seeds what a read test's server offers: the client checks the first
// size bytes of it, whatever the size.
func (c *conn) readSeed() uint64 { return uint64(c.maxSize()) + 1 }

// startSize gets the buffers ready for a size: with --verify a sender's send areas
// hold the size's pattern, and a READ client's landing areas are cleared.
func (c *conn) startSize(size int) error {
	c.size = size
	if !c.o.verify || c.atomic() || !c.client && !c.t.lat {
		return nil // atomics count from 0; bw servers do not send
	}
	for i := range c.qps {
		b := c.base(i)
		if c.t.op == transport.WR_RDMA_READ {
			if c.client {
				land := b + c.half*boolInt(c.t.lat)
				clear(c.buf[land : land+size])
			}
			continue
		}
		pattern(c.buf[b:b+size], uint64(size))
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// connect moves the QPs to RTR and RTS towards the peer's (between the handshake
// and the barriers), after checking the GIDs are of one kind, and posts the first
// size's receives.
func (c *conn) connect(remote []oob.Dest, mtu roce.MTU) error {
	c.mtu = mtu
	for i, qp := range c.qps {
		if err := checkPeerGID(c.env.prov.GIDTable(), c.env.gid, remote[i].GID); err != nil {
			return err
		}
		timers := transport.DefaultTimers()
		timers.Timeout = uint8(c.o.qpTimeout)
		p := connectParams(remote[i], c.local[i], c.env.gid.Index, mtu, transport.MaxQPRdAtom)
		p.AH.TrafficClass, p.Timers = uint8(c.o.tclass), &timers
		if err := transport.BringUp(qp, transport.QPS_INIT, transport.QPS_RTS, p); err != nil {
			return err
		}
	}
	// Receivers post their receives before the barriers let the sender start. Each
	// completed receive is posted again, so there are as many for every later size
	// of a -a run, and those take the largest size.
	if c.t.op == transport.WR_SEND && (!c.client || c.t.lat) {
		for i := range c.qps {
			for n := 0; n < min(512, c.o.iters); n++ {
				if err := c.postRecv(i, uint64(n)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// wrID tags a work request with its QP's index.
func wrID(qp int, n uint64) uint64 { return uint64(qp)<<40 | n }

// wrQP is the QP index of a work request's ID.
func wrQP(id uint64) int { return int(id >> 40) }

func (c *conn) postRecv(qp int, id uint64) error {
	off := c.base(qp) + c.half*boolInt(c.t.lat)
	n := max(c.size, 1)
	if c.o.all {
		n = c.half
	}
	_, err := c.qps[qp].PostRecv(transport.RecvWR{WRID: wrID(qp, id), SGList: []transport.SGE{{Addr: c.mr.Addr() + uint64(off), Length: uint32(n), LKey: c.mr.LKey()}}})
	return err
}

// writeOff is where a WRITE lands in the peer's area: at 0, except in a verified
// write_bw -a run, where each size has its own place (size-2: the sizes before it
// end there) so that the server can check every size after the run.
func (c *conn) writeOff() uint64 {
	if c.o.all && c.o.verify && c.t.op == transport.WR_RDMA_WRITE && !c.t.lat {
		return uint64(c.size - 2)
	}
	return 0
}

// wr is the test's work request on QP qp.
func (c *conn) wr(qp int) transport.SendWR {
	w := transport.SendWR{Opcode: c.t.op, Flags: transport.SendSignaled, RemoteAddr: c.remote[qp].VAddr + c.writeOff(),
		RKey: c.remote[qp].RKey, CompareAdd: 1,
		SGList: []transport.SGE{{Addr: c.mr.Addr() + uint64(c.base(qp)), Length: uint32(c.size), LKey: c.mr.LKey()}}}
	if c.t.op == transport.WR_RDMA_READ && c.t.lat {
		w.SGList[0].Addr += uint64(c.half)
	}
	if c.size <= c.o.inline && c.t.op != transport.WR_RDMA_READ && !c.atomic() {
		w.Flags |= transport.SendInline
	}
	return w
}

// errCompletion explains a failed work completion the way users need it.
func (c *conn) errCompletion(wc transport.WorkCompletion) error {
	switch wc.Status {
	case transport.WC_RETRY_EXC_ERR:
		return fmt.Errorf("completion %v (%v): the peer did not answer after every retry. If it ran until then, it exited or stopped (see its output); if it never answered, look for a wrong GID index (%s) on either side, a path MTU the peer cannot take (-m), or a firewall dropping UDP port 4791", wc.Status, wc.Opcode, c.gidOpt())
	case transport.WC_RNR_RETRY_EXC_ERR:
		return fmt.Errorf("completion %v (%v): the peer had no receive posted", wc.Status, wc.Opcode)
	case transport.WC_REM_ACCESS_ERR:
		return fmt.Errorf("completion %v (%v): the peer refused the access: rkey, address or size outside its region (-s larger than the peer's buffer?)", wc.Status, wc.Opcode)
	case transport.WC_REM_INV_REQ_ERR:
		return fmt.Errorf("completion %v (%v): the peer found the request invalid (a path MTU mismatch, or a size larger than its receive buffer)", wc.Status, wc.Opcode)
	case transport.WC_LOC_LEN_ERR:
		if wc.Opcode == transport.WC_RECV {
			return fmt.Errorf("completion %v (%v): the peer sent a message larger than our receive buffer (its -s is larger than ours?)", wc.Status, wc.Opcode)
		}
	}
	return fmt.Errorf("completion %v (%v)", wc.Status, wc.Opcode)
}

// peerAlive returns a function that reports whether frames arrived (the
// provider's rcvd_pkts moved) since its last call, or since peerAlive.
func (c *conn) peerAlive() func() bool {
	rcvd := func() uint64 {
		if c.env == nil {
			return 0
		}
		return c.env.prov.Counters()["rcvd_pkts"]
	}
	seen := rcvd()
	return func() bool {
		now := rcvd()
		moved := now != seen
		seen = now
		return moved
	}
}

// waitCQ polls the CQ into wcs, waiting up to limit for at least one completion.
func (c *conn) waitCQ(wcs []transport.WorkCompletion, limit time.Duration) (int, error) {
	if n := c.cq.Poll(wcs); n > 0 {
		return n, nil
	}
	// A long message (hundreds of MiB) may take longer than limit to complete: the
	// wait goes on while frames still arrive.
	alive := c.peerAlive()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		err := c.cq.Wait(ctx)
		cancel()
		if err == nil {
			return c.cq.Poll(wcs), nil
		}
		if alive() {
			continue
		}
		if c.env != nil && c.env.ifname != "" {
			if _, err := net.InterfaceByName(c.env.ifname); err != nil {
				return 0, fmt.Errorf("no completion for %v: the interface %s is gone (deleted, or moved to another namespace)", limit, c.env.ifname)
			}
		}
		return 0, fmt.Errorf("no completion for %v and no frame from the peer: the peer is not answering (or has exited); check that both sides were given the same test, -n and -s, the GID index (%s), the path MTU (-m), and that UDP port 4791 is open", limit, c.gidOpt())
	}
}

// runBW runs one size of a bandwidth test: the client posts on every QP, -n work
// requests each, up to -t in flight per QP, as perftest's run_iter_bw does; a
// send_bw server receives. The results count the iterations of all QPs.
func (c *conn) runBW(ctx context.Context) (oob.Results, error) {
	o := c.o
	res := oob.Results{Size: uint64(c.size)}
	q := len(c.qps)
	iters := o.iters
	deadline := time.Time{}
	if o.duration > 0 || o.runInf {
		iters = 1 << 40
		if o.duration > 0 && !o.runInf {
			deadline = time.Now().Add(time.Duration(o.duration) * time.Second)
		}
	}
	wcs := make([]transport.WorkCompletion, 64)
	wrs := make([]transport.SendWR, q)
	for i := range wrs {
		wrs[i] = c.wr(i)
	}
	batch := make([]transport.SendWR, 0, o.txDepth)
	posted, completed := make([]int, q), make([]int, q)
	sent, done := 0, 0
	start := time.Now()
	last, lastDone := start, 0
	peak := 0.0
	window := max(1, min(o.txDepth, iters*q/100))
	winStart, winDone := start, 0
	receiver := !c.client
	for done < iters*q {
		if !deadline.IsZero() && time.Now().After(deadline) && sent == done {
			break
		}
		// Post what each QP's window allows as one list (ibv_post_send's chained
		// list): one wake of the engine per batch, not one per work request.
		for i := 0; !receiver && i < q; i++ {
			batch = batch[:0]
			for posted[i]+len(batch) < iters && posted[i]+len(batch)-completed[i] < o.txDepth && (deadline.IsZero() || time.Now().Before(deadline)) {
				wrs[i].WRID = wrID(i, uint64(posted[i]+len(batch)))
				batch = append(batch, wrs[i])
			}
			if len(batch) > 0 {
				k, err := c.qps[i].PostSend(batch...)
				posted[i] += k
				sent += k
				if err != nil {
					return res, err
				}
			}
		}
		n, err := c.waitCQ(wcs, 30*time.Second)
		if err != nil {
			return res, err
		}
		for _, wc := range wcs[:n] {
			if wc.Status != transport.WC_SUCCESS {
				return res, c.errCompletion(wc)
			}
			qp := wrQP(wc.WRID)
			if qp >= q {
				return res, fmt.Errorf("a completion for work request %#x of no QP of this test", wc.WRID)
			}
			completed[qp]++
			if receiver {
				if err := c.postRecv(qp, wc.WRID&(1<<40-1)); err != nil {
					return res, err
				}
			}
		}
		done += n
		// The peak is the best rate over windows of completions that last at least a
		// millisecond: a burst of completions polled at once is not a rate.
		if done-winDone >= window && time.Since(winStart) >= time.Millisecond {
			now := time.Now()
			if r := float64(done-winDone) / now.Sub(winStart).Seconds(); r > peak {
				peak = r
			}
			winStart, winDone = now, done
		}
		if (o.duration > 0 || o.runInf) && time.Since(last) >= max(time.Second, time.Duration(o.duration)*time.Second*boolDur(o.runInf)) {
			now := time.Now()
			rate := float64(done-lastDone) / now.Sub(last).Seconds()
			fmt.Fprintf(o.out, " %-10d %-14d %-18.2f %-20.2f %.6f\n", c.size, done-lastDone, c.bw(rate), c.bw(rate), rate/1e6)
			last, lastDone = now, done
		}
		if receiver && done >= o.iters*q && deadline.IsZero() && !o.runInf {
			break
		}
	}
	el := time.Since(start).Seconds()
	rate := float64(done) / el
	peak = max(peak, rate)
	res.Iters = uint64(done)
	res.PeakBW, res.AvgBW, res.MsgRate = c.bw(peak), c.bw(rate), rate/1e6
	return res, nil
}

func boolDur(b bool) time.Duration {
	if b {
		return 1
	}
	return 0
}

// bw converts messages per second to MB/s, or Gb/s with --report_gbits.
func (c *conn) bw(msgsPerSec float64) float64 {
	bytes := msgsPerSec * float64(c.size)
	if c.o.reportGbits {
		return bytes * 8 / 1e9
	}
	return bytes / (1 << 20)
}

// runLat runs one size of a latency test (on the one QP) and returns the
// per-iteration times (one-way for WRITE and SEND ping-pong, round trip for READ),
// or nil on a read_lat server.
func (c *conn) runLat() ([]time.Duration, error) {
	o := c.o
	iters := o.iters
	lats := make([]time.Duration, 0, iters)
	wcs := make([]transport.WorkCompletion, 16)
	qp := c.qps[0]
	wr := c.wr(0)
	c.recvd = 0
	waitSend := func() error {
		for {
			n, err := c.waitCQ(wcs, 30*time.Second)
			if err != nil {
				return err
			}
			sent := false
			for _, wc := range wcs[:n] {
				if wc.Status != transport.WC_SUCCESS {
					return c.errCompletion(wc)
				}
				if wc.Opcode != transport.WC_RECV {
					sent = true
					continue
				}
				if err := c.postRecv(0, wc.WRID); err != nil {
					return err
				}
				c.recvd++
			}
			if sent {
				return nil
			}
		}
	}
	switch c.t.op {
	case transport.WR_RDMA_READ:
		if !c.client {
			return nil, nil
		}
		for i := 0; i < iters; i++ {
			t0 := time.Now()
			if _, err := qp.PostSend(wr); err != nil {
				return nil, err
			}
			if err := waitSend(); err != nil {
				return nil, err
			}
			lats = append(lats, time.Since(t0))
		}
		return lats, nil
	case transport.WR_RDMA_WRITE:
		// perftest's write_lat: the last byte of each message carries the iteration
		// count; each side polls the last byte of its receive half for the peer's.
		if c.size == 0 {
			return nil, fmt.Errorf("write_lat needs -s of at least 1")
		}
		// perftest's run_iter_lat_write: the server writes first (the first RoCE
		// frame of ib_write_lat.pcap is the server's); each side then waits for the
		// peer's write i before its own write i+1... so the client waits for i and
		// answers i, the server writes i and waits for the answer i.
		mark := &c.buf[c.size-1]
		poll := c.half + c.size - 1
		for i := 1; i <= iters; i++ {
			t0 := time.Now()
			if c.client {
				if err := c.pollByte(poll, byte(i), 30*time.Second); err != nil {
					return nil, err
				}
				if now := time.Now(); i > 1 { // a round trip between two arrivals
					lats = append(lats, now.Sub(c.lastPoll)/2)
					c.lastPoll = now
				} else {
					c.lastPoll = now
				}
				// The server's last write is in place until our last answer lets it
				// go on to the next size: check it now.
				if i == iters && c.o.verify {
					if err := c.checkLatWrite(); err != nil {
						return nil, err
					}
				}
			}
			*mark = byte(i)
			if _, err := qp.PostSend(wr); err != nil {
				return nil, err
			}
			if err := waitSend(); err != nil {
				return nil, err
			}
			if !c.client {
				if err := c.pollByte(poll, byte(i), 30*time.Second); err != nil {
					return nil, err
				}
				lats = append(lats, time.Since(t0)/2)
			}
		}
		return lats, nil
	}
	// send_lat: the client sends and waits for the reply; the server replies.
	for i := 0; i < iters; i++ {
		t0 := time.Now()
		if c.client {
			if _, err := qp.PostSend(wr); err != nil {
				return nil, err
			}
			if err := waitSend(); err != nil {
				return nil, err
			}
		}
		for c.recvd <= i {
			if err := waitSendOrRecv(c, wcs); err != nil {
				return nil, err
			}
		}
		if !c.client {
			if _, err := qp.PostSend(wr); err != nil {
				return nil, err
			}
			if err := waitSend(); err != nil {
				return nil, err
			}
		}
		if c.client || i > 0 {
			lats = append(lats, time.Since(t0)/2)
		}
	}
	return lats, nil
}

// waitSendOrRecv handles one batch of completions, counting receives.
func waitSendOrRecv(c *conn, wcs []transport.WorkCompletion) error {
	n, err := c.waitCQ(wcs, 30*time.Second)
	if err != nil {
		return err
	}
	for _, wc := range wcs[:n] {
		if wc.Status != transport.WC_SUCCESS {
			return c.errCompletion(wc)
		}
		if wc.Opcode == transport.WC_RECV {
			c.recvd++
			if err := c.postRecv(0, wc.WRID); err != nil {
				return err
			}
		}
	}
	return nil
}

// pollByte waits until buf[i] == want, reading it atomically (the provider writes
// it from its own thread, as an HCA writes host memory). It spins for the first
// pollSpin, as perftest does, then sleeps between looks: on a machine with few
// cores a spinning tool would take the CPU the engine needs to deliver the write.
func (c *conn) pollByte(i int, want byte, limit time.Duration) error {
	w := i &^ 3
	p := (*uint32)(unsafe.Pointer(&c.buf[w]))
	shift := uint(i-w) * 8
	start := time.Now()
	for n := 0; ; n++ {
		if byte(atomic.LoadUint32(p)>>shift) == want {
			return nil
		}
		if n&63 != 63 {
			continue
		}
		el := time.Since(start)
		switch {
		case el > limit:
			return fmt.Errorf("the peer's write %d did not arrive within %v: the peer is not answering; check the GID index (-x), the path MTU (-m) and that UDP port 4791 is open", want, limit)
		case el > pollSpin:
			time.Sleep(pollSleep)
		default:
			runtime.Gosched()
		}
	}
}

// write_lat's polling: spin this long, then look every pollSleep.
const (
	pollSpin  = 20 * time.Microsecond
	pollSleep = 5 * time.Microsecond
)

// Data verification (--verify, both sides xroce): the sender of each size's
// messages puts pattern(size) in them; a read test's server offers
// pattern(readSeed). Each receiver checks the last message of every size, on every
// QP, where it is sure to be in place: after the size (SEND, READ, write_lat's
// server), before its last answer (write_lat's client), or after the whole run
// (write_bw's server, whose -a sizes each have their place; atomic_bw's counters).

// checkData compares what arrived with what was sent.
func checkData(what string, got, want []byte) error {
	if string(got) == string(want) {
		return nil
	}
	i := 0
	for i < len(want) && got[i] == want[i] {
		i++
	}
	return fmt.Errorf("verify: %s: %d bytes differ from byte %d (both sides need --verify: without it the sender sends no pattern)", what, len(want), i)
}

// checkLatWrite checks the peer's last write_lat message: the pattern, and the
// iteration mark in its last byte.
func (c *conn) checkLatWrite() error {
	want := make([]byte, c.size)
	pattern(want, uint64(c.size))
	want[c.size-1] = byte(c.o.iters)
	if err := checkData(fmt.Sprintf("%d-byte messages", c.size), c.buf[c.half:c.half+c.size], want); err != nil {
		return err
	}
	c.verified++
	return nil
}

// verifySize checks the data of the size just run, where this side can.
func (c *conn) verifySize(bw bool) error {
	if !c.o.verify {
		return nil
	}
	n := c.size
	want := make([]byte, n)
	off := 0
	switch {
	case c.t.op == transport.WR_RDMA_WRITE && c.t.lat && !c.client:
		return c.checkLatWrite()
	case c.t.op == transport.WR_SEND && (c.t.lat || !c.client):
		pattern(want, uint64(n))
		off = c.half * boolInt(c.t.lat)
	case c.t.op == transport.WR_RDMA_READ && c.client:
		pattern(want, c.readSeed())
		off = c.half * boolInt(c.t.lat)
	default:
		return nil // checked in runLat or after the run, or by the other side
	}
	for i := range c.qps {
		b := c.base(i) + off
		if err := checkData(fmt.Sprintf("QP %d, %d-byte messages", i, n), c.buf[b:b+n], want); err != nil {
			return err
		}
	}
	c.verified++
	return nil
}

// verifyEnd runs the checks that wait for the end of the run and prints what was
// verified.
func (c *conn) verifyEnd() error {
	if !c.o.verify {
		return nil
	}
	switch {
	case c.atomic() && !c.client:
		var sum uint64
		for i := range c.qps {
			sum += binary.NativeEndian.Uint64(c.buf[c.base(i):])
		}
		if sum != c.remoteIters {
			return fmt.Errorf("verify: the counters add up to %d after %d FETCH_AND_ADDs", sum, c.remoteIters)
		}
		fmt.Fprintf(c.o.out, " Data verified: counter %d after %d FETCH_AND_ADD\n", sum, c.remoteIters)
		return nil
	case c.t.op == transport.WR_RDMA_WRITE && !c.t.lat && !c.client:
		for _, n := range c.sizes() {
			off := 0
			if c.o.all {
				off = n - 2
			}
			want := make([]byte, n)
			pattern(want, uint64(n))
			for i := range c.qps {
				b := c.base(i) + off
				if err := checkData(fmt.Sprintf("QP %d, %d-byte messages", i, n), c.buf[b:b+n], want); err != nil {
					return err
				}
			}
			c.verified++
		}
	}
	sizes := c.sizes()
	if c.verified < len(sizes) {
		return nil // the other side checks
	}
	what := fmt.Sprintf("the %d bytes of the last message", sizes[0])
	if len(sizes) > 1 {
		what = fmt.Sprintf("the last message of each size, %d to %d bytes", sizes[0], sizes[len(sizes)-1])
	}
	if len(c.qps) > 1 {
		what += fmt.Sprintf(", on each of the %d QPs", len(c.qps))
	}
	fmt.Fprintf(c.o.out, " Data verified: %s\n", what)
	return nil
}

// pattern fills b with a sequence both xroce sides compute.
func pattern(b []byte, seed uint64) {
	x := seed*0x9E3779B97F4A7C15 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func usec(d time.Duration) float64 { return float64(d) / 1e3 }

// oobConn connects to the server's TCP port (client), or waits for one client on it
// (server, printing perftest's banner when asked).
func oobConn(server string, port int, out io.Writer, banner bool) (net.Conn, error) {
	if server != "" {
		// An IPv6 address may come bracketed, as in URLs; JoinHostPort adds the brackets.
		server = strings.TrimSuffix(strings.TrimPrefix(server, "["), "]")
		if a, err := netip.ParseAddr(server); err == nil && a.Is6() && a.IsLinkLocalUnicast() && a.Zone() == "" {
			return nil, fmt.Errorf("%s is link-local: name the interface it is on, as in %s%%eth0", server, server)
		}
		return oob.Dial(net.JoinHostPort(server, fmt.Sprint(port)), 10*time.Second)
	}
	ln, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
	if err != nil {
		return nil, fmt.Errorf("listening on TCP port %d: %w", port, err)
	}
	defer ln.Close()
	if banner {
		fmt.Fprintf(out, "\n************************************\n* Waiting for client to connect... *\n************************************\n")
	}
	return ln.Accept()
}
