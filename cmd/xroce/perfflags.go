package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

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
	bidir       bool   // -b: both sides run the test at once
	events      bool   // -e: sleep on the CQ's events, never spin
	postList    int    // -l: work requests per post, the last one signaled
	cqMod       int    // -Q: a completion every cqMod work requests (resolveCQMod)
	rxDepth     int    // -r: receives each QP keeps posted (send tests; resolveRxDepth)
	noPeak      bool   // -N: no peak bandwidth (conn.noPeak adds perftest's other cases)
	output      string // --output: one figure instead of the report
	runInf      bool
	verify      bool
	verifyAll   bool // --verify-all: every message checked (implies verify)
	counters    bool
	inline      int
	qpTimeout   int
	conn        string
	ibPort      int
	all         bool
	atomicType  string // atomic_bw's -A: FETCH_AND_ADD or CMP_AND_SWAP
	rdmaCM      bool   // -R: the exchange and the test QPs connected by the RDMA CM
	server      string // the client's server address; empty for the server
	guard       int    // --guard: bytes watched on each side of the registered region
	out         io.Writer
}

// parsePerf parses the flags of perftest's test name (write_bw, read_lat, ...) and
// the server address a client is given. Errors name the flag and its range;
// -h/--help gives errUsage.
func parsePerf(name string, args []string, out io.Writer) (*perfOptions, error) {
	o := &perfOptions{out: out}
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(out)
	o.addFlags(fs, name)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, errUsage
		}
		return nil, err
	}
	for _, u := range notYet {
		if fs.Changed(u.long) {
			return nil, fmt.Errorf("%s is not supported yet: %s", u.flag(), u.why)
		}
	}
	if fs.Changed("duration") && o.duration == 0 {
		return nil, fmt.Errorf("-D 0: the duration is in seconds, 1..%d", maxDuration)
	}
	if err := o.check(name, fs.Args()); err != nil {
		return nil, err
	}
	if fs.NArg() == 1 {
		o.server = fs.Arg(0)
	}
	o.verify = o.verify || o.verifyAll
	if o.txDepth > o.iters && o.duration == 0 && !o.runInf {
		o.txDepth = o.iters // as perftest's parser does: no more in flight than there are
	}
	if err := o.checkCQMod(fs.Changed(cqModOptLong)); err != nil {
		return nil, err // perftest checks the range in every test
	}
	if !strings.HasSuffix(name, "_lat") {
		if err := o.resolveCQMod(fs.Changed(cqModOptLong), out); err != nil {
			return nil, err
		}
	}
	o.resolveRxDepth(name)
	return o, nil
}

// addFlags defines test name's flags on fs, with perftest's names and defaults.
func (o *perfOptions) addFlags(fs *pflag.FlagSet, name string) {
	lat := strings.HasSuffix(name, "_lat")
	// perftest's defaults (perftest_parameters.c): 5000 iterations for
	// ib_write_bw (DEF_ITERS_WB), 1000 for every other test (DEF_ITERS), so
	// that a peer running Debian's perftest with its defaults runs as many.
	defSize, defIters := 65536, 1000
	if name == "write_bw" {
		defIters = 5000
	}
	if lat {
		defSize = 2
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
	defRx := 1
	if strings.HasPrefix(name, "send_") {
		defRx = defRxSend
	}
	fs.IntVarP(&o.rxDepth, "rx-depth", "r", defRx, "receives each QP keeps posted (send tests; 1, none, for the others)")
	fs.BoolP("cpu-freq", "F", false, "accepted for perftest compatibility (no CPU frequency check here)")
	fs.IntVarP(&o.port, "port", "p", oob.DefaultPort, "TCP port of the out-of-band exchange (with -R: the RDMA CM port)")
	fs.BoolVarP(&o.rdmaCM, "rdma_cm", "R", false, "connect with the RDMA CM, as perftest -R: the exchange runs on a CM-connected QP and each test QP is a CM connection (both sides need -R)")
	fs.IntVar(&o.tclass, "tclass", 0, "traffic class (IPv4 TOS / IPv6 traffic class)")
	fs.BoolVar(&o.reportGbits, "report_gbits", false, "report bandwidth in Gb/s")
	fs.StringVar(&o.output, "output", "", "print one figure per size instead of the report: bandwidth or message_rate (bandwidth tests), latency (latency tests)")
	fs.BoolVarP(&o.events, "events", "e", false, "sleep on completion events; without it the tool polls its CQ a while before it sleeps")
	fs.BoolVarP(&o.bidir, "bidirectional", "b", false, "both sides run the test at once, each reporting the sum of both directions (give it on both sides)")
	fs.IntVarP(&o.postList, "post_list", "l", 1, "post work requests in lists of this size, with one completion per list")
	fs.IntVarP(&o.cqMod, cqModOptLong, cqModOptShort, defCQMod, "ask for a completion every this many work requests (perftest's CQ moderation; unless given: 1 above 8 KiB without -a or -e, and the list size with -l)")
	fs.BoolVarP(&o.noPeak, "noPeak", "N", false, "cancel the peak bandwidth (BW peak 0.00), as perftest does also with -D, --run_infinitely, -n above 20000 and on a send_bw server without -b")
	fs.BoolVar(&o.runInf, "run_infinitely", false, "run until interrupted, a line a second (with -D: a line every D seconds)")
	fs.IntVarP(&o.inline, "inline_size", "I", 0, fmt.Sprintf("send messages up to this size inline (at most %d)", transport.MaxInline))
	fs.IntVarP(&o.qpTimeout, "qp-timeout", "u", transport.DefaultTimeout, "local ACK timeout: 4.096 µs × 2^u")
	fs.StringVarP(&o.conn, "connection", "c", "RC", "connection type (RC only)")
	if name == "atomic_bw" {
		fs.StringVarP(&o.atomicType, "atomic_type", "A", "FETCH_AND_ADD", "FETCH_AND_ADD or CMP_AND_SWAP (the client's choice)")
	}
	fs.BoolVar(&o.verify, "verify", false, "verify the data moved (both sides must be xroce): the last message of each size, on each QP")
	fs.BoolVar(&o.verifyAll, "verify-all", false, "write_bw, read_bw and send_bw: verify every message (implies --verify; give it on both sides): each has content and a buffer slot of its own on both sides, -q × -n × -s at most 1 GiB; one size, so not with -a, -b, -D or --run_infinitely (nor atomic_bw or the latency tests)")
	if lat { // what the latency tests refuse or ignore is not in their help
		for _, f := range []string{"duration", "run_infinitely", "bidirectional", "post_list", cqModOptLong, "noPeak", "qp", "verify-all"} {
			_ = fs.MarkHidden(f)
		}
	}
	for _, u := range notYet {
		if u.value {
			fs.StringP(u.long, u.short, "", u.why)
		} else {
			fs.BoolP(u.long, u.short, false, u.why)
		}
		_ = fs.MarkHidden(u.long)
	}
	addLinkFlags(fs, &o.linkOptions)
	fs.IntVar(&o.guard, "guard", 0, "watch this many bytes on each side of the registered buffer (a multiple of 4096, at most 1 MiB): filled with a pattern, checked when the test ends; a change fails the run (xroce conform's memory-safety check)")
	fs.BoolVar(&o.counters, "counters", false, "print the counters that moved (the engine's, or the RDMA device's hw_counters)")
}

// maxDuration bounds -D: a year, in seconds.
const maxDuration = 365 * 24 * 3600

// maxPerftestSize is the largest -s perftest takes (UINT_MAX / 2 in its parser,
// perftest_parameters.c), one byte under the device's max_msg_sz (2^31).
const maxPerftestSize = 1<<31 - 1

// notYet lists perftest flags xroce's tools do not implement yet: they are refused
// as not supported, with the reason, rather than as unknown flags.
var notYet = []unsupportedFlag{
	{"comm_rdma_cm", "z", false, "the exchange runs over TCP, or with -R both it and the test QPs over the RDMA CM; -z (a CM exchange with hand-connected QPs) is not implemented"},
}

// unsupportedFlag is a perftest flag the tools refuse, with the reason.
type unsupportedFlag struct {
	long, short string
	value       bool // takes a value (--output=...)
	why         string
}

// flag names the flag as perftest's help does: "-R/--rdma_cm".
func (u unsupportedFlag) flag() string {
	if u.short == "" {
		return "--" + u.long
	}
	return "-" + u.short + "/--" + u.long
}

// check refuses flag values out of range and combinations test name does not take;
// args are the arguments left after the flags.
func (o *perfOptions) check(name string, args []string) error {
	lat := strings.HasSuffix(name, "_lat")
	switch {
	case len(args) > 1:
		return fmt.Errorf("one server address at most, got %q", args)
	case o.conn != "RC":
		return fmt.Errorf("-c %s: xroce's perftest tools run RC QPs only so far (UC and UD run in xroce pingpong --connection; no XRC or DC): run with -c RC, the default", o.conn)
	case o.qps < 1 || o.qps > maxQPs:
		return fmt.Errorf("-q %d: the number of QPs is 1..%d", o.qps, maxQPs)
	case o.ibPort != 1:
		return fmt.Errorf("-i %d: xroce devices have port 1 only", o.ibPort)
	case o.guard < 0 || o.guard > maxGuard || o.guard%4096 != 0:
		return fmt.Errorf("--guard %d: a multiple of 4096 bytes, 0 to %d (the region stays page-aligned)", o.guard, maxGuard)
	case lat && o.qps != 1:
		return fmt.Errorf("-q %d: multiple QPs only available on bw tests (as in perftest)", o.qps)
	case lat && (o.duration != 0 || o.runInf):
		return fmt.Errorf("-D and --run_infinitely are for the bandwidth tests: %s runs -n iterations", name)
	case o.all && name == "atomic_bw":
		return fmt.Errorf("-a: the message size cannot be changed for atomic tests (as in perftest)")
	case o.all && (o.duration > 0 || o.runInf):
		return fmt.Errorf("-a runs -n iterations of each size: it does not go with -D or --run_infinitely")
	case o.size < 1 || o.size > maxPerftestSize:
		return fmt.Errorf("-s %d: the message size must be 1..%d, as in perftest (Message Size should be between 1 and %d)", o.size, maxPerftestSize, maxPerftestSize)
	case name == "atomic_bw" && o.atomicType != "FETCH_AND_ADD" && o.atomicType != "CMP_AND_SWAP":
		return fmt.Errorf("-A %s: FETCH_AND_ADD or CMP_AND_SWAP", o.atomicType)
	case o.atomicType == "CMP_AND_SWAP" && o.verify:
		return fmt.Errorf("--verify checks FETCH_AND_ADD's counters: it does not go with -A CMP_AND_SWAP")
	case name == "atomic_bw" && o.size != 8:
		return fmt.Errorf("-s %d: atomics move 8 bytes: leave -s out, or give -s 8", o.size)
	case o.duration < 0 || o.duration > maxDuration:
		return fmt.Errorf("-D %d: the duration is in seconds, 1..%d", o.duration, maxDuration)
	case o.iters <= 0:
		return fmt.Errorf("-n %d: the number of iterations must be at least 1", o.iters)
	case o.txDepth <= 0:
		return fmt.Errorf("-t %d: the TX depth must be at least 1", o.txDepth)
	case o.tclass < 0 || o.tclass > 255:
		return fmt.Errorf("--tclass %d: the traffic class is 0..255", o.tclass)
	case o.gidIndex < -1:
		return fmt.Errorf("-x %d: GID indexes start at 0", o.gidIndex)
	case o.port <= 0 || o.port > 65535:
		return fmt.Errorf("-p %d: TCP ports are 1..65535", o.port)
	case o.qpTimeout < 0 || o.qpTimeout > 31:
		return fmt.Errorf("-u %d: the QP timeout is 0..31", o.qpTimeout)
	case o.inline < 0 || o.inline > transport.MaxInline:
		return fmt.Errorf("-I %d: the inline size is 0..%d", o.inline, transport.MaxInline)
	case lat && o.bidir:
		return fmt.Errorf("-b is for the bandwidth tests: a latency test runs both ways already")
	case lat && o.postList != 1:
		return fmt.Errorf("-l: post lists are for the bandwidth tests (as in perftest)")
	case o.rxDepth < 1 || o.rxDepth > maxRxDepth:
		return fmt.Errorf("-r %d: the RX depth is 1..%d", o.rxDepth, maxRxDepth)
	case !strings.HasPrefix(name, "send_") && o.rxDepth > 1:
		return fmt.Errorf("-r %d: RDMA verbs post no receives: the RX depth can be only 1 (as in perftest)", o.rxDepth)
	case o.postList < 1 || o.postList > o.txDepth:
		return fmt.Errorf("-l %d: the post list size is 1..-t (%d)", o.postList, o.txDepth)
	case o.postList > 1 && o.duration == 0 && !o.runInf && o.iters%o.postList != 0:
		return fmt.Errorf("-l %d: -n %d must be a multiple of the post list size (as in perftest)", o.postList, o.iters)
	case o.events && (o.duration > 0 || o.runInf):
		return fmt.Errorf("-e: duration mode does not work with events (as in perftest): use -n")
	case o.events && o.provider == "verbs":
		return fmt.Errorf("-e is not supported yet with --provider verbs: its CQs have no completion channel yet; run without -e")
	case o.bidir && o.runInf:
		return fmt.Errorf("-b does not go with --run_infinitely yet: use -D or -n")
	case o.rdmaCM && o.provider == "verbs":
		return fmt.Errorf("-R is not supported with --provider verbs: the tools' RDMA CM is xroce's engine's (transport/rdmacm), and this build has no librdmacm; run -R with the engine")
	case o.rdmaCM && o.port > 65535:
		return fmt.Errorf("-p %d: RDMA CM ports are 1..65535", o.port)
	}
	if err := checkOutput(o.output, lat); err != nil {
		return err
	}
	if err := o.checkVerifyAll(name); err != nil {
		return err
	}
	if err := o.linkOptions.check(); err != nil {
		return err
	}
	if o.mtu != 0 {
		if _, err := roce.MTUFromBytes(o.mtu); err != nil {
			return fmt.Errorf("-m %d: %v", o.mtu, err)
		}
	}
	return nil
}

// checkOutput checks --output's value for a latency (lat) or bandwidth test, with
// perftest's words.
func checkOutput(v string, lat bool) error {
	switch {
	case v == "":
	case v != "bandwidth" && v != "message_rate" && v != "latency":
		return fmt.Errorf("--output=%s: the output is bandwidth, message_rate or latency", v)
	case lat && v != "latency":
		return fmt.Errorf("--output=%s: a latency test prints latency", v)
	case !lat && v == "latency":
		return fmt.Errorf("--output=latency: a bandwidth test prints bandwidth or message_rate")
	}
	return nil
}
