package main

import (
	"context"
	"errors"
	"os"
	"strings"
	"time"

	"github.com/xroce/xroce/cmd/xroce/oob"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

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

// qpAccess and mrAccess are what a test's QPs and buffer allow the peer, as
// perftest 4.5 sets them (perftest_resources.c, ctx_modify_qp_to_init and
// create_single_mr): only the test's own operation, and for SEND tests remote write
// on the QP with a buffer that allows no remote access. A peer that runs another
// test then gets a NAK (remote access error) from xroce as from perftest.
func (t test) qpAccess() transport.Access {
	switch t.op {
	case transport.WR_RDMA_WRITE, transport.WR_SEND:
		return transport.AccessRemoteWrite
	case transport.WR_RDMA_READ:
		return transport.AccessRemoteRead
	}
	return transport.AccessRemoteAtomic
}

func (t test) mrAccess() transport.Access {
	if t.op == transport.WR_SEND {
		return transport.AccessLocalWrite
	}
	return transport.AccessLocalWrite | t.qpAccess()
}

func runPerf(name string, args []string) error {
	o, err := parsePerf(name, args, os.Stdout)
	if err != nil {
		return err
	}
	oneThread()
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
	// awaitsPeerSends: a send_bw -b side whose SENDs are done waits for the
	// peer's first one (bidirIdle).
	awaitsPeerSends bool
	// peerRequests counts the RDMA requests the peer runs against this side of
	// a WRITE or READ test (bidirWatch).
	peerRequests func() uint64
	mr           memRegion
	buf          []byte
	half         int // each QP has 2*half bytes of buf; the receive half (latency tests) starts at half
	size         int // the message size being run (each in turn with -a)
	local        []oob.Dest
	remote       []oob.Dest
	mtu          roce.MTU
	cm           *cmConns // -R: the RDMA CM's connections

	linkLooked time.Time // when linkCheckDue last looked

	guard       [2][]byte     // --guard: the watched bytes before and after buf
	recvd       int           // receive completions (send_lat)
	lastPoll    time.Time     // write_lat client: when the peer's previous write arrived
	remoteIters uint64        // iterations the client reported (bandwidth server)
	verified    int           // sizes whose data was verified
	gidFlag     string        // the flag that sets the GID index, for messages: -x, or pingpong's -g
	peer        *oob.Session  // the out-of-band exchange, watched while the test runs
	strays      strayMark     // the counters before the exchange: frames for no QP of the test
	limit       time.Duration // how long a completion wait may see no sign of life; 0: 30 s
	spin        time.Duration // how long a completion wait polls before it sleeps (0 with -e)
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

// perf runs test t as o says, perftest's way: it opens the provider, creates the
// QPs, makes the out-of-band exchange that connects them, runs each size and prints
// its table, exchanges the results and checks the data with --verify.
func perf(ctx context.Context, t test, o *perfOptions) (err error) {
	e, err := openEnv(o.linkOptions)
	if err != nil {
		return err
	}
	defer e.stop()
	c := &conn{t: t, o: o, env: e, client: o.server != "", spin: cqSpin(o.events)}
	defer func() { // after every path: memory beside the region must be untouched
		if gerr := c.checkGuard(); gerr != nil {
			err = errors.Join(err, gerr)
		}
	}()
	if o.counters {
		before := e.prov.Counters()
		defer func() {
			printCounters(o.out, providerName(o.provider), before, e.prov.Counters())
			printWindows(o.out, c.qps)
		}()
	}
	c.activeMTU()
	if err := c.setup(); err != nil {
		return err
	}
	var s *oob.Session
	if o.rdmaCM {
		cm, err := c.cmConnect(ctx)
		if err != nil {
			return err
		}
		defer cm.close()
		s = oob.NewChannelSession(cm.ch, c.client, t.kind, c.exchangeTimeout())
		s.DataConnect = func() error { return cm.connectData(ctx) }
	} else {
		if !c.client {
			defer c.cmAgent(os.Stderr)()
		}
		nc, err := oobConn(o.server, o.port, o.out, o.output == "")
		if err != nil {
			return err
		}
		s = oob.NewSession(nc, c.client, t.kind, c.exchangeTimeout())
	}
	c.peer = s
	if e.ifname != "" {
		s.Check = c.linkCheck
	}
	s.RunAll = o.all
	s.Duplex, s.Duration = o.bidir, o.duration > 0
	rcvd := c.counterWatch("rcvd_pkts")
	s.Alive = func() bool { return rcvd() > 0 }
	s.Quiet = c.quiet
	c.strays = markStrays(e)
	c.peerRequests = c.bidirWatch() // before the exchange: a peer's requests may follow it at once
	ours := c.ourMTU()
	remote, peerMTU, err := s.Connect(c.local, ours, c.connect)
	if err != nil {
		s.Abort()
		return err
	}
	c.remote = c.pairRemote(remote)
	c.printHeader(peerMTU)
	var res oob.Results
	if t.lat {
		err = c.latSizes(s)
		if err == nil && s.Kind() == oob.Lat {
			c.linger(uint8(c.o.qpTimeout)) // write_lat: no closing exchange
		}
	} else {
		res, err = c.bwSizes(ctx, s)
	}
	if err != nil {
		s.Abort()
		return err
	}
	got, err := s.Finish(res)
	if err == nil && !c.o.bidir && !t.lat {
		// After the closing exchange, which a -b peer begins once its own
		// requests are done.
		err = c.bidirCheck(c.peerRequests)
	}
	if err != nil {
		return err
	}
	if !t.lat && !c.movesData() {
		c.printServerBW(got)
	}
	return c.verifyEnd()
}

// exchangeTimeout is how long each step of the out-of-band exchange waits: a
// minute, plus the test's duration for the barrier that waits for the test to end,
// and more while the peer's frames keep arriving (a long -n); --run_infinitely
// waits without limit (0). A -a run's bandwidth server waits for every size.
func (c *conn) exchangeTimeout() time.Duration {
	timeout := 60*time.Second + time.Duration(c.o.duration)*time.Second
	if c.o.all && c.t.kind == oob.BW {
		timeout = 10 * time.Minute
	}
	if c.o.runInf {
		timeout = 0
	}
	return timeout
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

// cqSpin is how long a tool polls its CQ before it sleeps on the CQ's event:
// none with -e (events).
func cqSpin(events bool) time.Duration {
	if events {
		return 0
	}
	return spinTime
}

// spinTime: a tool without -e polls its CQ this long before it sleeps.
const spinTime = 50 * time.Microsecond
