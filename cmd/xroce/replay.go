package main

import (
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/xroce/xroce/cmd/xroce/oob"
	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// runReplay is `xroce replay FILE --as IP`: the engine emulates one endpoint of a
// capture and its answers are compared with the captured ones (pcap.Replay).
func runReplay(name string, args []string) error { return replay(args, os.Stdout) }

// errDifferences is returned when the replay found differences (exit status 1).
var errDifferences = errors.New("differences found")

func replay(args []string, w io.Writer) error {
	fs := pflag.NewFlagSet("xroce replay", pflag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() {
		fmt.Fprintf(w, "usage: xroce replay FILE --as IP [flags]\n\n"+
			"Emulates the endpoint IP of a capture with xroce's engine: for each of its RC connections a\n"+
			"responder QP is set up with the captured QPNs, PSN, rkeys, addresses and memory contents, fed\n"+
			"the peer's request frames in order, and its responses are compared with the captured ones\n"+
			"field by field (opcode, PSN, QPN, AckReq, AETH syndrome and MSN, atomic result, payload bytes;\n"+
			"not the IP ID, TTL, UDP source port or ICRC). The parameters come from the perftest or\n"+
			"rc_pingpong TCP exchange in the capture, else from the RoCE frames, and flags override them.\n"+
			"Exits 1 on any difference.\n\n")
		fs.PrintDefaults()
	}
	asFlag := fs.String("as", "", "IP address of the endpoint to emulate (required)")
	port := fs.Int("port", oob.DefaultPort, "TCP port of the perftest / rc_pingpong exchange")
	qpn := fs.String("qpn", "", "replay only the connection whose emulated QP has this number (hex 0x11 or decimal); with no such connection in the capture, define it with the flags below")
	peerQPN := fs.String("peer-qpn", "", "the peer's QPN")
	psn := fs.String("psn", "", "the first request PSN the emulated side expects (the peer's initial PSN)")
	mtu := fs.Int("mtu", 0, "path MTU in bytes (default: from the exchange, else inferred)")
	rkey := fs.String("rkey", "", "rkey of the emulated side's memory region (with --vaddr)")
	vaddr := fs.String("vaddr", "", "address of the region's first byte, as the peer uses it (with --rkey)")
	length := fs.String("len", "", "the region's size in bytes (default: as far as the requests reach); requests beyond it get remote access errors")
	rdAtomic := fs.Int("max-rd-atomic", 0, "READ and atomic requests the emulated responder takes at once (default: from the exchange, else 128)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errUsage
		}
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("want one capture file, got %d arguments", fs.NArg())
	}
	if *asFlag == "" {
		fs.Usage()
		return fmt.Errorf("--as IP is required: the address of the endpoint to emulate")
	}
	as, err := netip.ParseAddr(*asFlag)
	if err != nil {
		return fmt.Errorf("--as %q: %v", *asFlag, err)
	}
	as = as.Unmap()
	num := func(name, s string, bits int) (uint64, bool, error) {
		if s == "" {
			return 0, false, nil
		}
		v, err := strconv.ParseUint(s, 0, bits)
		if err != nil {
			return 0, false, fmt.Errorf("--%s %q: want a %d-bit number, hex with 0x or decimal", name, s, bits)
		}
		return v, true, nil
	}
	var ov override
	var errs [7]error
	ov.qpn, ov.hasQPN, errs[0] = num("qpn", *qpn, 24)
	ov.peerQPN, ov.hasPeerQPN, errs[1] = num("peer-qpn", *peerQPN, 24)
	ov.psn, ov.hasPSN, errs[2] = num("psn", *psn, 24)
	ov.rkey, ov.hasRKey, errs[3] = num("rkey", *rkey, 32)
	ov.vaddr, ov.hasVAddr, errs[4] = num("vaddr", *vaddr, 64)
	ov.length, _, errs[5] = num("len", *length, 64)
	if *mtu != 0 {
		ov.mtu, errs[6] = roce.MTUFromBytes(*mtu)
		if errs[6] != nil {
			errs[6] = fmt.Errorf("--mtu %d: %v", *mtu, errs[6])
		}
	}
	if err := errors.Join(errs[:]...); err != nil {
		return err
	}
	if ov.hasRKey != ov.hasVAddr || (ov.length != 0 && !ov.hasRKey) {
		return fmt.Errorf("--rkey and --vaddr go together (and --len needs them)")
	}
	if *rdAtomic < 0 || *rdAtomic > transport.MaxQPRdAtom || fs.Changed("max-rd-atomic") && *rdAtomic == 0 {
		return fmt.Errorf("--max-rd-atomic %d: want 1..%d", *rdAtomic, transport.MaxQPRdAtom)
	}
	ov.rdAtomic = *rdAtomic
	if *port <= 0 || *port > 65535 {
		return fmt.Errorf("--port %d: want 1..65535", *port)
	}

	frames, err := pcap.ReadFile(fs.Arg(0))
	torn := errors.Is(err, pcap.ErrTorn) && len(frames) > 0
	if torn {
		// A recording cut short: replay the whole frames before the torn record,
		// up to the emulated endpoint's last answer (the answers to the requests
		// after it are lost with the torn record).
		whole := len(frames)
		var cut int
		frames, cut = trimTorn(frames, as)
		if !answers(frames, as) {
			return fmt.Errorf("%v; its %d whole frames hold %d requests to %s and no answer of %s's, so nothing can be compared: replay a recording that goes on past the endpoint's first answer", err, whole, cut, as, as)
		}
		fmt.Fprintf(w, "note: %v; replaying the %d whole frames before it, up to %s's last answer (%d requests after it left out)\n", err, len(frames), as, cut)
	} else if err != nil {
		return err
	}
	if n := cutFrames(frames); n > 0 {
		return fmt.Errorf("the capture's snap length cut %d of its %d frames: replay needs whole frames, to feed them to the engine and check their ICRCs (record without --pcap-snaplen; xroce dump shows the headers of a cut capture)", n, len(frames))
	}
	conns, notes := captureConns(frames, as, uint16(*port))
	conns, err = ov.apply(conns, frames, as)
	if err != nil {
		return err
	}
	if torn {
		var cut int
		if frames, cut = trimUnanswered(frames, conns, as); cut > 0 {
			fmt.Fprintf(w, "note: %d more requests left out: the recording lost their answers (READs the peer sent ahead of %s's last answer)\n", cut, as)
		}
	}
	rep, err := pcap.Replay(frames, pcap.ReplayConfig{As: as, Conns: conns})
	if err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if err := rep.Write(w); err != nil {
		return err
	}
	if failed := rep.SetupFailures(); failed > 0 {
		// Named apart from the differences: nothing was compared on those
		// connections (the error is in the report above).
		diffs := rep.Differences() - failed
		return fmt.Errorf("%d connection%s of the capture could not be set up (see above); %d difference%s in the others", failed, plural(failed), diffs, plural(diffs))
	}
	if n := rep.Differences(); n > 0 {
		return fmt.Errorf("%w: %d", errDifferences, n)
	}
	compared := 0
	for _, c := range rep.Conns {
		compared += c.Compared
	}
	if compared == 0 {
		return fmt.Errorf("nothing compared: %s answered no request of the capture's RC connections (whole frames are needed: a capture cut by a snaplen, e.g. --pcap-snaplen, fails its ICRCs; is --as the responder's address?)", as)
	}
	return nil
}

// captureConns returns the connection parameters of endpoint as: from the perftest
// and rc_pingpong exchanges of the capture, plus those inferred from the RoCE frames
// for connections no exchange describes. Notes say what was skipped.
func captureConns(frames []pcap.Frame, as netip.Addr, port uint16) ([]pcap.Conn, []string) {
	var conns []pcap.Conn
	var notes []string
	for _, s := range pcap.TCPStreams(frames, port) {
		c, ok, note := exchangeConn(s, as)
		if note != "" {
			notes = append(notes, note)
		}
		if ok {
			conns = append(conns, c)
		}
	}
	for _, c := range pcap.InferConns(frames, as) {
		known := false
		for _, e := range conns {
			known = known || (e.QPN == c.QPN && e.Peer == c.Peer)
		}
		if !known {
			conns = append(conns, c)
		}
	}
	pcap.SortConns(conns)
	return conns, notes
}

// exchangeConn reads one TCP exchange: rc_pingpong's 52-byte messages, or perftest's
// version, buffer sizes, MTU and 108-byte key messages (the layout oob.Session
// writes). It reports ok when the exchange is one of them and as is one side (by
// its GID, else its TCP address).
func exchangeConn(s pcap.TCPStream, as netip.Addr) (pcap.Conn, bool, string) {
	frames := fmt.Sprintf("frames %d-%d", s.First, s.Last)
	type side struct {
		qpn, psn uint32
		gid      roce.GID
		tcp      netip.Addr
		rkey     uint32
		vaddr    uint64
		outReads int
	}
	var cli, srv side
	kind := ""
	var mtu roce.MTU
	const keyOff, keyLen, mtuOff = 16 + 4 + 4 + 2, 108, 16 + 4 + 4
	if len(s.ToServer) >= 52 && len(s.ToClient) >= 52 {
		c, err1 := oob.ParsePingpong(s.ToServer[:52])
		v, err2 := oob.ParsePingpong(s.ToClient[:52])
		if err1 == nil && err2 == nil {
			kind = "rc_pingpong exchange"
			cli = side{qpn: c.QPN, psn: c.PSN, gid: c.GID}
			srv = side{qpn: v.QPN, psn: v.PSN, gid: v.GID}
		}
	}
	if kind == "" && len(s.ToServer) >= keyOff+keyLen && len(s.ToClient) >= keyOff+keyLen {
		c, err1 := oob.ParseKey(s.ToServer[keyOff : keyOff+keyLen])
		v, err2 := oob.ParseKey(s.ToClient[keyOff : keyOff+keyLen])
		if err1 == nil && err2 == nil {
			kind = "perftest exchange"
			cli = side{qpn: c.QPN, psn: c.PSN, gid: c.GID, rkey: c.RKey, vaddr: c.VAddr, outReads: c.OutReads}
			srv = side{qpn: v.QPN, psn: v.PSN, gid: v.GID, rkey: v.RKey, vaddr: v.VAddr, outReads: v.OutReads}
			m1, m2 := roce.MTU(s.ToServer[mtuOff]-'0'), roce.MTU(s.ToClient[mtuOff]-'0')
			if m1.Valid() && m2.Valid() {
				mtu = roce.MinMTU(m1, m2)
			}
		}
	}
	if kind == "" {
		if len(s.ToServer)+len(s.ToClient) == 0 {
			return pcap.Conn{}, false, ""
		}
		return pcap.Conn{}, false, fmt.Sprintf("the TCP connection %s → %s (%s) is neither a perftest nor an rc_pingpong exchange", s.Client, s.Server, frames)
	}
	cli.tcp, srv.tcp = s.Client.Addr().Unmap(), s.Server.Addr().Unmap()
	addr := func(x side) netip.Addr {
		if !x.gid.IsZero() && !x.gid.Addr().IsLinkLocalUnicast() {
			return x.gid.Addr()
		}
		return x.tcp
	}
	var us, peer side
	switch {
	case addr(srv) == as:
		us, peer = srv, cli
	case addr(cli) == as:
		us, peer = cli, srv
	default:
		return pcap.Conn{}, false, ""
	}
	c := pcap.Conn{Peer: addr(peer), QPN: us.qpn, PeerQPN: peer.qpn, PSN: peer.psn, MTU: mtu, From: s.First,
		Source: fmt.Sprintf("%s, %s", kind, frames)}
	if us.rkey != 0 {
		c.Regions = []pcap.Region{{RKey: us.rkey, VA: us.vaddr}}
	}
	if us.outReads > 0 {
		// perftest sets max_dest_rd_atomic to its own out_reads (ctx_modify_qp_to_rtr).
		c.MaxDestRdAtomic = us.outReads
	}
	if s.Gap {
		c.Source += ", with bytes missing from the capture"
	}
	return c, true, ""
}

// override holds the parameter flags.
type override struct {
	qpn, peerQPN, psn, rkey, vaddr, length uint64
	hasQPN, hasPeerQPN, hasPSN             bool
	hasRKey, hasVAddr                      bool
	mtu                                    roce.MTU
	rdAtomic                               int
}

func (o override) any() bool {
	return o.hasPeerQPN || o.hasPSN || o.hasRKey || o.mtu != 0 || o.rdAtomic != 0
}

// apply narrows conns to --qpn and sets what the flags give. A --qpn that no
// connection has defines one: the peer is the address that sends to that QPN.
func (o override) apply(conns []pcap.Conn, frames []pcap.Frame, as netip.Addr) ([]pcap.Conn, error) {
	if o.hasQPN {
		var keep []pcap.Conn
		for _, c := range conns {
			if uint64(c.QPN) == o.qpn {
				keep = append(keep, c)
			}
		}
		if len(keep) == 0 {
			c, err := connForQPN(frames, as, uint32(o.qpn))
			if err != nil {
				return nil, err
			}
			keep = append(keep, c)
		}
		conns = keep
	}
	if !o.any() {
		return conns, nil
	}
	if len(conns) > 1 {
		return nil, fmt.Errorf("%d connections of %s in the capture: choose one with --qpn before overriding its parameters", len(conns), as)
	}
	if len(conns) == 0 {
		return nil, fmt.Errorf("no connection of %s in the capture: give --qpn", as)
	}
	c := &conns[0]
	c.Source = "flags and " + c.Source
	if o.hasPeerQPN {
		c.PeerQPN = uint32(o.peerQPN)
	}
	if o.hasPSN {
		c.PSN = uint32(o.psn)
	}
	if o.mtu != 0 {
		c.MTU = o.mtu
	}
	if o.rdAtomic != 0 {
		c.MaxDestRdAtomic = o.rdAtomic
	}
	if o.hasRKey {
		c.Regions = []pcap.Region{{RKey: uint32(o.rkey), VA: o.vaddr, Len: o.length}}
	}
	return conns, nil
}

// connForQPN defines a connection for a QPN the capture's peers send to.
func connForQPN(frames []pcap.Frame, as netip.Addr, qpn uint32) (pcap.Conn, error) {
	var p roce.Packet
	for _, f := range frames {
		if err := p.Decode(f.Data); err != nil && err != roce.ErrBadICRC {
			continue
		}
		if p.DstAddr() == as && p.BTH.DestQP == qpn && p.BTH.Opcode.Service() == roce.ServiceRC {
			return pcap.Conn{Peer: p.SrcAddr(), QPN: qpn, PSN: p.BTH.PSN, Source: fmt.Sprintf("QPN from --qpn, peer from frame %d", f.Index)}, nil
		}
	}
	return pcap.Conn{}, fmt.Errorf("--qpn 0x%x: no RC frame of the capture goes to QPN 0x%x at %s", qpn, qpn, as)
}

// cutFrames counts the frames a snap length cut (fewer bytes held than the frame
// had on the wire).
func cutFrames(frames []pcap.Frame) int {
	n := 0
	for _, f := range frames {
		if len(f.Data) < f.Len {
			n++
		}
	}
	return n
}

// answers says whether any RoCE frame of frames comes from as.
func answers(frames []pcap.Frame, as netip.Addr) bool {
	var p roce.Packet
	for _, f := range frames {
		if err := p.Decode(f.Data); (err == nil || err == roce.ErrBadICRC) && p.SrcAddr() == as {
			return true
		}
	}
	return false
}

// trimTorn drops the RoCE frames to as after the last one from as, and returns
// what is left and how many it dropped.
func trimTorn(frames []pcap.Frame, as netip.Addr) ([]pcap.Frame, int) {
	var p roce.Packet
	last := -1
	for i, f := range frames {
		if p.Decode(f.Data) == nil && p.SrcAddr() == as {
			last = i
		}
	}
	kept, cut := frames[:last+1], 0
	for _, f := range frames[last+1:] {
		if p.Decode(f.Data) == nil && p.DstAddr() == as {
			cut++
			continue
		}
		kept = append(kept, f)
	}
	return kept, cut
}
