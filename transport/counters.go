package transport

import (
	"strconv"
	"strings"
	"sync/atomic"
)

// Counter indexes. The names are rdma_rxe's hw_counters (rxe_hw_counters.c) where
// rxe has one, and say what they count otherwise.
const (
	CntSentPkts               = iota // sent_pkts: frames handed to the link
	CntRcvdPkts                      // rcvd_pkts: frames accepted for a QP
	CntDuplicateRequest              // duplicate_request: responder saw a PSN it already executed
	CntOutOfSeqRequest               // out_of_seq_request: responder saw a PSN ahead of the expected one
	CntRcvdRNRErr                    // rcvd_rnr_err: requester received an RNR NAK
	CntSendRNRErr                    // send_rnr_err: responder sent an RNR NAK
	CntRcvdSeqErr                    // rcvd_seq_err: requester received a NAK PSN sequence error
	CntAckDeferred                   // ack_deferred: ACKs coalesced into a later one
	CntRetryExceededErr              // retry_exceeded_err: retry_cnt ran out
	CntRetryRNRExceededErr           // retry_rnr_exceeded_err: rnr_retry ran out
	CntCompleterRetryErr             // completer_retry_err: requester went back to retransmit
	CntSendErr                       // send_err: the link failed a send
	CntLinkDowned                    // link_downed
	CntRdmaSends                     // rdma_sends: SEND WRs the requester completed, whatever their status (rxe_comp.c do_complete)
	CntRdmaRecvs                     // rdma_recvs: receive WRs completed successfully, by a SEND or an RDMA WRITE with immediate (rxe_resp.c do_complete)
	CntLocalAckTimeoutErr            // local_ack_timeout_err: retransmit timer expiries (mlx5's name)
	CntRoceAdpRetrans                // roce_adp_retrans: retransmissions on the adaptive RTO, before the local ACK timeout (mlx5's name)
	CntRoceSlowRestart               // roce_slow_restart: windows restarted small after idle (mlx5's name)
	CntLinkBusy                      // link_busy: the link refused frames (TX ring full, EAGAIN)
	CntLinkBusyResent                // link_busy_resent: refused frames sent after the adaptive delay
	CntRcvdICRCErr                   // rcvd_icrc_err: frames dropped for a bad ICRC
	CntRcvdMalformed                 // rcvd_malformed: frames dropped as not decodable
	CntRcvdUnknownQP                 // rcvd_unknown_qp: frames for no QP, a QP not ready, or from the wrong peer
	CntRcvdBadDGID                   // rcvd_bad_dgid: frames to an address not in the GID table, dropped as rxe_chk_dgid drops them (rxe counts none)
	CntGhostAck                      // ghost_ack: responses for PSNs never sent, ignored
	CntStaleAck                      // stale_ack: ACKs and responses for PSNs already completed, ignored
	CntImpliedNak                    // implied_nak: READ/atomic response gaps that made the requester retry
	CntQKeyViolation                 // qkey_viol_cntr: UD packets dropped for a Q_Key not the QP's (ibv_port_attr's name)
	CntRcvdOversize                  // rcvd_oversize: packets with a payload longer than the path MTU: UD and UC ones dropped, RC ones answered with NAK Invalid Request
	CntRcvdUndersize                 // rcvd_undersize: FIRST and MIDDLE packets with a payload shorter than the path MTU (IBTA §9.7.5.1.4; a peer with a smaller path MTU): RC ones answered with NAK Invalid Request, UC messages dropped
	CntOutOfBuffer                   // out_of_buffer: UD and UC messages dropped for want of a receive WR (mlx5's name)
	CntRespLocalLenErr               // resp_local_length_error: UD and UC receive WRs too small, completed IBV_WC_LOC_LEN_ERR (mlx5's name)
	CntRcvdMsgDropped                // rcvd_msg_dropped: UC packets dropped with the rest of their message (after a gap, an opcode out of sequence, a bad length, a refused WRITE)
	CntNpECNMarkedRoCEPackets        // np_ecn_marked_roce_packets: RC and UC packets received with ECN CE (mlx5's name)
	CntNpCNPSent                     // np_cnp_sent: CNPs sent in answer to them, with DCQCN (mlx5's name)
	CntRpCNPHandled                  // rp_cnp_handled: CNPs that cut a QP's rate, with DCQCN (mlx5's name)
	CntRpCNPIgnored                  // rp_cnp_ignored: CNPs dropped: no DCQCN, or no QP ready for them (mlx5's name)
	CntRoceTailProbe                 // roce_tail_probe: tail-loss probes, the oldest unacknowledged and the last packet sent again with AckReq after two round trips of silence (probe.go; neither rxe nor mlx5 has one)
	CntRxWriteRequests               // rx_write_requests: RDMA WRITE messages the responder executed (mlx5's name)
	CntRxReadRequests                // rx_read_requests: RDMA READ requests the responder accepted (mlx5's name)
	CntRxAtomicRequests              // rx_atomic_requests: atomic requests the responder executed (mlx5's name)
	CntRoceAdpRetransSpurious        // roce_adp_retrans_spurious: adaptive retransmissions found spurious and undone: the first answer after one covered every PSN sent before it, and the originals had arrived (spurious.go; neither rxe nor mlx5 has one)
	numCounters
)

// CounterNames gives each counter's name, indexed by the Cnt constants.
var CounterNames = [numCounters]string{
	"sent_pkts", "rcvd_pkts", "duplicate_request", "out_of_seq_request", "rcvd_rnr_err", "send_rnr_err",
	"rcvd_seq_err", "ack_deferred", "retry_exceeded_err", "retry_rnr_exceeded_err", "completer_retry_err",
	"send_err", "link_downed", "rdma_sends", "rdma_recvs", "local_ack_timeout_err", "roce_adp_retrans",
	"roce_slow_restart", "link_busy",
	"link_busy_resent", "rcvd_icrc_err", "rcvd_malformed", "rcvd_unknown_qp", "rcvd_bad_dgid", "ghost_ack", "stale_ack",
	"implied_nak", "qkey_viol_cntr", "rcvd_oversize", "rcvd_undersize", "out_of_buffer", "resp_local_length_error", "rcvd_msg_dropped",
	"np_ecn_marked_roce_packets", "np_cnp_sent", "rp_cnp_handled", "rp_cnp_ignored", "roce_tail_probe",
	"rx_write_requests", "rx_read_requests", "rx_atomic_requests", "roce_adp_retrans_spurious",
}

// Counters is a set of event counters, read safely from any goroutine. A device's
// counters sum its QPs' protocol events and add link-level ones.
type Counters struct {
	v [numCounters]atomic.Uint64
}

func newCounters() *Counters { return &Counters{} }

func (c *Counters) inc(i int) { c.v[i].Add(1) }

func (c *Counters) add(i int, n uint64) { c.v[i].Add(n) }

// Get returns counter i (one of the Cnt constants).
func (c *Counters) Get(i int) uint64 { return c.v[i].Load() }

// Map returns every counter by name.
func (c *Counters) Map() map[string]uint64 {
	m := make(map[string]uint64, numCounters)
	for i := range c.v {
		m[CounterNames[i]] = c.v[i].Load()
	}
	return m
}

// String lists the counters that are not zero as name=value in the order of the Cnt
// constants, e.g. "sent_pkts=12 rcvd_pkts=9", or "none" when all are zero.
func (c *Counters) String() string {
	var b strings.Builder
	for i := range c.v {
		if v := c.v[i].Load(); v != 0 {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(CounterNames[i])
			b.WriteByte('=')
			b.WriteString(strconv.FormatUint(v, 10))
		}
	}
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}

// qpCounters are a QP's counters, indexed by the Cnt constants. Only the engine
// writes them, under the device lock, so they are plain integers: an atomic
// increment (a locked add, about 5.5 ns on the development VM) on every packet
// for each of the QP's and the device's counters was a tenth of an engine's time
// in BenchmarkWrite64Moderated.
type qpCounters [numCounters]uint64

// count increments counter i of the QP and of its device; under the device lock.
func (qp *QueuePair) count(i int) {
	qp.counters[i]++
	qp.dev.counters.inc(i)
}
