package main

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/xroce/xroce/cmd/xroce/oob"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// pingpong --connection UC|UD: ibv_uc_pingpong and ibv_ud_pingpong (rdma-core
// libibverbs/examples/uc_pingpong.c and ud_pingpong.c). Both exchange the same
// 52-byte message as rc_pingpong, in the same order; what differs is the QP:
//
//   - UC: INIT with access flags 0; RTR with the path, MTU, peer QPN and PSN; RTS with
//     the send PSN. No acknowledgements: a lost packet loses its message, and the
//     ping-pong then stops, as the C tool does.
//   - UD: INIT with Q_Key 0x11111111; RTR with nothing; RTS with the send PSN; an
//     address handle for the peer. Every message is one packet (-s at most the port's
//     MTU, 1024 by default as in current rdma-core); receives are -s + 40 bytes for the
//     GRH area, and sends name the peer's QPN and Q_Key 0x11111111.
//
// Only the engine runs them (--provider verbs has no UD or UC here).

// udPingpongQKey is the Q_Key both sides of ud_pingpong use.
const udPingpongQKey = 0x11111111

// ppArgs are pingpong's parsed flags.
type ppArgs struct {
	lo                         linkOptions
	port, size, rxDepth, iters int
	mtu                        roce.MTU
	server                     string                  // empty: the server
	events                     bool                    // -e: sleep on completion events, never poll
	chk                        bool                    // -c: check every received message (pingpong_chk.go)
	check                      func(byteLen int) error // judges the message just received (chkArm)
	unreliable                 bool                    // UC or UD: a lost message is not sent again
}

// parseConnection reads --connection: RC (the default), UC or UD, any case.
func parseConnection(s string) (transport.QPType, error) {
	switch strings.ToUpper(s) {
	case "RC":
		return transport.QPT_RC, nil
	case "UC":
		return transport.QPT_UC, nil
	case "UD":
		return transport.QPT_UD, nil
	}
	return 0, fmt.Errorf("--connection %q: want RC, UC or UD", s)
}

// pingpongUnreliable runs pingpong on a UC or UD QP. sizeSet tells whether -s was
// given: ud_pingpong's default size is 1024, not 4096.
func pingpongUnreliable(w io.Writer, typ transport.QPType, a ppArgs, sizeSet bool) error {
	if a.lo.provider != "" && a.lo.provider != "engine" {
		return fmt.Errorf("--connection %s runs on the engine only (--provider engine)", strings.TrimPrefix(typ.String(), "IBV_QPT_"))
	}
	ud := typ == transport.QPT_UD
	if ud && !sizeSet {
		a.size = 1024
	}
	e, err := openEnv(a.lo)
	if err != nil {
		return err
	}
	defer e.stop()
	if err := e.checkPathMTU(a.mtu); err != nil {
		return err
	}
	eng, ok := e.prov.(*engine)
	if !ok {
		return fmt.Errorf("--connection %v needs the engine", typ)
	}
	dev, pd := eng.dev, eng.pd
	grh := 0
	if ud {
		if mtu := dev.MaxPathMTU().Bytes(); a.size > mtu {
			return fmt.Errorf("-s %d: a UD message is one packet, at most the port's MTU (%d here; the netdev MTU %d carries no more)",
				a.size, mtu, dev.Link().MTU())
		}
		grh = transport.GRHLen
	}
	// The send buffer, then the receive buffer (with the GRH area for UD).
	buf := make([]byte, 2*a.size+grh)
	mr, err := pd.RegMR(buf, transport.AccessLocalWrite)
	if err != nil {
		return err
	}
	if a.chk {
		chkArm(&a, buf[:a.size], buf[a.size+grh:2*a.size+grh], grh)
	}
	cq := dev.CreateCQ(a.rxDepth + pingpongSendCQE)
	qp, err := pd.CreateQP(transport.QPInitAttr{Type: typ, SendCQ: cq, RecvCQ: cq,
		Cap: transport.QPCap{MaxSendWR: 1, MaxRecvWR: a.rxDepth, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return err
	}
	defer qp.Destroy()
	params := transport.ConnectParams{Type: typ, QKey: udPingpongQKey}
	if err := transport.BringUp(qp, transport.QPS_RESET, transport.QPS_INIT, params); err != nil {
		return err
	}
	recvSGE := []transport.SGE{{Addr: mr.Addr() + uint64(a.size), Length: uint32(a.size + grh), LKey: mr.LKey()}}
	recv := func(id uint64) error {
		_, err := qp.PostRecv(transport.RecvWR{WRID: id, SGList: recvSGE})
		return err
	}
	for i := range a.rxDepth {
		if err := recv(uint64(i)); err != nil {
			return err
		}
	}
	local := oob.PingpongDest{QPN: qp.QPN(), PSN: rand.Uint32() & 0xFFFFFF, GID: e.gid.GID}
	nc, err := oobConn(a.server, a.port, w, false)
	if err != nil {
		return err
	}
	strays := markStrays(e)
	sep := ","
	if ud {
		sep = ":" // ud_pingpong's local line has a colon before the GID
	}
	fmt.Fprintf(w, "  local address:  LID 0x%04x, QPN 0x%06x, PSN 0x%06x%s GID %s\n", local.LID, local.QPN, local.PSN, sep, local.GID)
	send := transport.SendWR{WRID: 1 << 40, Opcode: transport.WR_SEND, Flags: transport.SendSignaled,
		SGList: []transport.SGE{{Addr: mr.Addr(), Length: uint32(a.size), LKey: mr.LKey()}}}
	connect := func(remote oob.PingpongDest) error {
		fmt.Fprintf(w, "  remote address: LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", remote.LID, remote.QPN, remote.PSN, remote.GID)
		if err := checkPeerGID(dev.GIDTable(), e.gid, remote.GID, "-g"); err != nil {
			return err
		}
		ah := transport.AddressHandle{DGID: remote.GID, SGIDIndex: e.gid.Index}
		p := params
		p.AH, p.PathMTU, p.DestQPN, p.RQPSN, p.SQPSN = ah, a.mtu, remote.QPN, remote.PSN, local.PSN
		if err := transport.BringUp(qp, transport.QPS_INIT, transport.QPS_RTS, p); err != nil {
			return err
		}
		if ud {
			h, err := pd.CreateAH(ah)
			if err != nil {
				return err
			}
			send.AH, send.RemoteQPN, send.RemoteQKey = h, remote.QPN, udPingpongQKey
		}
		return nil
	}
	// As with RC, the server connects before it answers.
	if _, err := oob.PingpongExchange(nc, a.server != "", local, 60*time.Second, connect); err != nil {
		return err
	}
	return pingpongLoop(w, &conn{t: test{name: "pingpong"}, cq: cq, env: e, gidFlag: "-g", spin: cqSpin(a.events), strays: strays, mtu: a.mtu}, qp, send, recv, a)
}

// ppSilence is how long pingpong waits for its peer once a message has gone or
// come: an iteration takes microseconds (milliseconds against an emulated
// rdma_rxe guest), so seconds of silence mean the peer stopped.
const ppSilence = 5 * time.Second

// ppStopped names what a silent peer did, once the test began, in place of the
// generic "no frame" error; other errors pass unchanged.
func ppStopped(c *conn, err error, scnt, rcnt int, a ppArgs) error {
	iters := a.iters
	if !errors.Is(err, errPeerSilent) || scnt+rcnt == 0 {
		return err
	}
	if hint := c.ucDropHint(); hint != "" {
		return fmt.Errorf("the test stopped after %d of %d iterations: %s", rcnt, iters, hint)
	}
	lost := ""
	if a.unreliable {
		// ibv_ud_pingpong and ibv_uc_pingpong wait for ever then.
		lost = "; or a message was lost on the network: UC and UD send nothing again, so one lost message stops the exchange"
	}
	if rcnt == 0 {
		return fmt.Errorf("nothing came back from the peer for %v after this side's first message: it exited or failed (see its output), or runs another connection type (--connection) or test%s", ppSilence, lost)
	}
	return fmt.Errorf("the peer stopped answering after %d of %d iterations (nothing from it for %v): it exited or failed (see its output), or was given a smaller -n%s", rcnt, iters, ppSilence, lost)
}

// pingpongLoop bounces a.iters messages, the client first, and prints rc_pingpong's
// two result lines.
func pingpongLoop(w io.Writer, c *conn, qp queuePair, send transport.SendWR, recv func(uint64) error, a ppArgs) error {
	client := a.server != ""
	start := time.Now()
	scnt, rcnt, pendingSend := 0, 0, false
	if client {
		if _, err := qp.PostSend(send); err != nil {
			return err
		}
		pendingSend = true
	}
	wcs := make([]transport.WorkCompletion, 16)
	var bad int
	var firstBad error
	for scnt < a.iters || rcnt < a.iters {
		if scnt+rcnt > 0 {
			c.limit = ppSilence // the peer answers within milliseconds once it runs
		}
		got, err := c.completions(wcs)
		if err != nil {
			if firstBad != nil { // what -c saw may be why
				return fmt.Errorf("%w; before it, -c found: %v", ppStopped(c, err, scnt, rcnt, a), firstBad)
			}
			return ppStopped(c, err, scnt, rcnt, a)
		}
		for _, wc := range got {
			if wc.Opcode == transport.WC_SEND {
				scnt++
				pendingSend = false
				continue
			}
			rcnt++
			if a.check != nil {
				if err := a.check(int(wc.ByteLen)); err != nil {
					bad++
					if firstBad == nil {
						firstBad = err
					}
				}
			}
			if err := recv(wc.WRID); err != nil {
				return err
			}
		}
		turn := rcnt
		if client {
			turn = rcnt + 1
		}
		if !pendingSend && scnt < a.iters && scnt < turn {
			if _, err := qp.PostSend(send); err != nil {
				return err
			}
			pendingSend = true
		}
	}
	el := time.Since(start)
	bytes := int64(a.size) * int64(a.iters) * 2
	us := float64(el.Microseconds())
	fmt.Fprintf(w, "%d bytes in %.2f seconds = %.2f Mbit/sec\n", bytes, el.Seconds(), float64(bytes)*8/us)
	fmt.Fprintf(w, "%d iters in %.2f seconds = %.2f usec/iter\n", a.iters, el.Seconds(), us/float64(a.iters))
	if firstBad != nil {
		return fmt.Errorf("-c: %d of the %d messages received were not what the peer's -c sends (does it run with -c, or another tool?); the first: %w", bad, rcnt, firstBad)
	}
	return nil
}
