package rdmacm

import (
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport"
)

// The GSI QP's buffers: receive slots of the 40-byte GRH area and a MAD, send slots
// of a MAD.
const (
	recvSlots = 64
	sendSlots = 64
	recvSlot  = transport.GRHLen + cm.MADLen
)

// gsi is QP1: a UD QP with QPN 1 and Q_Key 0x80010000 that sends and receives CM
// MADs (IBTA Vol 1 ch. 13 General Services Interface; Annex A17 for RoCEv2).
type gsi struct {
	pd   *transport.ProtectionDomain
	cq   *transport.CompletionQueue
	qp   *transport.QueuePair
	mr   *transport.MemoryRegion
	buf  []byte
	free []int // send slots not in flight
	ahs  map[netip.Addr]*transport.AH
	dev  *transport.Device // its GID table is read at each use: it follows address changes (FollowAddrs)
	wcs  []transport.WorkCompletion
}

// openGSI creates QP1 on dev, in RTS with every receive slot posted.
func openGSI(dev *transport.Device) (*gsi, error) {
	g := &gsi{pd: dev.AllocPD(), cq: dev.CreateCQ(recvSlots + sendSlots), ahs: map[netip.Addr]*transport.AH{}, dev: dev,
		buf: make([]byte, recvSlots*recvSlot+sendSlots*cm.MADLen), wcs: make([]transport.WorkCompletion, 32)}
	var err error
	if g.mr, err = g.pd.RegMR(g.buf, transport.AccessLocalWrite); err != nil {
		return nil, err
	}
	g.qp, err = g.pd.CreateQP(transport.QPInitAttr{Type: transport.QPT_UD, QPN: cm.GSIQPN, SendCQ: g.cq, RecvCQ: g.cq,
		Cap: transport.QPCap{MaxSendWR: sendSlots, MaxRecvWR: recvSlots, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return nil, fmt.Errorf("rdmacm: QP1: %w (is another connection manager running on this device?)", err)
	}
	if err := transport.BringUp(g.qp, transport.QPS_RESET, transport.QPS_RTS,
		transport.ConnectParams{Type: transport.QPT_UD, QKey: cm.GSIQKey}); err != nil {
		g.qp.Destroy()
		return nil, fmt.Errorf("rdmacm: QP1: %w", err)
	}
	for i := range recvSlots {
		if err := g.postRecv(i); err != nil {
			g.qp.Destroy()
			return nil, err
		}
	}
	for i := range sendSlots {
		g.free = append(g.free, i)
	}
	return g, nil
}

func (g *gsi) postRecv(slot int) error {
	sge := transport.SGE{Addr: g.mr.Addr() + uint64(slot*recvSlot), Length: recvSlot, LKey: g.mr.LKey()}
	_, err := g.qp.PostRecv(transport.RecvWR{WRID: uint64(slot), SGList: []transport.SGE{sge}})
	return err
}

// send posts mad to QP1 at to; false when every send slot is in flight or the
// address does not resolve (the CM's retransmission covers both).
func (g *gsi) send(to netip.Addr, mad []byte) bool {
	ah, err := g.ahFor(to)
	if err != nil || len(g.free) == 0 {
		return false
	}
	slot := g.free[len(g.free)-1]
	off := recvSlots*recvSlot + slot*cm.MADLen
	copy(g.buf[off:off+cm.MADLen], mad)
	_, err = g.qp.PostSend(transport.SendWR{WRID: uint64(slot), Opcode: transport.WR_SEND, Flags: transport.SendSignaled,
		SGList: []transport.SGE{{Addr: g.mr.Addr() + uint64(off), Length: cm.MADLen, LKey: g.mr.LKey()}},
		AH:     ah, RemoteQPN: cm.GSIQPN, RemoteQKey: cm.GSIQKey})
	if err != nil {
		return false
	}
	g.free = g.free[:len(g.free)-1]
	return true
}

// ahFor returns the address handle of QP1 at to, from the first local address of
// to's IP version, creating it once.
func (g *gsi) ahFor(to netip.Addr) (*transport.AH, error) {
	if ah := g.ahs[to]; ah != nil {
		return ah, nil
	}
	sgid, _, err := sgidFor(g.dev.GIDTable(), netip.Addr{}, to)
	if err != nil {
		return nil, err
	}
	ah, err := g.pd.CreateAH(transport.AddressHandle{DGID: roce.GIDFromAddr(to), SGIDIndex: sgid, HopLimit: HopLimit})
	if err != nil {
		return nil, err
	}
	g.ahs[to] = ah
	return ah, nil
}

// drain waits up to d for the sends in flight to complete.
func (g *gsi) drain(d time.Duration) {
	end := time.Now().Add(d)
	for len(g.free) < sendSlots && time.Now().Before(end) {
		ctx, cancel := context.WithDeadline(context.Background(), end)
		_ = g.cq.Wait(ctx)
		cancel()
		g.poll(nil)
	}
}

// received is a MAD that arrived, with its sender's address.
type received struct {
	from netip.Addr
	mad  []byte
}

// poll takes QP1's completions: send slots come back, MADs are copied out and
// their receive slots posted again. A receive that is not a whole MAD with a GRH
// is dropped (counted by the caller as len(bad)).
func (g *gsi) poll(out []received) ([]received, int) {
	bad := 0
	for {
		n := g.cq.Poll(g.wcs)
		if n == 0 {
			return out, bad
		}
		for _, wc := range g.wcs[:n] {
			slot := int(wc.WRID)
			if wc.Opcode != transport.WC_RECV {
				g.free = append(g.free, slot)
				continue
			}
			if wc.Status != transport.WC_SUCCESS {
				continue // flushed: the QP is going away
			}
			b := g.buf[slot*recvSlot : (slot+1)*recvSlot]
			from, ok := grhSource(b[:transport.GRHLen])
			if ok && wc.GRH && wc.ByteLen == recvSlot && wc.SrcQP == cm.GSIQPN {
				out = append(out, received{from: from, mad: append([]byte(nil), b[transport.GRHLen:]...)})
			} else {
				bad++
			}
			_ = g.postRecv(slot)
		}
	}
}

// grhSource returns the source address of the network header in a UD receive's
// 40-byte GRH area: an IPv6 header, or 20 bytes then an IPv4 header (union
// rdma_network_hdr; rdma_rxe rxe_resp.c).
func grhSource(grh []byte) (netip.Addr, bool) {
	if grh[0]>>4 == 6 {
		return netip.AddrFrom16([16]byte(grh[8:24])).Unmap(), true
	}
	if v4 := grh[20:]; v4[0]>>4 == 4 {
		return netip.AddrFrom4([4]byte(v4[12:16])), true
	}
	return netip.Addr{}, false
}

// caGUID is the Local CA GUID of a device: its node GUID, the interface identifier
// of the default GID (rdma_rxe derives both from the MAC).
func caGUID(t roce.GIDTable) uint64 {
	if len(t) == 0 {
		return 1
	}
	return binary.BigEndian.Uint64(t[0].GID[8:])
}

// sgidFor returns the index of the RoCEv2 GID of a local address: src when valid,
// else the first of dst's IP version.
func sgidFor(t roce.GIDTable, src, dst netip.Addr) (int, netip.Addr, error) {
	for _, e := range t {
		a := e.GID.Addr()
		if e.Version != roce.RoCEv2 || a.IsLinkLocalUnicast() {
			continue
		}
		if src.IsValid() && a == src.Unmap() || !src.IsValid() && a.Is4() == dst.Unmap().Is4() {
			return e.Index, a, nil
		}
	}
	if src.IsValid() {
		return 0, netip.Addr{}, fmt.Errorf("rdmacm: %v is not an address of this device (GID table:\n%v): %w", src, t, ErrAddress)
	}
	return 0, netip.Addr{}, fmt.Errorf("rdmacm: the device has no %s address to reach %v from (GID table:\n%v): %w",
		ipVersion(dst), dst, t, ErrAddress)
}

func ipVersion(a netip.Addr) string {
	if a.Unmap().Is4() {
		return "IPv4"
	}
	return "IPv6"
}
