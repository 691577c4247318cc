package transport

import (
	"iter"
	"net/netip"
	"time"

	"github.com/xroce/xroce/roce"
)

// The loss state a device's RC QPs share per peer address (docs/congestion.md,
// "Many QPs after a loss").
//
// A QP turns its adaptive retransmission timer and its tail-loss probe on only
// after a loss signal of its own (rtt.go, probe.go): on a clean link it waits the
// local ACK timeout, as rdma_rxe does. With many QPs to one peer that left a QP
// which had not yet lost a packet waiting the full local ACK timeout (67 ms at
// perftest's timeout 14) when the queue its siblings share with it overflowed and
// took the tail of its flight. A loss signal of any of the QPs now marks their
// path, and every QP to that peer runs the adaptive timer and the tail probe
// while the path is lossy (after RFC 2140's sharing of state between connections
// to one host). The window rules that a QP's own loss sets off (slow restart after
// idle, the queueing-delay cut) stay the QP's own: a sibling's loss says that the
// shared queue overflowed, not that this QP's window is too large. A QP alone on
// its path behaves exactly as before: the path's loss signals are its own. The
// cost, measured in docs/congestion.md: QPs that did not lose retransmit on their
// RTO too, some of it spurious on a host whose engines are descheduled.

// peerPath is the loss state of the path to one peer address.
type peerPath struct {
	lossAt time.Time // the last loss signal of any RC QP to the peer
}

// lossy reports whether a QP to the peer saw a loss signal less than lossMemory
// ago; a nil path (a QP not yet connected) never is.
func (p *peerPath) lossy(now time.Time) bool {
	return p != nil && !p.lossAt.IsZero() && now.Sub(p.lossAt) < lossMemory
}

// armPath starts the adaptive timer and the tail probe of the device's other RC
// QPs to qp's peer, whose path has just turned lossy: a QP whose window is all in
// flight sends nothing that would start them, and its flight's tail may be what
// the shared queue lost. It walks every QP, once per turn to lossy (at most once per
// lossMemory while losses go on).
func (d *Device) armPath(qp *QueuePair) {
	for o := range d.siblings(qp) {
		if o.state == QPS_RTS || o.state == QPS_SQD {
			o.req.startTimers(o)
		}
	}
}

// siblings yields the device's other RC QPs to qp's peer address, not destroyed.
// It walks every QP.
func (d *Device) siblings(qp *QueuePair) iter.Seq[*QueuePair] {
	return func(yield func(*QueuePair) bool) {
		for _, o := range d.qps {
			if o != qp && o.svc == roce.ServiceRC && o.peer == qp.peer && !o.destroyed && !yield(o) {
				return
			}
		}
	}
}

// pathTo returns the loss state of the path to peer, made at the first QP
// connected to it, or nil for no address (a UD QP). The table holds one small
// entry per peer address the device has connected a QP to.
func (d *Device) pathTo(peer netip.Addr) *peerPath {
	if !peer.IsValid() {
		return nil
	}
	p := d.paths[peer]
	if p == nil {
		p = &peerPath{}
		d.paths[peer] = p
	}
	return p
}

// sharedStart sets the window of a QP's first flight. When the device's other RC
// QPs to the same peer already have a full window (MaxUnackedPSN PSNs) in flight,
// the QP starts at the restart window (RFC 3390's initial window) in slow start
// towards the full window, doubling each round trip while the window limits it
// (window.ack), instead of adding 128 packets at once: 32 QPs started together
// sent 16 MiB at once into veth's 256-entry ring, and a QP whose whole first
// flight was lost had no RTT sample, so its only timer was the local ACK timeout.
// The first QP to a peer, and a QP alone on its path, start with the full window
// as before (and as rdma_rxe, whose requester sends up to RXE_MAX_UNACKED_PSNS).
func (r *requester) sharedStart(qp *QueuePair) {
	if sum, _ := qp.dev.pathLoad(qp); sum >= MaxUnackedPSN {
		r.win.cwnd = restartWindow(qp.pmtu)
	}
}
