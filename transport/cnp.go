package transport

import (
	"time"

	"github.com/xroce/xroce/roce"
)

// The notification point and the CNP's way in (docs/congestion.md, "DCQCN").
//
// A RoCEv2 packet for an RC or UC QP whose IP header says CE (a switch found its
// queue long) is counted (np_ecn_marked_roce_packets, mlx5's name). With DCQCN the
// device answers it with a CNP to the sender's QP (IBTA Vol 1 Annex A17.9.2-3): BTH
// opcode 0x81, P_Key 0xFFFF, BECN set, DestQP the QP's destination QPN, PSN 0, 16
// reserved zero bytes and the ICRC, in a frame addressed as the QP's own packets
// (UDP source port included), with DSCP CNPDSCP and ECN ECT(1) as a ConnectX CNP
// (the byte vector in cnp_test.go), at most one per QP every CNPInterval
// (min_time_between_cnps); counted as np_cnp_sent. rdma_rxe sends no CNPs (the
// kernel's rxe has no ECN handling); a device without DCQCN neither.
//
// A received CNP goes to the QP its DestQP names. With DCQCN, a connected QP in RTS
// or SQD whose peer sent it cuts its rate (dcqcn.go), counted as rp_cnp_handled;
// any other CNP — no such QP, a QP not ready or of another peer, or a device
// without DCQCN — is dropped and counted as rp_cnp_ignored (mlx5's counters).

// cnpTOS is the ECN field of the CNPs the device sends: ECT(1), as in a ConnectX CNP.
const cnpECN = roce.ECT1

// congested notes a CE-marked packet for qp and answers it with a CNP if DCQCN is on
// and the QP's last CNP is at least CNPInterval old.
func (d *Device) congested(qp *QueuePair) {
	qp.count(CntNpECNMarkedRoCEPackets)
	if d.cc != CCDCQCN || qp.svc == roce.ServiceUD {
		return
	}
	if !qp.lastCNP.IsZero() && d.now.Sub(qp.lastCNP) < d.dcqcn.CNPInterval {
		return
	}
	qp.lastCNP = d.now
	d.sendCNP(qp)
}

// sendCNP queues a CNP to qp's peer QP.
func (d *Device) sendCNP(qp *QueuePair) {
	p := d.start(qp, roce.CNP, 0)
	p.BTH.BECN = true
	tos := d.dcqcn.CNPDSCP<<2 | uint8(cnpECN)
	if p.IsIPv6 {
		p.IPv6.TrafficClass = tos
	} else {
		p.IPv4.TOS = tos
	}
	d.emit(qp)
	qp.count(CntNpCNPSent)
}

// cnpReceived hands a CNP to the QP it names, or counts it ignored.
func (d *Device) cnpReceived(p *roce.Packet) {
	qp := d.qps[p.BTH.DestQP]
	if d.cc != CCDCQCN || qp == nil || qp.svc == roce.ServiceUD || (qp.state != QPS_RTS && qp.state != QPS_SQD) ||
		qp.fatal || p.SrcAddr() != qp.peer {
		d.counters.inc(CntRpCNPIgnored)
		if qp != nil {
			qp.counters[CntRpCNPIgnored]++
		}
		return
	}
	qp.count(CntRpCNPHandled)
	qp.rp.cnp(&d.dcqcn, d.now)
	d.armDCQCN(qp)
}

// armDCQCN puts qp's reaction point deadline in the timer heap.
func (d *Device) armDCQCN(qp *QueuePair) {
	d.armed(qp, qp.rp.deadline(&d.dcqcn))
}

// paced reports whether qp's next packet may leave now; if not, the QP's timer is set
// for when it may.
func (qp *QueuePair) paced() bool {
	r := &qp.rp
	if !r.active || r.pace.ready(qp.dev.now) {
		return true
	}
	qp.dev.armed(qp, r.pace.wakeAt)
	return false
}

// charge counts a data packet of n bytes qp sent: the pacer's bucket and the byte
// counter.
func (qp *QueuePair) charge(n int) {
	d := qp.dev
	if !qp.rp.active {
		return
	}
	qp.rp.sent(&d.dcqcn, d.now, n)
	d.armDCQCN(qp)
}

// ccTimers runs qp's reaction point timers due at now.
func (qp *QueuePair) ccTimers(now time.Time) {
	if qp.rp.active {
		qp.rp.timers(&qp.dev.dcqcn, now)
		if !qp.rp.pace.wakeAt.IsZero() && !now.Before(qp.rp.pace.wakeAt) {
			qp.rp.pace.wakeAt = time.Time{}
		}
	}
}
