package main

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/xroce/xroce/cmd/xroce/daemon"
	"github.com/xroce/xroce/roce"
)

// runDaemon serves an xroce device on an interface to local processes (the verbs
// library, cmd/libxroce) until SIGINT or SIGTERM; `xroce daemon status` lists the
// devices being served.
func runDaemon(name string, args []string) error {
	if len(args) > 0 && args[0] == "status" {
		return daemonStatus(args[1:])
	}
	fs := pflag.NewFlagSet(name0("daemon"), pflag.ContinueOnError)
	var o linkOptions
	fs.StringVarP(&o.dev, "ib-dev", "d", "", "network interface the device runs on")
	devName := fs.String("name", "", "RDMA device name (default: the first free xroceN)")
	anyUser := fs.Bool("any-user", false, "serve processes of every user (socket mode 0666); by default only this user and root")
	addLinkFlags(fs, &o)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: xroce daemon -d IFACE [--name NAME] [--link xdp|udp] [--any-user]\n       xroce daemon status [-a] [DEVICE...]\n\nThe control socket is $XROCE_RUN_DIR/NAME.sock (default %s).\n\n%s", daemon.DefaultRunDir, fs.FlagUsages())
	}
	if err := parseFlags(fs, args, &o); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errUsage
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (xroce daemon -d IFACE)", fs.Arg(0))
	}
	if o.provider != "engine" {
		return fmt.Errorf("--provider %s: the daemon serves xroce's engine only", o.provider)
	}
	if o.dev == "" {
		return fmt.Errorf("no interface: give the network interface with -d (e.g. -d eth0)")
	}
	dir := daemon.RunDir()
	named := *devName != ""
	if !named {
		*devName = daemon.FreeName(dir)
	}
	if err := checkDevName(*devName); err != nil {
		return err
	}
	lg := log.New(os.Stderr, "xroce daemon: ", log.LstdFlags)
	eng, err := startEngine(o, func(err error) {
		lg.Printf("--pcap: %v: the recording stops here (the file keeps the frames before it); the daemon serves on", err)
	})
	if err != nil {
		return err
	}
	return serveDevice(eng, deviceConfig{name: *devName, named: named, ifname: o.dev, dir: dir, anyUser: *anyUser, log: lg})
}

// deviceConfig is what serveDevice serves an engine as.
type deviceConfig struct {
	name    string // the RDMA device name (--name, or the first free xroceN)
	named   bool   // name was given: a taken name is an error, not a reason to take the next
	ifname  string // the network interface (-d)
	dir     string // the run directory of the control socket (daemon.RunDir)
	anyUser bool   // --any-user
	log     *log.Logger
}

// serveDevice serves eng as the RDMA device c.name on a control socket in c.dir
// until SIGINT or SIGTERM (nil), the interface goes away, or the engine stops by
// itself (the error names the cause). It stops eng in every case.
func serveDevice(eng *runningEngine, c deviceConfig) error {
	srv, err := listenDevice(eng, &c)
	if err != nil {
		eng.stop()
		return err
	}
	lg, dev := c.log, eng.dev
	// SIGINT and SIGTERM: remove the socket and the device node, stop the engine,
	// close the link (the XDP program goes with it), flush --pcap; handleSignals
	// then exits. Registered before the node is made, so that a signal right after
	// the socket appeared still removes it.
	var nodeMu sync.Mutex
	removeNode := func() {}
	stop := atExit(func() {
		srv.Close()
		nodeMu.Lock()
		removeNode()
		removeNode = func() {}
		nodeMu.Unlock()
		eng.stop()
		lg.Printf("%s stopped", c.name)
	})
	defer stop()
	nodeMu.Lock()
	remove, err := makeDevNode(c.name)
	removeNode = remove
	nodeMu.Unlock()
	if err != nil {
		lg.Printf("warning: %v", err)
	}
	lg.Printf("serving %s on %s (%s, %s) at %s", c.name, c.ifname, eng.desc, fmt.Sprintf("%d GID%s", len(dev.GIDTable()), plural(len(dev.GIDTable()))), srv.Path())
	if w := noRoCEv2GID(c.ifname, dev.GIDTable()); w != "" {
		lg.Printf("warning: %s", w)
	}
	for _, w := range linkWarnings(c.ifname) {
		lg.Printf("warning: %s", w)
	}
	ctx, gone := context.WithCancelCause(context.Background())
	defer gone(nil)
	go func() {
		if err, ok := <-eng.died; ok {
			if _, e := net.InterfaceByName(c.ifname); e != nil { // what made the link fail
				err = fmt.Errorf("%w (%w)", errInterfaceGone(c.ifname), err)
			}
			gone(err)
		}
	}()
	go watchInterface(ctx, portWatch{name: c.ifname, gone: gone, logf: lg.Printf, active: dev.MaxPathMTU, event: srv.PortEvent, follow: dev.FollowAddrs})
	go watchPathMTU(ctx, dev.Counters(), lg.Printf)
	go watchRNR(ctx, dev.Counters(), lg.Printf)
	go watchLinkDrops(ctx, xskCounters(eng.link), lg.Printf)
	if err := srv.Serve(ctx); err != nil {
		return err
	}
	if cause := context.Cause(ctx); cause != nil && cause != context.Canceled {
		return fmt.Errorf("%s stopped: %w", c.name, cause)
	}
	return nil
}

// listenDevice opens the control socket of eng's device c.name. When the name
// was not given and another daemon took it meanwhile (two started at once chose
// the same free name), it takes the next free one, up to three times, and sets
// c.name to it.
func listenDevice(eng *runningEngine, c *deviceConfig) (*daemon.Server, error) {
	src, err := daemon.NewEngineSource(c.name, c.ifname, eng.dev)
	if err != nil {
		return nil, err
	}
	src.LinkCounters = xskCounters(eng.link)
	opts := daemon.Options{Dir: c.dir, AnyUser: c.anyUser, Log: c.log}
	srv, err := daemon.Listen(src, opts)
	for try := 0; err != nil && !c.named && errors.Is(err, daemon.ErrNameTaken) && try < 3; try++ {
		src.DevName = daemon.FreeName(c.dir)
		c.name = src.DevName
		srv, err = daemon.Listen(src, opts)
	}
	return srv, err
}

// checkDevName refuses a device name that could not be an RDMA device's (at most
// IB_DEVICE_NAME_MAX - 1 = 63 bytes) or that would make its socket a hidden file
// or leave the run directory: letters, digits, '_', '-' and '.', not first.
func checkDevName(name string) error {
	ok := name != "" && len(name) < 64 && name[0] != '.' && name[0] != '-'
	for _, r := range name {
		ok = ok && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.')
	}
	if !ok {
		return fmt.Errorf("--name %q: want at most 63 bytes of letters, digits, '_', '-' and '.' (not first), as in xroce0", name)
	}
	return nil
}

// watchInterface ends the daemon (gone) when the interface it serves is deleted or
// moved to another namespace, as rdma_rxe's device goes with its netdev
// (rxe_net.c, NETDEV_UNREGISTER): its applications then see the control socket hang
// up. It looks every ifaceWatch; an interface that is only down stays served, with
// its port down, as rxe's does, and each change of the port's state is logged and
// raised as IBV_EVENT_PORT_ERR or IBV_EVENT_PORT_ACTIVE to every application. The
// GID table follows the interface's addresses (followGIDs). A new interface of the same name is another one (another ifindex): the daemon must
// be started on it again. A change of the interface's MTU is logged (logf) with the
// port's new active_mtu (active): connected QPs keep their path MTU, as on rxe, and
// those whose packets no longer fit send frames the interface drops (mtuChanged).
//
// rdma_rxe reacts to the kernel's notifiers at once; this looks every ifaceWatch,
// so a change shows up to that much later.
// errInterfaceGone is the daemon's end when its interface goes.
func errInterfaceGone(name string) error {
	return fmt.Errorf("the interface %s is gone (deleted, renamed, or moved to another namespace): start the daemon again on it (xroce daemon -d %s) once it is back", name, name)
}

func watchInterface(ctx context.Context, w portWatch) {
	name := w.name
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return // the link's open named it; nothing to watch
	}
	t := time.NewTicker(ifaceWatch)
	defer t.Stop()
	mtu := ifi.MTU
	state := interfaceState(name)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now, err := net.InterfaceByIndex(ifi.Index)
		if err != nil || now.Name != name {
			w.gone(errInterfaceGone(name))
			return
		}
		if is := interfaceState(name); (is == nil) != (state == nil) {
			w.logf("%s", portChanged(name, is))
			w.event(portEvent(is))
			state = is
		}
		if now.MTU != mtu {
			w.logf("%s", mtuChanged(name, mtu, now.MTU, w.active()))
			mtu = now.MTU
		}
		w.followGIDs()
	}
}

// portWatch is what watchInterface watches and whom it tells.
type portWatch struct {
	name   string // the interface
	gone   context.CancelCauseFunc
	logf   func(string, ...any)
	active func() roce.MTU // the port's active_mtu (transport.Device.MaxPathMTU)
	event  func(uint32)    // a port event for every application (daemon.Server.PortEvent)
	// follow brings the GID table up to the interface's addresses and returns the
	// entries added and removed (transport.Device.FollowAddrs).
	follow func() (added, removed []roce.GIDEntry)
}

// followGIDs makes the GID table follow the interface's addresses, logs each
// entry that came or went and raises IBV_EVENT_GID_CHANGE for it, as rdma_rxe's
// table follows them (roce_gid_mgmt.c) with an event per entry (ib_cache.c).
func (w portWatch) followGIDs() {
	added, removed := w.follow()
	for _, e := range removed {
		w.logf("GID index %d (%v) removed: its address left %s; QPs connected from it keep it, new ones cannot use index %d", e.Index, e.GID, w.name, e.Index)
		w.event(daemon.EventGIDChange)
	}
	for _, e := range added {
		w.logf("GID index %d (%v) added: a new address of %s", e.Index, e.GID, w.name)
		w.event(daemon.EventGIDChange)
	}
}

// portEvent is the event of a port whose interface's state is now err
// (interfaceState: nil when up with carrier).
func portEvent(err error) uint32 {
	if err == nil {
		return daemon.EventPortActive
	}
	return daemon.EventPortErr
}

// mtuChanged says what an interface MTU change from old to mtu bytes, which moved
// the port's active_mtu to is, means for the device's QPs: those whose
// longest packets (roce.LargestIPPacket) fitted the old MTU and no longer fit send
// frames the interface drops.
func mtuChanged(name string, old, mtu int, is roce.MTU) string {
	if mtu < roce.LargestIPPacket(roce.MTU256, false) {
		return fmt.Sprintf("the interface %s's MTU changed from %d to %d, which carries no RoCE frame (%s): nothing can be sent until it is raised again (ip link set %s mtu %d); the port reports active_mtu 256, as rdma_rxe does",
			name, old, mtu, smallestFrames, name, old)
	}
	msg := fmt.Sprintf("the interface %s's MTU changed from %d to %d: the port's active_mtu is now %d", name, old, mtu, max(is, roce.MTU256).Bytes()) // rdma_rxe reports 256 under 336 bytes
	fit4, fit6 := roce.LargestFitting(mtu, false), roce.LargestFitting(mtu, true)
	if fit4 < roce.LargestFitting(old, false) || fit6 < roce.LargestFitting(old, true) {
		v6 := fmt.Sprintf("above %d over IPv6", fit6.Bytes())
		if fit6 == 0 {
			v6 = "any over IPv6"
		}
		msg += fmt.Sprintf("; QPs of a path MTU above %d over IPv4 (%s) send frames it no longer carries: set it back (ip link set %s mtu %d) or connect them again with a smaller path MTU",
			fit4.Bytes(), v6, name, old)
	}
	return msg
}

// noRoCEv2GID says, when the interface has no address to make a routable RoCEv2 GID
// of (the tools refuse it, pickGID), why applications will find none: the daemon
// serves anyway, as rdma_rxe's device exists on such a netdev, but its GID table is
// built once, when it starts.
func noRoCEv2GID(ifname string, t roce.GIDTable) string {
	if _, err := pickGID(t, -1, ifname, ""); err != nil {
		return err.Error() + ", then restart the daemon (its GID table is built when it starts)"
	}
	return ""
}

// ifaceWatch is how often the daemon looks for its interface.
const ifaceWatch = 500 * time.Millisecond

// daemonStatus lists the devices in the run directory (those named in args, or
// all) with their port, clients and counters.
func daemonStatus(args []string) error {
	fs := pflag.NewFlagSet(name0("daemon status"), pflag.ContinueOnError)
	all := fs.BoolP("all", "a", false, "print counters that are zero too")
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: xroce daemon status [-a] [DEVICE...]   (or xroce stat)\n\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errUsage
		}
		return err
	}
	dir := daemon.RunDir()
	names, err := daemon.Devices(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if len(names) == 0 {
		return fmt.Errorf("no xroce devices in %s: start one with `xroce daemon -d IFACE` (XROCE_RUN_DIR sets the directory)", dir)
	}
	if names, err = pickDevices(names, fs.Args(), dir); err != nil {
		return err
	}
	stale, refused := 0, 0
	for _, n := range names {
		path := daemon.SocketPath(dir, n)
		c, hello, err := daemon.Dial(path)
		if err != nil {
			fmt.Printf("%s\t%s: %v\n", n, path, err)
			if errors.Is(err, daemon.ErrRefused) {
				refused++
			} else {
				stale++
			}
			continue
		}
		var p daemon.PortAttr
		perr := c.Call(daemon.OpQueryPort, &daemon.PortReq{Port: 1}, &p)
		cs, cerr := c.Counters()
		cl, lerr := c.Clients()
		c.Close()
		if err := errors.Join(perr, cerr, lerr); err != nil {
			fmt.Printf("%s\t%s: %v\n", n, path, err)
			stale++
			continue
		}
		g := hello.NodeGUID
		state := map[uint32]string{1: "PORT_DOWN", 2: "PORT_INIT", 3: "PORT_ARMED", 4: "PORT_ACTIVE"}[p.State]
		fmt.Printf("%s\tnetdev %s\tnode_guid %04x:%04x:%04x:%04x\tport 1 %s\tactive_mtu %d\t%s\n",
			hello.DeviceName(), hello.Interface(), g>>48, g>>32&0xffff, g>>16&0xffff, g&0xffff, state, 128<<p.ActiveMTU, path)
		self := uint32(os.Getpid())
		var others []string
		for _, e := range cl {
			if e.PID != self {
				o := fmt.Sprintf("pid %d (uid %d, since %s): %d PD, %d MR, %d CQ, %d QP", e.PID, e.UID,
					time.Unix(e.Since, 0).Format(time.TimeOnly), e.PDs, e.MRs, e.CQs, e.QPs)
				if e.SRQs > 0 {
					o += fmt.Sprintf(", %d SRQ", e.SRQs)
				}
				others = append(others, o)
			}
		}
		fmt.Printf("  clients: %d\n", len(others))
		for _, s := range others {
			fmt.Printf("    %s\n", s)
		}
		printDeviceCounters(cs, *all)
	}
	var errs []error
	if refused > 0 {
		errs = append(errs, fmt.Errorf("%d of %d devices in %s refused this user (uid %d): their daemons serve only their own user and root; start them with --any-user, or run this as their user", refused, len(names), dir, os.Getuid()))
	}
	if stale > 0 {
		errs = append(errs, fmt.Errorf("%d of %d devices in %s did not answer (a daemon killed or stopped leaves its socket behind; `xroce daemon -d IFACE --name NAME` takes the name over)", stale, len(names), dir))
	}
	return errors.Join(errs...)
}

// printDeviceCounters prints a device's counters, the engine's (rdma_rxe's hw_counters
// names) and then its link's (daemon.LinkCounterPrefix), those that are not zero
// unless all.
func printDeviceCounters(cs []daemon.Counter, all bool) {
	fmt.Printf("  counters:\n")
	link := false
	for _, c := range cs {
		if c.Value == 0 && !all {
			continue
		}
		if strings.HasPrefix(c.Name, daemon.LinkCounterPrefix) && !link {
			link = true
			fmt.Printf("  link (AF_XDP sockets; the kernel's xdp_statistics):\n")
		}
		fmt.Printf("    %-28s %d\n", c.Name, c.Value)
	}
}

// pickDevices returns the devices of names that want names, in want's order, or
// all of names when want is empty; a name not among them is an error that lists
// them.
func pickDevices(names, want []string, dir string) ([]string, error) {
	if len(want) == 0 {
		return names, nil
	}
	for _, w := range want {
		found := false
		for _, n := range names {
			found = found || n == w
		}
		if !found {
			return nil, fmt.Errorf("no device %s in %s: it has %s", w, dir, strings.Join(names, ", "))
		}
	}
	return want, nil
}

// libPath finds the verbs library: $XROCE_LIB, else lib/libxroce.so beside the
// xroce binary (make puts both in bin/).
func libPath() (string, error) {
	if p := os.Getenv("XROCE_LIB"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("XROCE_LIB: %w", err)
		}
		if err := checkLib(p); err != nil {
			return "", fmt.Errorf("XROCE_LIB: %w: point it at libxroce.so (make libverbs builds bin/lib/libxroce.so)", err)
		}
		return filepath.Abs(p)
	}
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	p := filepath.Join(filepath.Dir(exe), "lib", "libxroce.so")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("no verbs library at %s: build it with `make libverbs`, or point XROCE_LIB at libxroce.so", p)
	}
	if err := checkLib(p); err != nil {
		return "", fmt.Errorf("%w: build it again with `make libverbs`", err)
	}
	return p, nil
}

// checkLib reports why p cannot be the verbs library: not an ELF shared object
// that exports ibv_get_device_list. ld.so would only warn that it cannot preload
// it ("ignored") and run the application without the xroce devices.
func checkLib(p string) error {
	f, err := elf.Open(p)
	if err != nil {
		return fmt.Errorf("%s is not a shared library (%v)", p, err)
	}
	defer f.Close()
	if f.Type != elf.ET_DYN {
		return fmt.Errorf("%s is an ELF %v, not a shared library", p, f.Type)
	}
	syms, err := f.DynamicSymbols()
	if err == nil {
		for _, s := range syms {
			if s.Name == "ibv_get_device_list" && s.Section != elf.SHN_UNDEF {
				return nil
			}
		}
	}
	return fmt.Errorf("%s is a shared library that does not define ibv_get_device_list, so not the xroce verbs library", p)
}

// runApp runs an unmodified verbs application on the xroce devices: it puts the
// verbs library in LD_PRELOAD and executes the application in this process.
func runApp(name string, args []string) error {
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintf(os.Stderr, "usage: xroce run -- APP [ARGS...]\n\nruns APP with the xroce verbs library preloaded (LD_PRELOAD), so it sees the devices\nthat `xroce daemon` serves in $XROCE_RUN_DIR (default %s).\nThe library is $XROCE_LIB, or lib/libxroce.so beside this binary (make libverbs).\n", daemon.DefaultRunDir)
		if len(args) == 0 {
			return fmt.Errorf("no application given")
		}
		return errUsage
	}
	lib, err := libPath()
	if err != nil {
		return err
	}
	app, err := exec.LookPath(args[0])
	if err != nil {
		return err
	}
	env := os.Environ()
	pre := lib
	for i, e := range env {
		if v, ok := strings.CutPrefix(e, "LD_PRELOAD="); ok {
			if v != "" {
				pre = lib + ":" + v
			}
			env = append(env[:i], env[i+1:]...)
			break
		}
	}
	env = append(env, "LD_PRELOAD="+pre)
	return syscall.Exec(app, args, env)
}

// runStat is `xroce daemon status`.
func runStat(name string, args []string) error { return daemonStatus(args) }
