package main

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/xroce/xroce/cmd/xroce/oob"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// runPingpong is ibv_rc_pingpong: SENDs bounced between client and server, with its
// TCP exchange and its output.
func runPingpong(name string, args []string) error {
	oneThread()
	return pingpong(args, os.Stdout)
}

// pingpongSendCQE is the room pingpong's CQ keeps beside -r's receives for the
// send completions; maxPingpongRx is the -r that leaves it in the device's max_cqe
// (ibv_rc_pingpong's CQ of rx_depth + 1 fails to be created beyond it on rdma_rxe).
const (
	pingpongSendCQE = 8
	maxPingpongRx   = transport.MaxCQE - pingpongSendCQE
)

func pingpong(args []string, w io.Writer) error {
	fs := pflag.NewFlagSet(name0("pingpong"), pflag.ContinueOnError)
	fs.SetOutput(w)
	lo := linkOptions{gidFlag: "-g"}
	port := fs.IntP("port", "p", oob.DefaultPort, "TCP port of the exchange")
	fs.StringVarP(&lo.dev, "ib-dev", "d", "", "network interface")
	ibPort := fs.IntP("ib-port", "i", 1, "port (1)")
	fs.IntVarP(&lo.gidIndex, "gid-idx", "g", -1, "GID index (default: the first IPv4 GID)")
	size := fs.IntP("size", "s", 4096, "message size")
	mtu := fs.IntP("mtu", "m", 1024, "path MTU")
	rxDepth := fs.IntP("rx-depth", "r", 500, "receives posted")
	iters := fs.IntP("iters", "n", 1000, "exchanges")
	fs.IntP("sl", "l", 0, "service level (no meaning on RoCE; accepted)")
	events := fs.BoolP("events", "e", false, "sleep on completion events; without it pingpong polls its CQ a while before it sleeps")
	chk := fs.BoolP("chk", "c", false, "validate every received message (ibv_*_pingpong's -c)")
	connection := fs.String("connection", "RC", "RC, UC or UD: ibv_rc_pingpong, ibv_uc_pingpong or ibv_ud_pingpong (pingpong_unrel.go)")
	addLinkFlags(fs, &lo)
	if err := parseFlags(fs, args, &lo); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errUsage
		}
		return err
	}
	pm, err := roce.MTUFromBytes(*mtu)
	switch {
	case err != nil:
		return fmt.Errorf("-m %d: %v", *mtu, err)
	case *ibPort != 1:
		return fmt.Errorf("-i %d: xroce devices have port 1 only", *ibPort)
	case *port <= 0 || *port > 65535:
		return fmt.Errorf("-p %d: TCP ports are 1..65535", *port)
	case lo.gidIndex < -1:
		return fmt.Errorf("-g %d: GID indexes start at 0", lo.gidIndex)
	case *size <= 0 || *iters <= 0 || *rxDepth <= 0:
		return fmt.Errorf("-s, -n and -r must be positive")
	case *rxDepth > maxPingpongRx:
		return fmt.Errorf("-r %d: at most %d (the receives and a few sends complete to one CQ, and the device's max_cqe is %d)", *rxDepth, maxPingpongRx, transport.MaxCQE)
	case *size > transport.MaxMsgSize/2:
		return fmt.Errorf("-s %d: at most %d (a send and a receive buffer of that size)", *size, transport.MaxMsgSize/2)
	case fs.NArg() > 1:
		return fmt.Errorf("one server address at most")
	}
	if typ, err := parseConnection(*connection); err != nil || typ != transport.QPT_RC {
		if err != nil {
			return err
		}
		return pingpongUnreliable(w, typ, ppArgs{lo: lo, port: *port, size: *size, rxDepth: *rxDepth, iters: *iters, mtu: pm, unreliable: true,
			server: fs.Arg(0), events: *events, chk: *chk}, fs.Changed("size"))
	}
	client := fs.NArg() == 1
	e, err := openEnv(lo)
	if err != nil {
		return err
	}
	defer e.stop()
	if err := e.checkPathMTU(pm); err != nil {
		return err
	}
	prov := e.prov
	buf, err := prov.Alloc(2 * *size)
	if err != nil {
		return err
	}
	mr, err := prov.RegMR(buf, transport.AccessLocalWrite)
	if err != nil {
		return err
	}
	cq, err := prov.CreateCQ(*rxDepth + pingpongSendCQE)
	if err != nil {
		return err
	}
	qp, err := prov.CreateQP(cq, cq, transport.QPCap{MaxSendWR: 1, MaxRecvWR: *rxDepth, MaxSendSGE: 1, MaxRecvSGE: 1})
	if err != nil {
		return err
	}
	if err := transport.BringUp(qp, transport.QPS_RESET, transport.QPS_INIT, transport.ConnectParams{}); err != nil {
		return err
	}
	recv := func(id uint64) error {
		_, err := qp.PostRecv(transport.RecvWR{WRID: id, SGList: []transport.SGE{{Addr: mr.Addr() + uint64(*size), Length: uint32(*size), LKey: mr.LKey()}}})
		return err
	}
	for i := 0; i < *rxDepth; i++ {
		if err := recv(uint64(i)); err != nil {
			return err
		}
	}
	local := oob.PingpongDest{QPN: qp.QPN(), PSN: rand.Uint32() & 0xFFFFFF, GID: e.gid.GID}
	nc, err := oobConn(fs.Arg(0), *port, w, false)
	if err != nil {
		return err
	}
	strays := markStrays(e)
	fmt.Fprintf(w, "  local address:  LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", local.LID, local.QPN, local.PSN, local.GID)
	connect := func(remote oob.PingpongDest) error {
		fmt.Fprintf(w, "  remote address: LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", remote.LID, remote.QPN, remote.PSN, remote.GID)
		if err := checkPeerGID(prov.GIDTable(), e.gid, remote.GID, "-g"); err != nil {
			return err
		}
		// rc_pingpong's pp_connect_ctx: one READ/atomic each way, default timers
		// (access flags 0 at INIT).
		return transport.BringUp(qp, transport.QPS_INIT, transport.QPS_RTS, transport.ConnectParams{
			AH: transport.AddressHandle{DGID: remote.GID, SGIDIndex: e.gid.Index}, PathMTU: pm, DestQPN: remote.QPN,
			RQPSN: remote.PSN, MaxDestRdAtomic: 1, SQPSN: local.PSN, MaxRdAtomic: 1})
	}
	// The server connects before it answers, so its QP is ready when the client's
	// first SEND arrives (rc_pingpong's pp_server_exch_dest).
	if _, err := oob.PingpongExchange(nc, client, local, 60*time.Second, connect); err != nil {
		return err
	}
	send := transport.SendWR{WRID: 1 << 40, Opcode: transport.WR_SEND, Flags: transport.SendSignaled,
		SGList: []transport.SGE{{Addr: mr.Addr(), Length: uint32(*size), LKey: mr.LKey()}}}
	a := ppArgs{size: *size, iters: *iters, server: fs.Arg(0)}
	if *chk {
		chkArm(&a, buf[:*size], buf[*size:2**size], 0)
	}
	c := &conn{t: test{name: "pingpong"}, cq: cq, env: e, gidFlag: "-g", spin: cqSpin(*events), strays: strays, mtu: pm}
	if err := pingpongLoop(w, c, qp, send, recv, a); err != nil {
		return err
	}
	c.linger(0) // rc_pingpong's default timers
	return nil
}
