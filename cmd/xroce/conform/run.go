package conform

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/xroce/xroce/cmd/xroce/oob"
	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// Options configure a run.
type Options struct {
	Link transport.Link // where the frames go out and the answers come in
	// GID is this side's GID (an IPv4-mapped RoCEv2 GID of the link's interface).
	GID roce.GID
	// Server is the peer's address (host or IP) and Port its perftest TCP port.
	Server string
	Port   int
	// PeerCmd, when set, is run (sh -c) before each scenario to start a fresh
	// server, with {server}, {size}, {iters}, {port} and {mtu} filled in; its exit
	// status is part of the verdict (xroce's servers with --guard exit 1 when
	// memory beside their registered region changed).
	PeerCmd string
	// ClientCmd, when set, is run (sh -c) before each responder-role scenario to
	// start the perftest client that connects to the suite, with {client},
	// {size}, {iters}, {port}, {mtu}, {timeout}, {limit} and {addr} filled in
	// (expandClientCmd); its exit status and output are the client's end.
	ClientCmd string
	// ConnectTimeout bounds the wait for the server's TCP port, and in the
	// responder role for the client's connection (default 10s).
	ConnectTimeout time.Duration
	// PcapDir, when set, receives NAME.pcapng per scenario: every frame sent and
	// received on the link during it.
	PcapDir string
	// Log, when set, is told each scenario's progress.
	Log io.Writer
	// LinkState, when set, says why this side's interface cannot carry frames
	// (down, no carrier, gone), nil when it can. The waits for the server and the
	// client end at once when it fails, and a scenario that fails or cannot go on
	// names it: the cause is then this side, not the peer.
	LinkState func() error
}

// Result is one scenario's outcome.
type Result struct {
	Name     string   `json:"name"`
	Role     string   `json:"role"`
	Server   string   `json:"server,omitempty"`
	Client   string   `json:"client,omitempty"` // the responder role's perftest client
	Spec     string   `json:"spec"`
	Expected string   `json:"expected"`
	Observed string   `json:"observed"`
	Pass     bool     `json:"pass"`
	Problems []string `json:"problems,omitempty"`
	Pcap     string   `json:"pcap,omitempty"`
	// PeerOutput is what the peer command (Options.PeerCmd or ClientCmd) printed.
	PeerOutput string `json:"peer_output,omitempty"`
	// Requests are the client's request packets (responder role).
	Requests []Request `json:"requests,omitempty"`
}

// Verdict is PASS or FAIL.
func (r *Result) Verdict() string {
	if r.Pass {
		return "PASS"
	}
	return "FAIL"
}

// Run runs the scenarios in order, each on a fresh connection, and returns their
// results. An error means the run could not go on (the server unreachable, the
// link broken); the results so far are returned with it.
func Run(ctx context.Context, o Options, scenarios []*Scenario) ([]Result, error) {
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	var out []Result
	var l listener
	defer l.close()
	for i, s := range scenarios {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		var r Result
		var err error
		if s.Responder() {
			r, err = runResponder(ctx, &o, s, uint32(0x100+i), &l)
		} else {
			r, err = runOne(ctx, &o, s, uint32(0x100+i))
		}
		if err != nil {
			return out, fmt.Errorf("scenario %s: %w", s.Name, o.withLinkState(err))
		}
		if err := checkLink(o.LinkState); err != nil && !r.Pass {
			r.Problems = append(r.Problems, fmt.Sprintf("this side: %v", err))
		}
		if o.Log != nil {
			fmt.Fprintf(o.Log, "%-40s %s\n", s.Name, r.Verdict())
		}
		out = append(out, r)
	}
	return out, nil
}

// withLinkState puts the failure of this side's interface, when it has one, in
// front of err: the likely cause of a failed exchange, which names the peer.
func (o *Options) withLinkState(err error) error {
	var ld linkDown
	if errors.As(err, &ld) {
		return err
	}
	if state := checkLink(o.LinkState); state != nil {
		return fmt.Errorf("%v; that is likely why: %w", state, err)
	}
	return err
}

// kindOf is the perftest exchange sequence of a server.
func kindOf(server string) oob.Kind {
	if server == "send_bw" {
		return oob.SendBW
	}
	return oob.BW
}

// runOne runs a scenario on a fresh connection: the peer command, the exchange,
// the frames, the answers, the probe, the end of the exchange.
func runOne(ctx context.Context, o *Options, s *Scenario, qpn uint32) (res Result, err error) {
	res = Result{Name: s.Name, Role: RoleRequester, Server: s.Setup.Server, Spec: s.Spec}
	var peer *peerCmd
	if o.PeerCmd != "" {
		if peer, err = startPeer(expandPeerCmd(o.PeerCmd, s, o.Port), "--peer-cmd"); err != nil {
			return res, err
		}
		defer func() {
			if err != nil { // the peer's output often says why
				err = peer.explain(err, peerExitWait)
			}
			peer.wait(time.Second) // on an error path: do not leave it running
		}()
	}
	nc, err := dial(ctx, net.JoinHostPort(o.Server, strconv.Itoa(o.Port)), o.ConnectTimeout, peer, o.LinkState)
	if err != nil {
		return res, err
	}
	sess := oob.NewSession(nc, true, kindOf(s.Setup.Server), 10*time.Second)
	c, err := o.connect(sess, s, qpn)
	if err != nil {
		sess.Abort()
		return res, err
	}
	link, closeTap, err := o.scenarioLink(s, &res)
	if err != nil {
		sess.Abort()
		return res, err
	}
	defer closeTap()
	x := &exchange{c: c, link: link}
	bad, err := x.scenario(s, &res)
	if err == nil {
		err = x.finishSend(s)
	}
	if err != nil {
		sess.Abort()
		return res, err
	}
	if _, err := sess.Finish(oob.Results{Size: uint64(s.Setup.Size), Iters: 1}); err != nil {
		bad = append(bad, fmt.Sprintf("the exchange's end: %v", err))
	}
	if peer != nil {
		out, err := peer.wait(15 * time.Second)
		res.PeerOutput = out
		if err != nil {
			bad = append(bad, fmt.Sprintf("the peer command: %v", err))
		}
	}
	res.Problems, res.Pass = bad, len(bad) == 0
	return res, nil
}

// peerExitWait is how long a failed scenario waits for its peer command to end
// (a peer that failed is exiting) before it shows how it ended.
const peerExitWait = 2 * time.Second

// scenarioLink is the link a scenario runs on: o.Link, or with --pcap a capture of
// it into DIR/NAME.pcapng (res.Pcap); the function closes the capture.
func (o *Options) scenarioLink(s *Scenario, res *Result) (transport.Link, func(), error) {
	if o.PcapDir == "" {
		return o.Link, func() {}, nil
	}
	res.Pcap = filepath.Join(o.PcapDir, s.Name+".pcapng")
	tap, err := pcap.NewTap(keepOpen{o.Link}, res.Pcap, pcap.TapOptions{})
	if err != nil {
		return nil, nil, err
	}
	return tap, func() { tap.Close() }, nil
}

// keepOpen is a link whose Close leaves the inner link open: a scenario's capture
// closes its tap, not the run's link.
type keepOpen struct{ transport.Link }

func (keepOpen) Close() error { return nil }

// connect runs perftest's exchange up to the test as a client, with key messages
// of a QP that exists only as frames: this side's QPN, a random PSN, an rkey and
// address the peer never uses, and this side's GID.
func (o *Options) connect(sess *oob.Session, s *Scenario, qpn uint32) (*Conn, error) {
	out := 1
	if s.Setup.Server == "read_bw" || s.Setup.Server == "atomic_bw" {
		out = 16 // as perftest's READ and atomic tests ask
	}
	rkey := uint32(0x1234)
	if s.Setup.Server == "send_bw" {
		rkey = 0 // as perftest's SEND tests advertise
	}
	local := oob.Dest{OutReads: out, QPN: qpn, PSN: rand.Uint32() & roce.PSNMask, RKey: rkey, VAddr: 0x10000, GID: o.GID}
	mtu, _ := roce.MTUFromBytes(s.Setup.MTU)
	remote, peerMTU, err := sess.Connect([]oob.Dest{local}, mtu, func([]oob.Dest, roce.MTU) error { return nil })
	if err != nil {
		return nil, err
	}
	r := remote[0]
	peerIP := r.GID.Addr()
	if !peerIP.Is4() {
		return nil, fmt.Errorf("the server's GID %v is not IPv4-mapped: run it with the GID index of its IPv4 RoCEv2 GID (-x 1 on rdma_rxe, usually -x 3 on mlx5)", r.GID)
	}
	mac, err := o.Link.Resolve(peerIP)
	if err != nil {
		return nil, fmt.Errorf("resolving %v's Ethernet address: %w", peerIP, err)
	}
	return &Conn{
		LocalMAC: o.Link.HardwareAddr(), PeerMAC: mac,
		LocalIP: o.GID.Addr(), PeerIP: peerIP, LocalQPN: qpn,
		Peer: Peer{QPN: r.QPN, RKey: r.RKey, Base: r.VAddr, RegionLen: 2 * uint64(max(s.Setup.Size, 4096))},
		EPSN: local.PSN, MTU: roce.MinMTU(mtu, peerMTU),
	}, nil
}

// exchange sends frames on a connection and collects the answers.
type exchange struct {
	c    *Conn
	link transport.Link
	epsn int    // the next PSN offset the responder expects, as learned
	msn  uint32 // the last MSN seen
}

// maxWait is how long answers are awaited when fewer than expected have come.
const maxWait = 2 * time.Second

// scenario sends s's frames, judges the answers and probes the QP. It returns
// the differences from the expectation; an error means the link failed.
func (x *exchange) scenario(s *Scenario, res *Result) ([]string, error) {
	x.drain()
	var frames []*Frame
	var delays []time.Duration
	for i := range s.Send {
		f := &s.Send[i]
		for k := 0; k < f.Repeat; k++ {
			frames = append(frames, f)
			d := time.Duration(0)
			if k == 0 {
				d = time.Duration(f.Delay)
			}
			delays = append(delays, d)
		}
	}
	got, err := x.sendAndCollect(frames, delays, len(s.Expect.Responses), time.Duration(s.Expect.Quiet))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.File, err)
	}
	bad := x.c.judge(s.Expect.Responses, got)
	res.Expected = describeAll(s.Expect.Responses)
	res.Observed = x.describeGot(got)
	x.epsn, x.msn = x.c.progress(got, 0, 0)
	if s.Expect.ProbePSN != nil {
		x.epsn = *s.Expect.ProbePSN
	}
	probeBad, usable, err := x.probe(s)
	if err != nil {
		return nil, err
	}
	if *s.Expect.Usable {
		res.Expected += " · usable"
	} else {
		res.Expected += " · QP in error"
	}
	if usable {
		res.Observed += " · usable"
	} else {
		res.Observed += " · QP in error"
	}
	return append(bad, probeBad...), nil
}

// describeAll renders the expected responses as Conn.describe renders answers.
func describeAll(want []Response) string {
	if len(want) == 0 {
		return "silence"
	}
	var b bytes.Buffer
	for i := range want {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(want[i].describe())
	}
	return b.String()
}

func (x *exchange) describeGot(got []*Answer) string {
	if len(got) == 0 {
		return "silence"
	}
	var b bytes.Buffer
	for i, a := range got {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(x.c.describe(a))
	}
	return b.String()
}

// probeFrame is the request that shows the QP still works, as the server's test
// permits: a 64-byte WRITE (write_bw), a 64-byte READ (read_bw), a FETCH_ADD of 0
// (atomic_bw) or a 64-byte SEND (send_bw), at the base address.
func probeFrame(server string, psn int) (Frame, Response) {
	base, _ := ParseExpr("base")
	rkey, _ := ParseExpr("rkey")
	f := Frame{PSN: psn, Repeat: 1}
	r := Response{PSN: psn, Syndrome: &Syndrome{Name: "ACK"}}
	r.Opcode.Opcode = roce.RC_ACKNOWLEDGE
	switch server {
	case "write_bw":
		f.Opcode.Opcode = roce.RC_RDMA_WRITE_ONLY
		f.RETH = &RETH{VA: base, RKey: rkey, Len: 64}
		f.Payload = &Payload{Size: 64, Fill: 0x5a}
	case "read_bw":
		f.Opcode.Opcode = roce.RC_RDMA_READ_REQUEST
		f.RETH = &RETH{VA: base, RKey: rkey, Len: 64}
		r.Opcode.Opcode = roce.RC_RDMA_READ_RESPONSE_ONLY
	case "atomic_bw":
		f.Opcode.Opcode = roce.RC_FETCH_ADD
		f.Atomic = &Atomic{VA: base, RKey: rkey}
		r.Opcode.Opcode = roce.RC_ATOMIC_ACKNOWLEDGE
	default:
		f.Opcode.Opcode = roce.RC_SEND_ONLY
		f.Payload = &Payload{Size: 64, Fill: 0x5a}
	}
	return f, r
}

// probe sends the probe at the learned PSN. A usable QP answers it with an ACK
// (or READ response, atomic ACK) at that PSN carrying the next MSN; a QP in the
// error state drops it (IBTA Vol 1 §10.3.1: the Error state discards what
// arrives). It returns the differences from the expectation and what it saw.
func (x *exchange) probe(s *Scenario) ([]string, bool, error) {
	f, want := probeFrame(s.Setup.Server, x.epsn)
	msn := x.msn + 1
	want.MSN = &msn
	got, err := x.sendAndCollect([]*Frame{&f}, []time.Duration{0}, 1, time.Duration(s.Expect.Quiet))
	if err != nil {
		return nil, false, err
	}
	usable := len(got) > 0
	var bad []string
	if *s.Expect.Usable {
		for _, m := range x.c.judge([]Response{want}, got) {
			bad = append(bad, "probe: "+m)
		}
		if len(bad) == 0 {
			x.epsn++
			x.msn = msn
		}
	} else if usable {
		bad = append(bad, fmt.Sprintf("probe answered (%s): the QP should be in the error state", x.describeGot(got)))
	}
	return bad, usable, nil
}

// finishSend ends a send_bw server's test: it waits for setup.iters receives,
// so the SENDs the scenario did not complete are sent now (the MSN counts the
// completed ones). Nothing is sent to a QP in the error state.
func (x *exchange) finishSend(s *Scenario) error {
	if s.Setup.Server != "send_bw" || !*s.Expect.Usable {
		return nil
	}
	for int(x.msn) < s.Setup.Iters {
		f, _ := probeFrame("send_bw", x.epsn)
		got, err := x.sendAndCollect([]*Frame{&f}, []time.Duration{0}, 1, 0)
		if err != nil {
			return err
		}
		epsn, msn := x.c.progress(got, x.epsn, x.msn)
		if msn == x.msn {
			return fmt.Errorf("topping up send_bw's receives: the SEND at PSN offset %+d got %s", x.epsn, x.describeGot(got))
		}
		x.epsn, x.msn = epsn, msn
	}
	return nil
}

// drain discards what the link holds from before.
func (x *exchange) drain() {
	bufs := make([][]byte, 64)
	for {
		n, err := x.link.Recv(bufs)
		if n == 0 || err != nil {
			return
		}
	}
}

// sendAndCollect builds and sends frames (each after its delay and, when it uses
// an earlier answer's original remote data, once that answer has come or maxWait
// passed), then collects the peer's packets to this side's QP: until want have
// come and nothing more for quiet, or until maxWait passes without one while
// fewer than want have come.
func (x *exchange) sendAndCollect(frames []*Frame, delays []time.Duration, want int, quiet time.Duration) ([]*Answer, error) {
	var got []*Answer
	bufs := make([][]byte, 64)
	for i, f := range frames {
		// Collect while waiting, so the answers keep their order.
		for dl := time.Now().Add(delays[i]); time.Now().Before(dl); {
			if err := x.collect(&got, bufs, dl); err != nil {
				return nil, err
			}
		}
		for dl := time.Now().Add(maxWait); len(got) < f.refs() && time.Now().Before(dl); {
			if err := x.collect(&got, bufs, dl); err != nil {
				return nil, err
			}
		}
		x.c.Peer.Orig = origs(got)
		b, err := x.c.Build(f)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", f.line, err)
		}
		if err := x.send(b); err != nil {
			return nil, err
		}
	}
	last := time.Now()
	for {
		wait := quiet
		if len(got) < want {
			wait = max(quiet, maxWait)
		}
		n := len(got)
		if err := x.collect(&got, bufs, last.Add(wait)); err != nil {
			return nil, err
		}
		if len(got) == n {
			return got, nil
		}
		last = time.Now()
	}
}

// collect receives until deadline, or until one answer came after the call began
// and the link is empty.
func (x *exchange) collect(got *[]*Answer, bufs [][]byte, deadline time.Time) error {
	start := len(*got)
	for {
		n, err := x.link.Recv(bufs)
		if err != nil {
			return fmt.Errorf("receiving: %w", err)
		}
		for _, f := range bufs[:n] {
			if a := x.answer(f); a != nil {
				*got = append(*got, a)
			}
		}
		if n > 0 {
			continue
		}
		if len(*got) > start || !time.Now().Before(deadline) {
			return nil
		}
		_ = x.link.Wait(deadline)
	}
}

// answer decodes a received frame and keeps it if it is the peer's RoCE packet to
// this side's QP.
func (x *exchange) answer(f []byte) *Answer {
	a := &Answer{Frame: bytes.Clone(f)}
	err := a.Pkt.Decode(a.Frame)
	if err == roce.ErrBadICRC {
		a.BadICRC = true
	} else if err != nil {
		return nil
	}
	if a.Pkt.BTH.DestQP != x.c.LocalQPN || a.Pkt.SrcAddr() != x.c.PeerIP {
		return nil
	}
	return a
}

// send puts one frame on the link, retrying while it is busy.
func (x *exchange) send(f []byte) error {
	end := time.Now().Add(time.Second)
	for {
		n, err := x.link.Send([][]byte{f})
		if err != nil {
			return fmt.Errorf("sending: %w", err)
		}
		if n == 1 {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("sending: the link stayed busy for a second")
		}
		time.Sleep(100 * time.Microsecond)
	}
}
