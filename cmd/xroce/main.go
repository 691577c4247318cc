// Command xroce runs RDMA over a userspace RoCEv2 engine: perftest-compatible
// bandwidth and latency tests, an ibv_rc_pingpong-compatible pingpong, and GID and
// device listings. A real ib_write_bw or ibv_rc_pingpong on an rdma_rxe or mlx5 host
// can be the other side.
//
//	xroce write_bw -d veth0                 # server
//	xroce write_bw -d veth0 10.0.0.1        # client
package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"strings"
)

type command struct {
	summary string
	run     func(name string, args []string) error
}

var commands = map[string]command{
	"write_bw":   {"RDMA WRITE bandwidth (perftest ib_write_bw)", runPerf},
	"read_bw":    {"RDMA READ bandwidth (perftest ib_read_bw)", runPerf},
	"send_bw":    {"SEND bandwidth (perftest ib_send_bw)", runPerf},
	"atomic_bw":  {"atomic FETCH_AND_ADD / CMP_AND_SWP rate (perftest ib_atomic_bw)", runPerf},
	"write_lat":  {"RDMA WRITE latency (perftest ib_write_lat)", runPerf},
	"read_lat":   {"RDMA READ latency (perftest ib_read_lat)", runPerf},
	"send_lat":   {"SEND latency (perftest ib_send_lat)", runPerf},
	"pingpong":   {"SEND ping-pong (ibv_rc_pingpong)", runPingpong},
	"rping":      {"RDMA CM ping: READ and WRITE of a buffer per ping (rdmacm-utils rping)", runRping},
	"crosscheck": {"the cross-check workload: seeded WRITE, READ, SEND and atomics, checked against a model", runCrosscheck},
	"gids":       {"GID table of an interface (show_gids)", runGids},
	"devinfo":    {"device attributes of an interface (ibv_devinfo)", runDevinfo},
	"dump":       {"print the RoCE frames of a capture with ICRC verdicts (like tcpdump -v)", runDump},
	"replay":     {"emulate one endpoint of a capture and compare its answers (replay FILE --as IP)", runReplay},
	"daemon":     {"serve an xroce device to unmodified verbs applications (daemon -d IFACE; daemon status)", runDaemon},
	"stat":       {"the devices xroce daemons serve, their clients and counters (= daemon status)", runStat},
	"conform":    {"RoCE conformance scenarios against a perftest server's responder or client's requester (docs/conform.md)", runConform},
	"run":        {"run a verbs application on xroce devices (run -- APP ARGS: LD_PRELOAD of the verbs library)", runApp},
}

func usage() {
	fmt.Fprintf(os.Stderr, "usage: xroce COMMAND [flags] [server-address]\n\ncommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(os.Stderr, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(os.Stderr, "\n'xroce COMMAND --help' lists a command's flags; 'xroce --version' the build.\n")
}

func main() {
	defer startCPUProfile()()
	handleSignals()
	if len(os.Args) == 2 && (os.Args[1] == "--version" || os.Args[1] == "version") {
		fmt.Println(version())
		return
	}
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	if os.Args[1] == "-h" || os.Args[1] == "--help" || os.Args[1] == "help" {
		usage()
		return
	}
	name := strings.TrimPrefix(os.Args[1], "ib_")
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "xroce: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	err := c.run(name, os.Args[2:])
	if errors.Is(err, errUsage) { // -h or --help: the usage was asked for
		return
	}
	// A run that a signal ended, well (a daemon stopped by SIGTERM or SIGHUP returns
	// nil) or not (the user's Ctrl-C broke its connection), exits as the signal:
	// returning from main first would exit 0 or 1 before the handler's 128 + N.
	interruptedExit()
	if err != nil {
		fmt.Fprintf(os.Stderr, "xroce %s: %v\n", name, err)
		os.Exit(1)
	}
	if recordingFailed.Load() { // said when it failed (openEnv)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

// version describes the build: the VCS revision Go stamped into the binary, whether
// the tree was modified, the Go version, and whether the verbs provider is in.
func version() string {
	rev, dirty, gover := "unknown", "", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		gover = bi.GoVersion
		for _, st := range bi.Settings {
			switch st.Key {
			case "vcs.revision":
				rev = st.Value
			case "vcs.modified":
				if st.Value == "true" {
					dirty = " (modified)"
				}
			}
		}
	}
	prov := "engine"
	if verbsBuilt {
		prov += ", verbs"
	}
	return fmt.Sprintf("xroce %s%s, %s, providers: %s", rev, dirty, gover, prov)
}
