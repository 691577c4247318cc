package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/xroce/xroce/cmd/xroce/conform"
	"github.com/xroce/xroce/cmd/xroce/oob"
	"github.com/xroce/xroce/xdp"
)

// runConform is `xroce conform`: the conformance suite (package conform) as a
// requester against a perftest server.
func runConform(name string, args []string) error {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	var (
		lo                  linkOptions
		port                int
		peerCmd, clientCmd  string
		dir, jsonOut, pcaps string
		only                []string
		list                bool
		connectTimeout      time.Duration
	)
	fs.StringVarP(&lo.dev, "ib-dev", "d", "", "network interface to send the frames on")
	fs.StringVar(&lo.link, "link", "xdp", "datapath: xdp (AF_XDP) or udp (kernel UDP socket: the scenarios that need frames sent as built, with a bad ICRC, another IP address or TVer, are left out)")
	fs.StringVar(&lo.xdpMode, "xdp-mode", "auto", "XDP attach mode: native, generic, or auto")
	fs.StringVar(&lo.xdpBind, "xdp-bind", "auto", "AF_XDP sockets: zero-copy, copy, or auto (zero-copy where the driver has it)")
	fs.IntVarP(&lo.gidIndex, "gid-index", "x", -1, "GID index of this side (default: the interface's first IPv4 GID)")
	fs.IntVarP(&port, "port", "p", oob.DefaultPort, "the perftest server's TCP port (responder role: the port this side listens on)")
	fs.StringVar(&peerCmd, "peer-cmd", "", "command (sh -c) that starts a fresh server before each scenario, with {server} {size} {iters} {port} {mtu} filled in, e.g. 'ssh peer ib_{server} -d rxe0 -x 1 -s {size} -n {iters}'; its exit status counts in the verdict")
	fs.StringVar(&clientCmd, "client-cmd", "", "command (sh -c) that starts the perftest client of each responder-role scenario, with {client} {size} {iters} {port} {mtu} {timeout} {limit} {addr} filled in, e.g. 'ssh peer ib_{client} -d rxe0 -x 1 -s {size} -n {iters} -u {timeout} {addr}'; its exit status and output are the client's end")
	fs.StringVar(&dir, "scenarios", "", "read the scenarios from this directory's *.yaml instead of the built-in ones")
	fs.StringSliceVar(&only, "run", nil, "run only these scenarios (names or shell patterns, comma-separated)")
	fs.BoolVar(&list, "list", false, "list the scenarios and exit")
	fs.StringVar(&jsonOut, "json", "", "write a JSON summary of the run to this file")
	fs.StringVar(&pcaps, "pcap", "", "write each scenario's frames to DIR/NAME.pcapng")
	fs.DurationVar(&connectTimeout, "connect-timeout", 10*time.Second, "how long to wait for the server's TCP port before each scenario")
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: xroce conform -d IFACE [flags] PEER   (xroce conform --list)\n\nRuns RoCE conformance scenarios against a perftest server's responder (requester role) and as the server of a perftest client's requester (responder role; PEER is then where --peer-cmd's servers run, and the clients connect to this side's address) (docs/conform.md).\n\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errUsage
		}
		return err
	}
	scenarios, err := loadScenarios(dir, only)
	if err != nil {
		return err
	}
	if list {
		conform.PrintList(os.Stdout, scenarios)
		return nil
	}
	if len(only) == 0 && !list {
		scenarios = defaultRoles(scenarios, fs.NArg() > 0, clientCmd != "")
	}
	requester := false
	for _, s := range scenarios {
		requester = requester || !s.Responder()
	}
	if fs.NArg() > 1 || fs.NArg() == 0 && requester {
		return fmt.Errorf("give the perftest server's address (one argument), e.g. xroce conform -d eth0 10.0.0.1")
	}
	if lo.dev == "" {
		return fmt.Errorf("no interface: give the network interface with -d (e.g. -d eth0)")
	}
	// As the perftest tools: this side's interface down is said at once, not
	// found out as a peer that does not answer.
	if err := checkInterfaceUp(lo.dev); err != nil {
		return err
	}
	table, err := xdp.GIDTable(lo.dev)
	if err != nil {
		return err
	}
	gid, err := pickGID(table, lo.gidIndex, lo.dev, "-x")
	if err != nil {
		return err
	}
	if !gid.GID.IsIPv4Mapped() {
		return fmt.Errorf("GID %v is not IPv4: the suite runs RoCEv2 over IPv4; give -x the index of an IPv4 GID", gid.GID)
	}
	if lo.link == "udp" {
		var kept []*conform.Scenario
		var skipped []string
		for _, s := range scenarios {
			if s.NeedsRawLink() {
				skipped = append(skipped, s.Name)
			} else {
				kept = append(kept, s)
			}
		}
		if len(skipped) > 0 {
			fmt.Fprintf(os.Stderr, "xroce conform: not run on --link udp, which cannot send their frames as built (bad ICRC, another IP address, TVer): %s\n", strings.Join(skipped, ", "))
		}
		if scenarios = kept; len(scenarios) == 0 {
			return errors.New("no scenario left to run on --link udp")
		}
	}
	if pcaps != "" {
		if err := os.MkdirAll(pcaps, 0o755); err != nil {
			return err
		}
	}
	link, err := openLink(lo, nil)
	if err != nil {
		return err
	}
	defer atExit(func() { link.Close() })()
	defer atExit(conform.KillPeers)()
	server := fs.Arg(0) // "" when only responder-role scenarios run
	results, runErr := conform.Run(context.Background(), conform.Options{
		Link: link, GID: gid.GID, Server: server, Port: port, PeerCmd: peerCmd, ClientCmd: clientCmd,
		ConnectTimeout: connectTimeout, PcapDir: pcaps, Log: os.Stderr,
		LinkState: func() error { return interfaceState(lo.dev) },
	}, scenarios)
	conform.PrintTable(os.Stdout, results)
	if jsonOut != "" {
		if err := conform.WriteJSON(jsonOut, server, results, runErr); err != nil {
			return err
		}
	}
	if runErr != nil {
		return runErr
	}
	for _, r := range results {
		if !r.Pass {
			return errors.New("some scenarios failed (the table says which and why)")
		}
	}
	return nil
}

// defaultRoles picks, when --run names none, the roles a run can play: the
// requester-role scenarios need a server (the PEER argument), the responder-role
// ones a client (--client-cmd; with --run 'resp-*' the suite waits for clients
// started by hand instead). A role left out is said on stderr, with how to add it.
func defaultRoles(all []*conform.Scenario, server, client bool) []*conform.Scenario {
	var kept []*conform.Scenario
	var req, resp int
	for _, s := range all {
		switch {
		case s.Responder() && !client:
			resp++
		case !s.Responder() && !server && client:
			req++
		default:
			kept = append(kept, s)
		}
	}
	if resp > 0 {
		fmt.Fprintf(os.Stderr, "xroce conform: %d responder-role scenarios left out: give --client-cmd to start their perftest clients (or --run 'resp-*' and start each client by hand)\n", resp)
	}
	if req > 0 {
		fmt.Fprintf(os.Stderr, "xroce conform: %d requester-role scenarios left out: give the perftest server's address (PEER) and --peer-cmd to run them too\n", req)
	}
	return kept
}

// loadScenarios reads the built-in scenarios or dir's, keeping those only names
// (patterns as path.Match takes them); a pattern that matches none is an error.
func loadScenarios(dir string, only []string) ([]*conform.Scenario, error) {
	var all []*conform.Scenario
	var err error
	if dir == "" {
		all, err = conform.Builtin()
	} else if st, serr := os.Stat(dir); serr != nil || !st.IsDir() {
		why := "not a directory" // os.DirFS would name only "." in its error
		if serr != nil {
			why = errors.Unwrap(serr).Error() // the *PathError's cause
		}
		err = fmt.Errorf("--scenarios %s: %s (give a directory of *.yaml scenarios)", dir, why)
	} else {
		all, err = conform.Load(os.DirFS(dir), ".")
		if err == nil && len(all) == 0 {
			err = fmt.Errorf("--scenarios %s: no *.yaml files there", dir)
		}
	}
	if err != nil || len(only) == 0 {
		return all, err
	}
	var out []*conform.Scenario
	for _, pat := range only {
		n := 0
		for _, s := range all {
			if ok, err := filepath.Match(pat, s.Name); err != nil {
				return nil, fmt.Errorf("--run %q: %v", pat, err)
			} else if ok {
				out = append(out, s)
				n++
			}
		}
		if n == 0 {
			return nil, fmt.Errorf("--run %q matches no scenario (xroce conform --list names them)", pat)
		}
	}
	return out, nil
}
