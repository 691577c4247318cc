package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/transport/rdmacm"
)

// xroce rping is rdmacm-utils' rping (rdma-core librdmacm/examples/rping.c): a
// connection through the RDMA connection manager (transport/rdmacm), then per ping
// the client advertises its start buffer, the server RDMA READs it, the client
// advertises its rdma buffer, the server RDMA WRITEs the data back; docs/cm.md
// ("xroce rping") and docs/rdmacm-peers.md §2 have the exchange.

// rping's constants.
const (
	rpingDefaultPort = 7174
	rpingMinSize     = 23 // Debian 12's rping (rdma-core 44): "valid range is 23 to 65536"
	rpingBufSize     = 64 * 1024
	rpingInfoLen     = 16 // struct rping_rdma_info: buf u64, rkey u32, size u32, big-endian
	rpingSQDepth     = 16
	rpingBacklog     = 3
	// rpingConnectLimit bounds the client's wait for the server's answer to its REQ
	// (rdma_cm retries for about a minute and a half): three retransmissions.
	rpingConnectLimit = 20 * time.Second
	// rpingDrepLimit is how long the client waits for the DREP to its DREQ before
	// it exits (the kernel would go on retransmitting the DREQ after rping's exit).
	rpingDrepLimit = 5 * time.Second
)

type rpingOptions struct {
	server, client       bool
	addr, src            string
	port, count, size    int
	verbose, validate    bool
	debug, persistent    bool
	selfQP               bool
	lo                   linkOptions
	out, errw            io.Writer
	bindAddr, dst, local netip.Addr
}

func runRping(name string, args []string) error { return rping(args, os.Stdout, os.Stderr) }

func rping(args []string, w, errw io.Writer) error {
	o := rpingOptions{out: w, errw: errw}
	fs := pflag.NewFlagSet(name0("rping"), pflag.ContinueOnError)
	fs.SetOutput(errw)
	fs.BoolVarP(&o.server, "server", "s", false, "server")
	fs.BoolVarP(&o.client, "client", "c", false, "client")
	fs.StringVarP(&o.addr, "addr", "a", "", "server: the address to bind (default: any); client: the server's address")
	fs.StringVarP(&o.src, "src", "I", "", "client: the source address")
	fs.IntVarP(&o.port, "port", "p", rpingDefaultPort, "port in the RDMA_PS_TCP port space")
	fs.IntVarP(&o.count, "count", "C", 0, "pings (0: for ever)")
	fs.IntVarP(&o.size, "size", "S", 64, fmt.Sprintf("ping data size, %d to %d", rpingMinSize, rpingBufSize-1))
	fs.BoolVarP(&o.verbose, "verbose", "v", false, "print the ping data")
	fs.BoolVarP(&o.validate, "validate", "V", false, "client: check the data written back")
	fs.BoolVarP(&o.debug, "debug", "d", false, "debug lines on stdout")
	fs.BoolVarP(&o.persistent, "persistent", "P", false, "server: serve connection after connection (rping's thread per connection)")
	fs.BoolVarP(&o.selfQP, "self-create-qp", "q", false, "rping's own QP moves (not supported)")
	fs.StringVar(&o.lo.dev, "dev", "", "network interface (default: the one holding -a or -I, the client's route to -a, or the only one with an address)")
	addLinkFlags(fs, &o.lo)
	if err := parseFlags(fs, args, &o.lo); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errUsage
		}
		return err
	}
	if err := o.check(fs.NArg()); err != nil {
		return err
	}
	if o.lo.provider != "" && o.lo.provider != "engine" {
		return fmt.Errorf("rping runs on xroce's engine only (--provider engine): the connection manager is the engine's")
	}
	if o.lo.dev == "" {
		dev, err := rpingInterface(o.local, o.dst)
		if err != nil {
			return err
		}
		o.lo.dev = dev
	}
	o.dbg("created cm_id on %s\n", o.lo.dev)
	e, err := openEnv(o.lo)
	if err != nil {
		return err
	}
	defer e.stop()
	eng := e.prov.(*engine)
	svc, err := rdmacm.Start(eng.dev, rdmacm.Options{})
	if err != nil {
		return err
	}
	// Ctrl-C and SIGTERM disconnect too (a DREQ, or a REJ), so the peer ends at once
	// as rdma_cm's peers do when the kernel destroys a dying process's ids.
	defer atExit(func() { svc.Close() })()
	if o.server {
		return o.runServer(eng, svc)
	}
	return o.runClient(eng, svc)
}

// check validates the flags as rping does (its messages for -S and -C), and
// resolves the addresses.
func (o *rpingOptions) check(nargs int) error {
	switch {
	case nargs > 0:
		return fmt.Errorf("unexpected arguments: rping takes the server's address with -a")
	case o.size < rpingMinSize || o.size > rpingBufSize-1:
		// rping's message, which names 65536 and refuses it
		return fmt.Errorf("invalid size %d (valid range is %d to %d)", o.size, rpingMinSize, rpingBufSize)
	case o.count < 0:
		return fmt.Errorf("invalid count %d", o.count)
	case o.port <= 0 || o.port > 65535:
		return fmt.Errorf("-p %d: ports are 1 to 65535", o.port)
	case o.server == o.client:
		return fmt.Errorf("give -s (server) or -c (client)")
	case o.selfQP:
		return fmt.Errorf("-q (rping creating and moving its QP itself) is not supported: xroce rping lets the connection manager move the QP, as rping without -q")
	case o.client && o.addr == "":
		return fmt.Errorf("the client needs the server's address: -a ADDR")
	case o.server && o.src != "":
		return fmt.Errorf("-I is the client's source address; a server binds -a")
	case o.client && o.persistent:
		return fmt.Errorf("-P is for the server")
	}
	var err error
	if o.addr != "" {
		a, err := lookupAddr(o.addr, "-a")
		if err != nil {
			return err
		}
		if o.server {
			o.bindAddr, o.local = a, a
		} else {
			o.dst = a
		}
	}
	if o.src != "" {
		if o.local, err = lookupAddr(o.src, "-I"); err != nil {
			return err
		}
	}
	return nil
}

// lookupAddr reads an address or resolves a host name (rping's getaddrinfo),
// preferring IPv4.
func lookupAddr(s, flag string) (netip.Addr, error) {
	s = strings.TrimSuffix(strings.TrimPrefix(s, "["), "]")
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" || a.IsLinkLocalUnicast() {
			return netip.Addr{}, fmt.Errorf("%s %s: link-local addresses have no RoCEv2 GID here: use a global address", flag, s)
		}
		return a.Unmap(), nil
	}
	addrs, err := net.LookupHost(s)
	if err != nil || len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("%s %s: not an IP address, and the name does not resolve (%v)", flag, s, err)
	}
	var first netip.Addr
	for _, h := range addrs {
		a, err := netip.ParseAddr(h)
		if err != nil {
			continue
		}
		if a.Unmap().Is4() {
			return a.Unmap(), nil
		}
		if !first.IsValid() {
			first = a
		}
	}
	if !first.IsValid() {
		return first, fmt.Errorf("%s %s: the name resolves to no IP address", flag, s)
	}
	return first, nil
}

// rpingInterface picks the interface when --dev is not given, as rdma_cm picks the
// RDMA device from the addresses: the interface holding local (the server's -a,
// the client's -I); for a client, the interface of the kernel's route to dst; for a
// server without -a, the only interface with an address.
func rpingInterface(local, dst netip.Addr) (string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	holding := func(a netip.Addr) string {
		for _, ifc := range ifs {
			addrs, _ := ifc.Addrs()
			for _, ad := range addrs {
				if n, ok := ad.(*net.IPNet); ok {
					if x, ok := netip.AddrFromSlice(n.IP); ok && x.Unmap() == a {
						return ifc.Name
					}
				}
			}
		}
		return ""
	}
	switch {
	case local.IsValid():
		if n := holding(local); n != "" {
			return n, nil
		}
		return "", fmt.Errorf("%v is not an address of this host (of this network namespace): give one of its own addresses, or the interface with --dev", local)
	case dst.IsValid():
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 4791)))
		if err != nil {
			return "", fmt.Errorf("no route to %v (%v): check -a, or give the interface with --dev", dst, err)
		}
		la := c.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap()
		c.Close()
		n := holding(la)
		if n == "" || n == "lo" {
			return "", fmt.Errorf("-a %v is an address of this host: run the server on another host or network namespace, and give its address", dst)
		}
		return n, nil
	}
	var cands []string
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, ad := range addrs {
			if n, ok := ad.(*net.IPNet); ok && !n.IP.IsLinkLocalUnicast() {
				cands = append(cands, ifc.Name)
				break
			}
		}
	}
	if len(cands) == 1 {
		return cands[0], nil
	}
	return "", fmt.Errorf("%d interfaces with an address here (%s): give the one to serve with --dev, or bind one of its addresses with -a", len(cands), strings.Join(cands, ", "))
}

func (o *rpingOptions) dbg(format string, args ...any) {
	if o.debug {
		fmt.Fprintf(o.out, format, args...)
	}
}

// rpingParam is rping_init_conn_param's: one READ each way, retry and RNR retry 7.
var rpingParam = rdmacm.Param{ResponderResources: 1, InitiatorDepth: 1, RetryCount: 7, RNRRetryCount: 7}

func (o *rpingOptions) runClient(eng *engine, svc *rdmacm.Service) error {
	dst := netip.AddrPortFrom(o.dst, uint16(o.port))
	// rdma_resolve_addr: the peer's Ethernet address first, so that a wrong -a
	// fails here, within seconds, and not through the CM's retries.
	if gid, ok := gidOfVersion(eng.dev.GIDTable(), o.dst, o.local); ok {
		if _, err := eng.pd.CreateAH(transport.AddressHandle{DGID: roce.GIDFromAddr(o.dst), SGIDIndex: gid}); err != nil {
			return fmt.Errorf("resolving -a %v: %v\n(rping: RDMA_CM_EVENT_ADDR_ERROR: is the server's address right, and is it up on this link?)", o.dst, err)
		}
	}
	o.dbg("rdma_resolve_addr - rdma_resolve_route successful\n")
	x, err := newRpingConn(eng, o, true)
	if err != nil {
		return err
	}
	defer x.close()
	ctx, cancel := context.WithTimeout(context.Background(), rpingConnectLimit)
	defer cancel()
	noEndpoint := cancelOnUnreachable(ctx, o.dst, cmRetries*cmRetryDelay, cancel)
	conn, err := svc.Dial(ctx, x.qp, dst, rpingParam, rdmacm.DialOptions{Src: o.local})
	if err != nil {
		if did, tried := noEndpoint(); did {
			return fmt.Errorf("%w: start rping -s (or xroce rping -s) there, or check -a\n(rping: RDMA_CM_EVENT_UNREACHABLE)", errNoRoCEEndpoint(o.dst, tried))
		}
		if ctx.Err() != nil {
			return fmt.Errorf("no answer from %v to our connection request in %v: is a server running there (rping -s, xroce rping -s) with an RDMA CM (rdma_rxe, mlx5, xroce), and is UDP port 4791 open? (%v)", o.dst, rpingConnectLimit, err)
		}
		var rej *rdmacm.RejectError
		if errors.As(err, &rej) {
			return fmt.Errorf("connecting to %v: %w\n(rping: RDMA_CM_EVENT_REJECTED)", dst, err)
		}
		return fmt.Errorf("connecting to %v: %w", dst, err)
	}
	x.connected(conn)
	o.dbg("rdma_connect successful\n")
	err = x.client()
	o.disconnect(conn, "client")
	return err
}

// disconnect is rdma_disconnect: a DREQ, or the DREP when the peer's DREQ came
// first. It waits for the end of that exchange (rping's client prints its
// DISCONNECT EVENT line then), at most rpingDrepLimit: once rping exits the kernel
// goes on retransmitting the DREQ, xroce does not.
func (o *rpingOptions) disconnect(conn *rdmacm.Conn, who string) {
	peerFirst := conn.Err() != nil
	conn.Disconnect()
	select {
	case <-conn.Disconnected():
		if !peerFirst {
			fmt.Fprintf(o.errw, "%s DISCONNECT EVENT...\n", who)
		}
	case <-time.After(rpingDrepLimit):
		fmt.Fprintf(o.errw, "%s: no DREP from the peer within %v\n", who, rpingDrepLimit)
	}
}

// gidOfVersion returns the index of the GID to reach dst from: local's, else the
// first RoCEv2 GID of dst's IP version.
func gidOfVersion(t roce.GIDTable, dst, local netip.Addr) (int, bool) {
	for _, e := range t {
		a := e.GID.Addr()
		if e.Version != roce.RoCEv2 || e.GID == (roce.GID{}) || a.Is4() != dst.Is4() || a.IsLinkLocalUnicast() {
			continue
		}
		if !local.IsValid() || a == local {
			return e.Index, true
		}
	}
	return 0, false
}

func (o *rpingOptions) runServer(eng *engine, svc *rdmacm.Service) error {
	o.dbg("rdma_bind_addr successful\n")
	l, err := svc.Listen(uint16(o.port), rpingBacklog)
	if err != nil {
		return err
	}
	defer l.Close()
	o.dbg("rdma_listen\n")
	for {
		req, err := l.Accept(context.Background())
		if err != nil {
			return err
		}
		o.dbg("cma_event type RDMA_CM_EVENT_CONNECT_REQUEST from %v\n", req.Remote)
		if o.bindAddr.IsValid() && req.Local.Addr() != o.bindAddr {
			_ = req.Reject(nil) // bound to another address: rdma_cm would not see it
			continue
		}
		if !o.persistent {
			return o.serve(eng, req)
		}
		go func() {
			if err := o.serve(eng, req); err != nil {
				fmt.Fprintf(o.errw, "xroce rping: %v: %v\n", req.Remote, err)
			}
		}()
	}
}

// serve accepts one connection request and serves it until the client
// disconnects.
func (o *rpingOptions) serve(eng *engine, req *rdmacm.Request) error {
	x, err := newRpingConn(eng, o, false)
	if err != nil {
		_ = req.Reject(nil)
		return err
	}
	defer x.close()
	o.dbg("accepting client connection request\n")
	// rdma_accept(id, NULL): the REQ's resources, at most the device's; retry 7.
	conn, err := req.Accept(x.qp, rdmacm.Param{ResponderResources: rdmacm.MaxResources, InitiatorDepth: rdmacm.MaxResources,
		RetryCount: 7, RNRRetryCount: 7})
	if err != nil {
		return err
	}
	x.connected(conn)
	if err := conn.WaitEstablished(context.Background()); err != nil {
		return err
	}
	o.dbg("cma_event type RDMA_CM_EVENT_ESTABLISHED\n")
	err = x.server()
	o.disconnect(conn, "server") // the DREP to the client's DREQ
	return err
}
