package main

import (
	"context"
	"crypto/sha256"
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

func runCrosscheck(name string, args []string) error { return crosscheck(args, os.Stdout) }

// crosscheck runs the cross-check workload (xcheck_script.go) as server (no
// address) or client, on either provider, checks the completions and the memory
// against the model, and prints them in a form the interop harness compares
// between providers: one "wc" line per completion and a "mem" line with the
// region's SHA-256.
func crosscheck(args []string, w io.Writer) error {
	fs := pflag.NewFlagSet(name0("crosscheck"), pflag.ContinueOnError)
	fs.SetOutput(w)
	var lo linkOptions
	fs.StringVarP(&lo.dev, "ib-dev", "d", "", "network interface; with --provider verbs, the RDMA device")
	fs.IntVarP(&lo.gidIndex, "gid-index", "x", -1, "GID index (default: the first RoCEv2 IPv4 GID)")
	port := fs.IntP("port", "p", oob.DefaultPort, "TCP port of the exchange")
	mtu := fs.IntP("mtu", "m", 0, "path MTU (default: the largest the port carries)")
	counters := fs.Bool("counters", false, "print the counters that moved (the engine's, or the RDMA device's hw_counters)")
	addLinkFlags(fs, &lo)
	if err := parseFlags(fs, args, &lo); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errUsage
		}
		return err
	}
	if fs.NArg() > 1 {
		return fmt.Errorf("one server address at most")
	}
	if *mtu != 0 {
		if _, err := roce.MTUFromBytes(*mtu); err != nil {
			return fmt.Errorf("-m %d: %v", *mtu, err)
		}
	}
	client := fs.NArg() == 1
	e, err := openEnv(lo)
	if err != nil {
		return err
	}
	defer e.stop()
	if *counters {
		before := e.prov.Counters()
		defer func() { printCounters(w, providerName(lo.provider), before, e.prov.Counters()) }()
	}
	ourMTU := e.prov.MaxMTU()
	if *mtu != 0 {
		ourMTU, _ = roce.MTUFromBytes(*mtu) // checked before the link opened
	}
	x, err := newXcheck(e, client)
	if err != nil {
		return err
	}
	nc, err := oobConn(fs.Arg(0), *port, w, true)
	if err != nil {
		return err
	}
	s := oob.NewSession(nc, client, oob.SendBW, 2*time.Minute)
	remote, peerMTU, err := s.Connect([]oob.Dest{x.local}, ourMTU, func(r []oob.Dest, m roce.MTU) error { return x.connect(r[0], m) })
	if err != nil {
		nc.Close()
		return err
	}
	role := "server"
	if client {
		role = "client"
	}
	fmt.Fprintf(w, "crosscheck %s: provider %s, GID index %d, path MTU %d (peer offered %d), %d operations\n",
		role, providerName(lo.provider), e.gid.Index, x.mtu.Bytes(), peerMTU.Bytes(), len(x.ops))
	if client {
		err = x.runClient(remote[0])
	}
	if _, ferr := s.Finish(oob.Results{}); err == nil && ferr != nil {
		err = ferr
	}
	if err == nil && !client {
		err = x.waitRecvs()
	}
	if err != nil {
		return err
	}
	return x.report(w, role)
}

func providerName(p string) string {
	if p == "" {
		return "engine"
	}
	return p
}

// xcheck is one side of the cross-check.
type xcheck struct {
	client bool
	cq     compQueue
	qp     queuePair
	mr     memRegion
	buf    []byte
	local  oob.Dest
	mtu    roce.MTU
	gid    roce.GIDEntry
	gids   roce.GIDTable
	ops    []xcOp
	recvs  []xcOp
	wcs    []transport.WorkCompletion
}

func newXcheck(e *env, client bool) (*xcheck, error) {
	x := &xcheck{client: client, gid: e.gid, gids: e.prov.GIDTable()}
	x.ops, x.recvs = xcheckScript()
	var err error
	if x.buf, err = e.prov.Alloc(xcheckMem); err != nil {
		return nil, err
	}
	copy(x.buf, xcheckInit(client))
	if x.mr, err = e.prov.RegMR(x.buf, transport.AccessLocalWrite|transport.AccessRemoteWrite|transport.AccessRemoteRead|
		transport.AccessRemoteAtomic); err != nil {
		return nil, err
	}
	if x.cq, err = e.prov.CreateCQ(4 * len(x.ops)); err != nil {
		return nil, err
	}
	if x.qp, err = e.prov.CreateQP(x.cq, x.cq, transport.QPCap{MaxSendWR: len(x.ops), MaxRecvWR: len(x.recvs),
		MaxSendSGE: 1, MaxRecvSGE: 1}); err != nil {
		return nil, err
	}
	if err := transport.BringUp(x.qp, transport.QPS_RESET, transport.QPS_INIT, transport.ConnectParams{Access: remoteAccess}); err != nil {
		return nil, err
	}
	x.local = oob.Dest{OutReads: 16, QPN: x.qp.QPN(), PSN: rand.Uint32() & 0xFFFFFF, RKey: x.mr.RKey(), VAddr: x.mr.Addr(), GID: e.gid.GID}
	return x, nil
}

// connect brings the QP to RTS; the server posts its receives first.
func (x *xcheck) connect(remote oob.Dest, mtu roce.MTU) error {
	if err := checkPeerGID(x.gids, x.gid, remote.GID, "-x"); err != nil {
		return err
	}
	x.mtu = mtu
	if err := transport.BringUp(x.qp, transport.QPS_INIT, transport.QPS_RTS, connectParams(remote, x.local, x.gid.Index, mtu, 16, remoteAccess)); err != nil {
		return err
	}
	if x.client {
		return nil
	}
	for _, r := range x.recvs {
		wr := transport.RecvWR{WRID: uint64(r.recv)}
		if r.recvLen > 0 {
			wr.SGList = []transport.SGE{{Addr: x.mr.Addr() + uint64(r.recvOff), Length: uint32(r.recvLen), LKey: x.mr.LKey()}}
		}
		if _, err := x.qp.PostRecv(wr); err != nil {
			return err
		}
	}
	return nil
}

// runClient posts the script (as fast as the send queue takes it) and collects its
// completions.
func (x *xcheck) runClient(remote oob.Dest) error {
	for _, o := range x.ops {
		wr := o.wr
		if o.length > 0 || o.wr.Opcode == transport.WR_ATOMIC_FETCH_AND_ADD || o.wr.Opcode == transport.WR_ATOMIC_CMP_AND_SWP {
			wr.SGList = []transport.SGE{{Addr: x.mr.Addr() + uint64(o.local), Length: uint32(o.length), LKey: x.mr.LKey()}}
		}
		if o.wr.Opcode != transport.WR_SEND && o.wr.Opcode != transport.WR_SEND_WITH_IMM {
			wr.RemoteAddr, wr.RKey = remote.VAddr+uint64(o.remote), remote.RKey
		}
		if _, err := x.qp.PostSend(wr); err != nil {
			return fmt.Errorf("posting operation %d (%v, %d bytes): %w", wr.WRID, wr.Opcode, o.length, err)
		}
	}
	return x.collect(len(x.ops))
}

// waitRecvs collects the server's receive completions.
func (x *xcheck) waitRecvs() error { return x.collect(len(x.recvs)) }

func (x *xcheck) collect(n int) error {
	batch := make([]transport.WorkCompletion, 64)
	for len(x.wcs) < n {
		got := x.cq.Poll(batch)
		if got == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := x.cq.Wait(ctx)
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("%d of %d completions after 30 s: the peer stopped answering", len(x.wcs), n)
			}
			if err != nil {
				return fmt.Errorf("%d of %d completions: %w", len(x.wcs), n, err)
			}
			continue
		}
		x.wcs = append(x.wcs, batch[:got]...)
	}
	return nil
}

// report prints the completions and the memory digest, then compares both with
// the model; a difference is an error naming the first one.
func (x *xcheck) report(w io.Writer, role string) error {
	cli, srv, cliWCs, srvWCs := xcheckModel()
	wantMem, wantWCs := srv, srvWCs
	if x.client {
		wantMem, wantWCs = cli, cliWCs
	}
	for i, wc := range x.wcs {
		fmt.Fprintf(w, "wc %s %d %s\n", role, i, wcLine(wc))
	}
	fmt.Fprintf(w, "mem %s sha256 %x\n", role, sha256.Sum256(x.buf[:xcheckMem]))
	if len(x.wcs) != len(wantWCs) {
		return fmt.Errorf("crosscheck: %d completions, the model has %d", len(x.wcs), len(wantWCs))
	}
	for i := range wantWCs {
		if got, want := wcLine(x.wcs[i]), wcLine(wantWCs[i]); got != want {
			return fmt.Errorf("crosscheck: completion %d is %q, the model's is %q", i, got, want)
		}
	}
	for i := range wantMem {
		if x.buf[i] != wantMem[i] {
			return fmt.Errorf("crosscheck: memory differs from the model at offset %d (%#02x, want %#02x)", i, x.buf[i], wantMem[i])
		}
	}
	fmt.Fprintf(w, "crosscheck %s: %d completions and %d bytes of memory match the model\n", role, len(x.wcs), xcheckMem)
	return nil
}

// wcLine is a completion's fields that must agree between providers (not the QPN).
// A send-side completion's immediate data is undefined (the flag is set, the value
// is 0 on Debian 12's rdma_rxe): only the flag is compared.
func wcLine(wc transport.WorkCompletion) string {
	imm := "-"
	switch {
	case wc.HasImm && wc.Opcode < transport.WC_RECV:
		imm = "set"
	case wc.HasImm:
		imm = fmt.Sprintf("%#08x", wc.ImmData)
	}
	return fmt.Sprintf("wr_id=%d status=%v opcode=%v byte_len=%d imm=%s", wc.WRID, wc.Status, wc.Opcode, wc.ByteLen, imm)
}
