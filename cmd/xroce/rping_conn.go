package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/transport/rdmacm"
)

// rpingConn is one side of an rping connection: rping's buffers, each its own
// memory region as rping_setup_buffers registers them (the receive and send
// buffers of one struct rping_rdma_info, the rdma buffer the peer reads or writes,
// and the client's start buffer), one CQ and the RC QP (send depth 16, two
// receives).
type rpingConn struct {
	o    *rpingOptions
	qp   *transport.QueuePair
	cq   *transport.CompletionQueue
	conn *rdmacm.Conn
	mrs  []*transport.MemoryRegion
	// recv and send hold a struct rping_rdma_info; rdma is the -S buffer the
	// server reads into and writes from, and the client's the server writes to;
	// start (client) is what the server reads.
	recv, send, rdma, start *transport.MemoryRegion

	wcs    []transport.WorkCompletion
	got    []rpingEvent // completions polled, not yet waited for
	ctx    context.Context
	cancel context.CancelFunc
}

// rpingEvent is a completion, with the struct rping_rdma_info of a receive.
type rpingEvent struct {
	wc   transport.WorkCompletion
	info [rpingInfoLen]byte
}

// errRpingDisconnected: the peer disconnected while this side waited.
var errRpingDisconnected = errors.New("disconnected")

func newRpingConn(eng *engine, o *rpingOptions, client bool) (*rpingConn, error) {
	x := &rpingConn{o: o, wcs: make([]transport.WorkCompletion, 8)}
	remote := transport.AccessLocalWrite | transport.AccessRemoteRead | transport.AccessRemoteWrite
	var err error
	reg := func(n int, access transport.Access) *transport.MemoryRegion {
		if err != nil {
			return nil
		}
		var mr *transport.MemoryRegion
		if mr, err = eng.pd.RegMR(make([]byte, n), access); err == nil {
			x.mrs = append(x.mrs, mr)
		}
		return mr
	}
	x.recv, x.send, x.rdma = reg(rpingInfoLen, transport.AccessLocalWrite), reg(rpingInfoLen, 0), reg(o.size, remote)
	if client {
		x.start = reg(o.size, remote)
	}
	if err != nil {
		x.close()
		return nil, err
	}
	x.cq = eng.dev.CreateCQ(2 * rpingSQDepth)
	qp, err := eng.pd.CreateQP(transport.QPInitAttr{SendCQ: x.cq, RecvCQ: x.cq,
		Cap: transport.QPCap{MaxSendWR: rpingSQDepth, MaxRecvWR: 2, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		x.close()
		return nil, err
	}
	x.qp = qp
	// rdma_create_qp leaves the QP in INIT, where rping posts its receive.
	if err := transport.BringUp(qp, transport.QPS_RESET, transport.QPS_INIT, transport.ConnectParams{}); err != nil {
		x.close()
		return nil, err
	}
	if err := x.postRecv(); err != nil {
		x.close()
		return nil, err
	}
	o.dbg("created pd, cq, qp, buffers\n")
	return x, nil
}

// connected sets the connection; waits end when it does.
func (x *rpingConn) connected(conn *rdmacm.Conn) {
	x.conn = conn
	x.ctx, x.cancel = context.WithCancel(context.Background())
	go func() {
		select {
		case <-conn.Done():
		case <-x.ctx.Done():
		}
		x.cancel()
	}()
}

func (x *rpingConn) close() {
	if x.cancel != nil {
		x.cancel()
	}
	if x.qp != nil {
		_ = x.qp.Destroy()
	}
	for _, mr := range x.mrs {
		_ = mr.Dereg()
	}
}

func (x *rpingConn) postRecv() error {
	_, err := x.qp.PostRecv(transport.RecvWR{SGList: []transport.SGE{{Addr: x.recv.Addr(), Length: rpingInfoLen, LKey: x.recv.LKey()}}})
	return err
}

// postInfo sends the struct rping_rdma_info of mr (rping_format_send): its
// address, rkey and the -S size, big-endian.
func (x *rpingConn) postInfo(mr *transport.MemoryRegion) error {
	b := x.send.Buf()
	binary.BigEndian.PutUint64(b[0:], mr.Addr())
	binary.BigEndian.PutUint32(b[8:], mr.RKey())
	binary.BigEndian.PutUint32(b[12:], uint32(x.o.size))
	x.o.dbg("RDMA addr %x rkey %x len %d\n", mr.Addr(), mr.RKey(), x.o.size)
	return x.postSend()
}

// postSend sends the send buffer: an info, or the server's go-ahead (its send
// buffer, never formatted: 16 zero bytes).
func (x *rpingConn) postSend() error {
	_, err := x.qp.PostSend(transport.SendWR{Opcode: transport.WR_SEND, Flags: transport.SendSignaled,
		SGList: []transport.SGE{{Addr: x.send.Addr(), Length: rpingInfoLen, LKey: x.send.LKey()}}})
	return err
}

// postRDMA posts an RDMA READ or WRITE of n bytes between the rdma buffer and the
// peer's buffer at addr/rkey.
func (x *rpingConn) postRDMA(op transport.WROpcode, n uint32, addr uint64, rkey uint32) error {
	_, err := x.qp.PostSend(transport.SendWR{Opcode: op, Flags: transport.SendSignaled, RemoteAddr: addr, RKey: rkey,
		SGList: []transport.SGE{{Addr: x.rdma.Addr(), Length: n, LKey: x.rdma.LKey()}}})
	return err
}

// wait returns the next completion other than a SEND's, which must be of opcode
// want; what names it for errors. A receive is checked (rping's "Received bogus
// data") and the receive posted again, as rping's CQ handler does. The peer's
// disconnect ends the wait with errRpingDisconnected.
func (x *rpingConn) wait(want transport.WCOpcode, what string) (rpingEvent, error) {
	for {
		if len(x.got) > 0 {
			ev := x.got[0]
			x.got = x.got[1:]
			if ev.wc.Opcode != want {
				return ev, fmt.Errorf("a %v completion while waiting for %s: the peer does not follow rping's exchange", ev.wc.Opcode, what)
			}
			return ev, nil
		}
		n := x.cq.Poll(x.wcs)
		for _, wc := range x.wcs[:n] {
			if err := x.take(wc, what); err != nil {
				return rpingEvent{}, err
			}
		}
		if n > 0 {
			continue
		}
		if x.ctx.Err() != nil {
			return rpingEvent{}, errRpingDisconnected
		}
		_ = x.cq.Wait(x.ctx)
	}
}

// take handles one polled completion.
func (x *rpingConn) take(wc transport.WorkCompletion, what string) error {
	if wc.Status != transport.WC_SUCCESS {
		if wc.Status == transport.WC_WR_FLUSH_ERR && x.ctx.Err() != nil {
			return errRpingDisconnected
		}
		return x.wcError(wc, what)
	}
	ev := rpingEvent{wc: wc}
	switch wc.Opcode {
	case transport.WC_SEND:
		x.o.dbg("send completion\n")
		return nil
	case transport.WC_RDMA_READ:
		x.o.dbg("rdma read completion\n")
	case transport.WC_RDMA_WRITE:
		x.o.dbg("rdma write completion\n")
	case transport.WC_RECV:
		x.o.dbg("recv completion\n")
		if wc.ByteLen != rpingInfoLen {
			return fmt.Errorf("received bogus data, size %d, while waiting for %s: an rping peer sends %d bytes (struct rping_rdma_info)", wc.ByteLen, what, rpingInfoLen)
		}
		copy(ev.info[:], x.recv.Buf())
		if err := x.postRecv(); err != nil {
			return err
		}
	}
	x.got = append(x.got, ev)
	return nil
}

// wcError explains a failed completion.
func (x *rpingConn) wcError(wc transport.WorkCompletion, what string) error {
	hint := ""
	switch wc.Status {
	case transport.WC_REM_ACCESS_ERR:
		hint = ": the peer refused the access (the rkey, address or length it advertised is outside its registered buffer)"
	case transport.WC_LOC_LEN_ERR:
		if wc.Opcode == transport.WC_RECV {
			hint = fmt.Sprintf(": the peer sent more than %d bytes, not a struct rping_rdma_info (received bogus data)", rpingInfoLen)
		}
	case transport.WC_RETRY_EXC_ERR:
		hint = ": the peer stopped answering (it exited, or its link went down)"
	case transport.WC_RNR_RETRY_EXC_ERR:
		hint = ": the peer had no receive posted"
	}
	return fmt.Errorf("cq completion failed status %v (%v) while waiting for %s%s", wc.Status, wc.Opcode, what, hint)
}

// parseInfo reads a struct rping_rdma_info.
func parseInfo(b [rpingInfoLen]byte) (addr uint64, rkey, size uint32) {
	return binary.BigEndian.Uint64(b[0:]), binary.BigEndian.Uint32(b[8:]), binary.BigEndian.Uint32(b[12:])
}

// cstr is b up to its first NUL, as printf's %s reads it.
func cstr(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}

// rpingFill writes ping's start buffer as rping_test_client does: "rdma-ping-%d: ",
// then ASCII from first upward, wrapping from 122 ('z') to 65 ('A'), the last byte
// NUL.
func rpingFill(b []byte, ping int, first byte) {
	cc := copy(b[:len(b)-1], fmt.Sprintf("rdma-ping-%d: ", ping))
	for i, c := cc, first; i < len(b); i++ {
		b[i] = c
		if c++; c > 122 {
			c = 65
		}
	}
	b[len(b)-1] = 0
}

// client runs rping_test_client: -C pings (0: until the server disconnects).
func (x *rpingConn) client() error {
	o := x.o
	first := byte(65)
	for ping := 0; o.count == 0 || ping < o.count; ping++ {
		sb := x.start.Buf()
		rpingFill(sb, ping, first)
		if first++; first > 122 {
			first = 65
		}
		if err := x.postInfo(x.start); err != nil {
			return err
		}
		// The server READs the start buffer, then says go ahead.
		if _, err := x.wait(transport.WC_RECV, "the server's go-ahead after its RDMA READ"); err != nil {
			return x.clientEnd(err, ping)
		}
		if err := x.postInfo(x.rdma); err != nil {
			return err
		}
		// The server WRITEs the data back into the rdma buffer, then says go ahead.
		if _, err := x.wait(transport.WC_RECV, "the server's go-ahead after its RDMA WRITE"); err != nil {
			return x.clientEnd(err, ping)
		}
		if o.validate && !bytes.Equal(sb, x.rdma.Buf()) {
			return fmt.Errorf("data mismatch! (ping %d: the server wrote back %q, we sent %q)", ping, cstr(x.rdma.Buf()), cstr(sb))
		}
		if o.verbose {
			fmt.Fprintf(o.out, "ping data: %s\n", cstr(x.rdma.Buf()))
		}
	}
	return nil
}

// clientEnd is the client's error for a wait that failed in ping: the server's
// disconnect ends a run without -C as rping's does (exit 0).
func (x *rpingConn) clientEnd(err error, ping int) error {
	if !errors.Is(err, errRpingDisconnected) {
		return err
	}
	fmt.Fprintf(x.o.errw, "client DISCONNECT EVENT...\n")
	if x.o.count == 0 {
		return nil
	}
	return fmt.Errorf("the server disconnected in ping %d of %d (its output says why): %v", ping, x.o.count, x.conn.Err())
}

// server runs rping_test_server until the client disconnects.
func (x *rpingConn) server() error {
	o := x.o
	for ping := 0; ; ping++ {
		ev, err := x.wait(transport.WC_RECV, "the client's start buffer")
		if errors.Is(err, errRpingDisconnected) {
			fmt.Fprintf(o.errw, "server DISCONNECT EVENT...\n")
			return nil
		}
		if err != nil {
			return err
		}
		addr, rkey, n := parseInfo(ev.info)
		o.dbg("Received rkey %x addr %x len %d from peer\n", rkey, addr, n)
		if n == 0 || n > uint32(o.size) {
			return fmt.Errorf("the client advertises a %d-byte buffer for ping %d; this server's -S is %d: give the server -S %d or more (rping's server would fail its RDMA READ)", n, ping, o.size, max(n, rpingMinSize))
		}
		o.dbg("server received sink adv\n")
		if err := x.postRDMA(transport.WR_RDMA_READ, n, addr, rkey); err != nil {
			return err
		}
		o.dbg("server posted rdma read req \n")
		if _, err := x.wait(transport.WC_RDMA_READ, fmt.Sprintf("our RDMA READ of %d bytes at 0x%x (rkey 0x%x)", n, addr, rkey)); err != nil {
			return x.serverEnd(err, ping)
		}
		o.dbg("server received read complete\n")
		if o.verbose {
			fmt.Fprintf(o.out, "server ping data: %s\n", cstr(x.rdma.Buf()))
		}
		if err := x.postSend(); err != nil {
			return err
		}
		o.dbg("server posted go ahead\n")
		if ev, err = x.wait(transport.WC_RECV, "the client's rdma buffer"); err != nil {
			return x.serverEnd(err, ping)
		}
		addr, rkey, n = parseInfo(ev.info)
		o.dbg("Received rkey %x addr %x len %d from peer\n", rkey, addr, n)
		o.dbg("server received sink adv\n")
		// rping writes strlen(rdma_buf) + 1 bytes back: the data up to its NUL.
		data := cstr(x.rdma.Buf())
		if len(data) == len(x.rdma.Buf()) {
			return fmt.Errorf("the data read in ping %d has no NUL in its %d bytes: not rping's start buffer", ping, o.size)
		}
		wlen := uint32(len(data) + 1)
		if wlen > n {
			return fmt.Errorf("the client advertises a %d-byte buffer to write ping %d back into, smaller than its %d bytes of data", n, ping, wlen)
		}
		o.dbg("rdma write from lkey %x laddr %x len %d\n", x.rdma.LKey(), x.rdma.Addr(), wlen)
		if err := x.postRDMA(transport.WR_RDMA_WRITE, wlen, addr, rkey); err != nil {
			return err
		}
		if _, err := x.wait(transport.WC_RDMA_WRITE, fmt.Sprintf("our RDMA WRITE of %d bytes at 0x%x (rkey 0x%x)", wlen, addr, rkey)); err != nil {
			return x.serverEnd(err, ping)
		}
		o.dbg("server rdma write complete \n")
		if err := x.postSend(); err != nil {
			return err
		}
		o.dbg("server posted go ahead\n")
	}
}

// serverEnd is the server's error for a wait that failed inside ping.
func (x *rpingConn) serverEnd(err error, ping int) error {
	if !errors.Is(err, errRpingDisconnected) {
		return err
	}
	fmt.Fprintf(x.o.errw, "server DISCONNECT EVENT...\n")
	return fmt.Errorf("the client disconnected in the middle of ping %d", ping)
}
