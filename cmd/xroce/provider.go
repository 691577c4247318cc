package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/spf13/pflag"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// provider is what the tools' workloads run on: xroce's pure-Go engine over a link
// (the default), or libibverbs on an HCA or rdma_rxe (--provider verbs, in a build
// with the verbs tag). One protection domain per provider.
type provider interface {
	GIDTable() roce.GIDTable
	// MaxMTU is the largest path MTU the port carries.
	MaxMTU() roce.MTU
	// Alloc returns n zeroed bytes that RegMR can register.
	Alloc(n int) ([]byte, error)
	RegMR(buf []byte, access transport.Access) (memRegion, error)
	CreateCQ(depth int) (compQueue, error)
	CreateQP(send, recv compQueue, cap transport.QPCap) (queuePair, error)
	// Counters are the device's event counters by name: the engine's (rdma_rxe's
	// hw_counters names), or the RDMA device's sysfs hw_counters.
	Counters() map[string]uint64
}

type memRegion interface {
	Addr() uint64
	LKey() uint32
	RKey() uint32
}

type compQueue interface {
	Poll(wcs []transport.WorkCompletion) int
	Wait(ctx context.Context) error
}

type queuePair interface {
	QPN() uint32
	Modify(attr transport.QPAttr, mask transport.QPAttrMask) error
	PostSend(wrs ...transport.SendWR) (int, error)
	PostRecv(wrs ...transport.RecvWR) (int, error)
}

// engine is the pure-Go provider: a transport.Device on a link.
type engine struct {
	link transport.Link
	dev  *transport.Device
	pd   *transport.ProtectionDomain
}

func (e *engine) GIDTable() roce.GIDTable { return e.dev.GIDTable() }

func (e *engine) MaxMTU() roce.MTU { return e.dev.MaxPathMTU() }

func (e *engine) Counters() map[string]uint64 { return e.dev.Counters().Map() }

func (e *engine) Alloc(n int) ([]byte, error) { return make([]byte, n), nil }

func (e *engine) RegMR(buf []byte, access transport.Access) (memRegion, error) {
	return e.pd.RegMR(buf, access)
}

func (e *engine) CreateCQ(depth int) (compQueue, error) {
	if depth > transport.MaxCQE { // as rdma_rxe refuses it (rxe_cq_chk_attr)
		return nil, fmt.Errorf("a CQ of %d entries: the device's max_cqe is %d", depth, transport.MaxCQE)
	}
	return e.dev.CreateCQ(depth), nil
}

func (e *engine) CreateQP(send, recv compQueue, cap transport.QPCap) (queuePair, error) {
	s, ok1 := send.(*transport.CompletionQueue)
	r, ok2 := recv.(*transport.CompletionQueue)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("engine: CQs from another provider")
	}
	return e.pd.CreateQP(transport.QPInitAttr{SendCQ: s, RecvCQ: r, Cap: cap})
}

// addLinkFlags adds the flags that choose the provider and the engine's link:
// --provider, --busy-poll, --link, --xdp-mode, --xdp-bind and the --pcap flags.
func addLinkFlags(fs *pflag.FlagSet, o *linkOptions) {
	help := "engine: xroce's pure-Go engine on -d's interface; verbs: libibverbs on the RDMA device -d (an HCA or rdma_rxe)"
	if !verbsBuilt {
		help += " (not in this build: make verbs)"
	}
	fs.StringVar(&o.provider, "provider", "engine", help)
	fs.DurationVar(&o.busyPoll, "busy-poll", transport.DefaultBusyPoll, "engine: keep polling the link this long after the last frame before sleeping (0: never)")
	fs.StringVar(&o.link, "link", "xdp", "datapath: xdp (AF_XDP) or udp (kernel UDP socket, no privileges)")
	fs.StringVar(&o.xdpMode, "xdp-mode", "auto", "XDP attach mode: native, generic, or auto (native where the driver has it)")
	fs.StringVar(&o.xdpBind, "xdp-bind", "auto", "AF_XDP sockets: zero-copy, copy, or auto (zero-copy where the driver has it)")
	fs.StringVar(&o.cc, "cc", "none", "engine: congestion control: none (rdma_rxe's wire: no ECN marks, no CNPs) or dcqcn (packets ECT(0), CNPs for CE-marked ones, the rate cut by CNPs; docs/congestion.md)")
	fs.Var(&onceString{v: &o.dcqcn, name: "--dcqcn"}, "dcqcn", "engine: with --cc dcqcn, its parameters: [PRESET,]NAME=VALUE,... by mlx5's names (rates in Mb/s, times in µs); PRESET software (the default: scaled to a software path) or mlx5 (mlx5's defaults); docs/congestion.md")
	addPcapFlags(fs, &o.pcap)
}

// ccOption returns the congestion control --cc names; with --provider verbs only
// none, the default, is taken: an HCA runs its own (mlx5's DCQCN is configured in
// its firmware, rdma_rxe has none).
func ccOption(o linkOptions) (transport.CongestionControl, transport.DCQCNParams, error) {
	var none transport.DCQCNParams
	cc, err := transport.ParseCongestionControl(o.cc)
	if err != nil {
		return 0, none, fmt.Errorf("--cc %q: want none (rdma_rxe's wire: no ECN, no CNPs) or dcqcn", o.cc)
	}
	if (cc != transport.CCNone || o.dcqcn != "") && o.provider == "verbs" {
		return 0, none, fmt.Errorf("--cc and --dcqcn are the engine's: with --provider verbs the RDMA device runs its own congestion control (an HCA's DCQCN is set in its firmware; rdma_rxe has none)")
	}
	if o.dcqcn != "" && cc != transport.CCDCQCN {
		return 0, none, fmt.Errorf("--dcqcn %q tunes DCQCN: add --cc dcqcn", o.dcqcn)
	}
	p, err := parseDCQCN(o.dcqcn)
	return cc, p, err
}

// printWindows prints each engine QP's send window and retransmission timer
// (docs/congestion.md) after the counters; QPs of another provider have none.
func printWindows(w io.Writer, qps []queuePair) {
	for _, q := range qps {
		qp, ok := q.(*transport.QueuePair)
		if !ok {
			continue
		}
		cs := qp.CongestionState()
		fmt.Fprintf(w, " Window (QP 0x%06x): cwnd %d, ssthresh %d, SRTT %v, RTTVAR %v, RTO %v", qp.QPN(), cs.Cwnd, cs.Ssthresh,
			cs.SRTT.Round(time.Microsecond), cs.RTTVar.Round(time.Microsecond), cs.RTO.Round(time.Microsecond))
		if cs.Lossy {
			fmt.Fprint(w, ", lossy")
		} else if cs.PathLossy {
			fmt.Fprint(w, ", path lossy")
		}
		if cs.RateLimited {
			fmt.Fprintf(w, ", DCQCN rate %.1f Mb/s (target %.1f, alpha %d/1024)", float64(cs.Rate)/1e6, float64(cs.TargetRate)/1e6, cs.Alpha)
		}
		fmt.Fprintln(w)
	}
}

// printCounters prints the counters that moved since before, sorted by name, as
// rdma statistic does; nothing moved prints a line saying so.
func printCounters(w io.Writer, label string, before, after map[string]uint64) {
	var names []string
	for n, v := range after {
		if v != before[n] {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	fmt.Fprintf(w, " Counters (%s):", label)
	if len(names) == 0 {
		fmt.Fprintf(w, " none moved\n")
		return
	}
	fmt.Fprintln(w)
	for _, n := range names {
		fmt.Fprintf(w, "  %-24s %d\n", n, after[n]-before[n])
	}
}

// check refuses bad link flags (--cc, --dcqcn, the --pcap flags) before anything
// opens the link.
func (o linkOptions) check() error {
	if o.busyPoll < 0 {
		return fmt.Errorf("--busy-poll %v: 0 (never) or a positive duration", o.busyPoll)
	}
	if _, _, err := ccOption(o); err != nil {
		return err
	}
	_, err := o.pcap.tapOptions()
	return err
}

// parseFlags parses args into fs and then checks the link flags in o, so that every
// tool refuses a bad --cc, --dcqcn or --pcap flag before it touches the network.
func parseFlags(fs *pflag.FlagSet, args []string, o *linkOptions) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	return o.check()
}

// onceString is a string flag that may be given once: a second one would
// silently replace the first (pflag's StringVar), dropping its parameters.
type onceString struct {
	v    *string
	name string
	set  bool
}

func (s *onceString) String() string {
	if s.v == nil {
		return ""
	}
	return *s.v
}

func (s *onceString) Set(v string) error {
	if s.set {
		return fmt.Errorf("%s given twice (%q, then %q): give one, its items comma separated", s.name, *s.v, v)
	}
	*s.v, s.set = v, true
	return nil
}

func (s *onceString) Type() string { return "string" }
