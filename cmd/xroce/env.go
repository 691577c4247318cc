package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/xroce/xroce/bpf"
	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/xdp"
)

// linkOptions are the flags that choose and open the link.
type linkOptions struct {
	provider string // engine (default) or verbs
	dev      string // -d: the network interface (engine) or RDMA device (verbs)
	link     string // xdp or udp
	xdpMode  string
	xdpBind  string // auto, zero-copy or copy
	gidIndex int    // -x; -1 picks the first IPv4 GID, else the first global IPv6 one
	busyPoll time.Duration
	cc       string // --cc: none or dcqcn (the engine's congestion control)
	dcqcn    string // --dcqcn: DCQCN parameters, NAME=VALUE,... (parseDCQCN)
	gidFlag  string // the flag that sets gidIndex, for messages: -x, or -g in pingpong
	pcap     pcapOptions
}

// env is an opened provider: xroce's engine running on its link, or an RDMA
// device through libibverbs; gid is the GID the tool uses.
type env struct {
	prov   provider
	gid    roce.GIDEntry
	stop   func()
	ifname string                // the engine's network interface; empty with --provider verbs
	link   string                // how the engine's link runs (describeLink); empty with --provider verbs
	dead   atomic.Pointer[error] // why the engine stopped by itself (engineErr)
}

// engineErr returns why the engine's loop stopped by itself (its link failed), or
// nil: a tool waiting for completions that will not come says so (linkCheck).
func (e *env) engineErr() error {
	if p := e.dead.Load(); p != nil {
		return *p
	}
	return nil
}

// watchEngine keeps the error died delivers (a runningEngine's) for engineErr.
func (e *env) watchEngine(died <-chan error) {
	if err, ok := <-died; ok {
		e.dead.Store(&err)
	}
}

// openEnv opens the provider -- for the engine: the link and the device, and starts
// the engine.
func openEnv(o linkOptions) (*env, error) {
	switch o.provider {
	case "verbs":
		if o.dev == "" {
			return nil, fmt.Errorf("no device: give the RDMA device with -d (e.g. -d rxe0 or -d mlx5_0; ibv_devices lists them)")
		}
		return openVerbs(o)
	case "engine", "":
	default:
		return nil, fmt.Errorf("--provider %q: want engine (xroce's own) or verbs (libibverbs)", o.provider)
	}
	if o.dev == "" {
		return nil, fmt.Errorf("no interface: give the network interface with -d (e.g. -d eth0)")
	}
	eng, err := startEngine(o, func(err error) {
		recordingFailed.Store(true)
		fmt.Fprintf(os.Stderr, "xroce: --pcap: %v: the recording stops here (the file keeps the frames before it) and the run goes on; it will exit with status 1\n", err)
	})
	if err != nil {
		return nil, err
	}
	link, dev := eng.link, eng.dev
	gid, err := pickGID(dev.GIDTable(), o.gidIndex, o.dev, o.gidFlag)
	if err == nil {
		err = checkInterfaceUp(o.dev)
	}
	if err != nil {
		eng.stop()
		return nil, err
	}
	e := &env{prov: &engine{link: link, dev: dev, pd: dev.AllocPD()}, gid: gid, stop: atExit(eng.stop), ifname: o.dev, link: eng.desc}
	go e.watchEngine(eng.died)
	return e, nil
}

// runningEngine is a transport.Device on its link with its loop running.
type runningEngine struct {
	link transport.Link
	dev  *transport.Device
	desc string // how the link runs (describeLink)
	stop func() // stops the loop and closes the link (and --pcap's recording)
	// died delivers why the loop stopped by itself (the link failed), then closes;
	// it closes without a value when stop stopped it.
	died <-chan error
}

// recordingFailed: a tool's --pcap recording failed (a full disk); main then exits
// with status 1 though the test itself passed, since the recording asked for is
// incomplete.
var recordingFailed atomic.Bool

// startEngine opens the link as o says, opens a device on it and runs its loop.
// pcapErr is told a --pcap recording's error when it happens (pcap.TapOptions.OnError).
func startEngine(o linkOptions, pcapErr func(error)) (*runningEngine, error) {
	link, err := openLink(o, pcapErr)
	if err != nil {
		return nil, err
	}
	bp := o.busyPoll
	if bp <= 0 {
		bp = -1 // --busy-poll 0: never
	}
	cc, dcqcn, err := ccOption(o)
	if err != nil {
		link.Close()
		return nil, err
	}
	return runEngine(link, transport.Options{BusyPoll: bp, CC: cc, DCQCN: dcqcn})
}

// runEngine opens a device on link with opts and runs its loop until the
// runningEngine's stop, which also closes link (and with it --pcap's recording,
// whose errors pcap.TapOptions.OnError reports as they happen). A loop that
// stops by itself (Device.Run's error: the link failed) is delivered on died. It
// closes link when the device does not open.
func runEngine(link transport.Link, opts transport.Options) (*runningEngine, error) {
	desc := describeLink(link)
	dev, err := transport.Open(link, opts)
	if err != nil {
		link.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	died := make(chan error, 1)
	go func() {
		defer wg.Done()
		defer close(died)
		if err := dev.Run(ctx); err != nil && ctx.Err() == nil {
			died <- fmt.Errorf("the engine stopped: %w", err)
		}
	}()
	stop := func() {
		cancel()
		wg.Wait()
		link.Close()
	}
	return &runningEngine{link: link, dev: dev, desc: desc, stop: stop, died: died}, nil
}

// openLink opens the engine's link on o.dev as --link, --xdp-mode and --pcap say.
func openLink(o linkOptions, pcapErr func(error)) (transport.Link, error) {
	tapOpts, err := o.pcap.tapOptions()
	if err != nil {
		return nil, err
	}
	tapOpts.OnError = pcapErr
	var link transport.Link
	switch o.link {
	case "xdp":
		mode, err := bpf.ParseMode(o.xdpMode)
		if err != nil {
			return nil, err
		}
		if who := udpPortOwner(); who != "" {
			return nil, fmt.Errorf("%s has UDP port 4791 open in this network namespace (xroce --link udp, or another RoCE stack over UDP): an XDP program on %s would take the RoCE frames that process receives there; stop it, or run this xroce in another network namespace", who, o.dev)
		}
		bind, err := xdp.ParseBind(o.xdpBind)
		if err != nil {
			return nil, fmt.Errorf("--xdp-bind: %w", err)
		}
		l, err := xdp.Open(xdp.Config{Interface: o.dev, Mode: mode, Bind: bind})
		if err != nil {
			if errors.Is(err, bpf.ErrPermission) {
				return nil, fmt.Errorf("%v\n(run as root, or use the kernel UDP link: --link udp)", err)
			}
			if mode == bpf.ModeNative && errors.Is(err, syscall.EOPNOTSUPP) {
				return nil, fmt.Errorf("%v\n(%s's driver has no native XDP, as with virtio_net without enough queues, bridges and many cloud NICs: use --xdp-mode auto or generic)", err, o.dev)
			}
			return nil, err
		}
		link = l
	case "udp":
		l, err := xdp.OpenUDP(xdp.UDPConfig{Interface: o.dev})
		if err != nil {
			return nil, err
		}
		link = l
	default:
		return nil, fmt.Errorf("--link %q: want xdp or udp", o.link)
	}
	tapped, err := withTap(link, o.pcap.path, tapOpts)
	if err != nil {
		link.Close()
		return nil, err
	}
	return tapped, nil
}

// describeLink says how the engine's link runs, for tool headers and the daemon's
// log: the AF_XDP link's mode, copy or zero-copy, buffers and queues, or "udp
// (kernel socket)"; through a --pcap tap, the tapped link's.
func describeLink(link transport.Link) string {
	if t, ok := link.(*pcap.Tap); ok {
		link = t.Link
	}
	switch l := link.(type) {
	case *xdp.Link:
		return l.Describe()
	case *xdp.UDPLink:
		return "udp (kernel socket)"
	}
	return fmt.Sprintf("%T", link)
}

// withTap wraps link in a pcap.Tap recording to path, or returns link itself when
// path is empty: without --pcap nothing stands between the engine and the link.
// On error the returned link is the one given, still open.
func withTap(link transport.Link, path string, opts pcap.TapOptions) (transport.Link, error) {
	if path == "" {
		return link, nil
	}
	tap, err := pcap.NewTap(link, path, opts)
	if err != nil {
		return link, fmt.Errorf("--pcap: %w", err)
	}
	return tap, nil
}

// pickGID returns the GID at index, or the default: the first RoCEv2 IPv4-mapped
// GID, else the first non-link-local RoCEv2 IPv6 one (mlx5 lists a RoCEv1 entry
// before each RoCEv2 one). Errors list the table.
func pickGID(t roce.GIDTable, index int, ifname, gidFlag string) (roce.GIDEntry, error) {
	if gidFlag == "" {
		gidFlag = "-x"
	}
	if index >= 0 {
		e, err := t.Entry(index)
		if err != nil {
			return e, fmt.Errorf("GID index %d out of range on %s; its GIDs are:\n%s(use %s with one of these indexes)", index, ifname, gidList(t), gidFlag)
		}
		return e, nil
	}
	for _, want4 := range []bool{true, false} {
		for _, e := range t {
			a := e.GID.Addr()
			if e.Version == roce.RoCEv2 && e.GID != (roce.GID{}) && a.Is4() == want4 && !a.IsLinkLocalUnicast() {
				return e, nil
			}
		}
	}
	if len(t) == 0 {
		return roce.GIDEntry{}, fmt.Errorf("%s has no GIDs: its netdev needs an IP address", ifname)
	}
	return roce.GIDEntry{}, fmt.Errorf("%s has no IP address, so no usable RoCEv2 GID (only the link-local %s): add one, e.g. ip addr add 10.0.0.1/24 dev %s", ifname, t[0].GID, ifname)
}

func gidList(t roce.GIDTable) string {
	s := ""
	for _, e := range t {
		s += fmt.Sprintf("  %d  %s  RoCE %v\n", e.Index, e.GID, e.Version)
	}
	return s
}

// checkPeerGID refuses a peer GID of the other kind, saying which index to use
// with the tool's GID index flag (flag: perftest's -x, or pingpong's -g).
func checkPeerGID(t roce.GIDTable, local roce.GIDEntry, peer roce.GID, flag string) error {
	l4, p4 := local.GID.IsIPv4Mapped(), peer.IsIPv4Mapped()
	if l4 == p4 {
		return nil
	}
	kind := func(v4 bool) string {
		if v4 {
			return "IPv4-mapped"
		}
		return "IPv6"
	}
	// The hint names our RoCEv2 GID of the peer's kind, of its scope (link-local
	// or not) if we have one.
	hint := "; use a GID index of that kind here (xroce gids lists them)"
	best := -1
	for _, e := range t {
		if e.Version != roce.RoCEv2 || e.GID.IsIPv4Mapped() != p4 {
			continue
		}
		sameScope := e.GID.Addr().IsLinkLocalUnicast() == peer.Addr().IsLinkLocalUnicast()
		if best < 0 || sameScope {
			best = e.Index
			hint = fmt.Sprintf("; use %s %d here", flag, e.Index)
		}
		if sameScope {
			break
		}
	}
	return fmt.Errorf("GID kind mismatch: our GID index %d is %s (%s), the peer's GID is %s (%s)%s, or on the peer an index of our kind (rdma_rxe lists IPv4 at index 1, mlx5 usually at 3)",
		local.Index, kind(l4), local.GID, kind(p4), peer, hint)
}
