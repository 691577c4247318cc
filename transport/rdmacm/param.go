package rdmacm

import (
	"fmt"

	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/transport"
)

// Param is a connection's parameters, librdmacm's struct rdma_conn_param
// (<rdma/rdma_cma.h>): what rdma_connect puts in the REQ and rdma_accept in the REP.
// Seen from the peer (Request.Param, Conn.PeerParam) ResponderResources and
// InitiatorDepth are swapped, as rdma_cm reports them (Linux cm.c
// cm_format_req_event): the peer's initiator depth is how many READs it may send us.
type Param struct {
	// PrivateData is the consumer's private data: at most MaxREQPrivateData bytes
	// in a REQ (after the 36-byte IP CM header), MaxREPPrivateData in a REP.
	PrivateData []byte
	// ResponderResources is how many RDMA READ and atomic requests this side's QP
	// accepts outstanding (max_dest_rd_atomic), 0-transport.MaxQPRdAtom, or
	// MaxResources. The REQ and REP carry it as given (Linux cma_connect_ib,
	// cma_accept_ib).
	ResponderResources uint8
	// InitiatorDepth is how many this side's QP sends outstanding (max_rd_atomic),
	// 0-transport.MaxQPRdAtom, or MaxResources.
	InitiatorDepth uint8
	// FlowControl is the End-to-End Flow Control bit.
	FlowControl bool
	// RetryCount is the QPs' retry_cnt, cut to 7; only the REQ carries it.
	RetryCount uint8
	// RNRRetryCount (7 = infinite) is the peer's rnr_retry, cut to 7: the REQ's for
	// the passive side, the REP's for the active side.
	RNRRetryCount uint8
	// SRQ says the QP uses a shared receive queue.
	SRQ bool
}

// MaxResources as ResponderResources or InitiatorDepth asks for as many as the
// device allows, and in Accept no more than the peer offered (librdmacm's
// RDMA_MAX_RESP_RES and RDMA_MAX_INIT_DEPTH; rdma_accept with a NULL conn_param
// uses it for both).
const MaxResources = 0xFF

// Private data sizes rdma_cm allows on RDMA_PS_TCP (IBTA Table 106 and 110; Annex
// A11's header takes 36 bytes of the REQ's 92).
const (
	MaxREQPrivateData = cm.IPCMConsumerDataLen
	MaxREPPrivateData = cm.REPPrivateDataLen
	MaxREJPrivateData = cm.REJPrivateDataLen
)

// The kernel's rdma_cm and ib_cm constants for RoCE (Linux 6.1 cma.c, cm.c;
// rdma_rxe's rxe_param.h for the CA ACK delay).
const (
	// CMResponseTimeout is CMA_CM_RESPONSE_TIMEOUT: both CM Response Timeouts of a
	// REQ, 4.096 µs × 2^20 ≈ 4.3 s.
	CMResponseTimeout = 20
	// MaxCMRetries is CMA_MAX_CM_RETRIES: how often a REQ, REP or DREQ is sent again.
	MaxCMRetries = 15
	// CAACKDelay is rdma_rxe's local_ca_ack_delay (RXE_LOCAL_CA_ACK_DELAY), the REP's
	// Target ACK Delay.
	CAACKDelay = 15
	// HopLimit is the REQ's Primary Hop Limit for RoCEv2 (cma_resolve_iboe_route).
	HopLimit = 64
)

// LocalACKTimeout returns the Local ACK Timeout ib_cm puts in a REQ (cm.c
// cm_ack_timeout): the path's round trip, packet lifetime + 1, raised to the CA's
// ACK delay: 19 for rdma_cm's packet lifetime 18 and rdma_rxe's delay 15.
func LocalACKTimeout(caACKDelay, packetLifeTime uint8) uint8 {
	t := packetLifeTime + 1
	if t >= caACKDelay {
		if caACKDelay >= t-1 {
			t++
		}
	} else {
		t = caACKDelay
		if packetLifeTime+1 >= caACKDelay-1 {
			t++
		}
	}
	return min(t, 31)
}

// check refuses parameters a device cannot take, as librdmacm's ucma_valid_param
// does (EINVAL there); max is the private data this message allows.
func (p *Param) check(max int) error {
	switch {
	case len(p.PrivateData) > max:
		return fmt.Errorf("rdmacm: %d bytes of private data, at most %d: %w", len(p.PrivateData), max, ErrParam)
	case tooMany(p.ResponderResources) || tooMany(p.InitiatorDepth):
		return fmt.Errorf("rdmacm: responder_resources %d, initiator_depth %d: the device allows at most %d: %w",
			p.ResponderResources, p.InitiatorDepth, transport.MaxQPRdAtom, ErrParam)
	}
	return nil
}

func tooMany(n uint8) bool { return n > transport.MaxQPRdAtom && n != MaxResources }

// resources resolves MaxResources to the device's maximum, or to offer when it is
// smaller (librdmacm rdma_connect and rdma_accept).
func resources(n, offer uint8) uint8 {
	if n != MaxResources {
		return n
	}
	return min(offer, transport.MaxQPRdAtom)
}

// cut7 is the kernel's min(7, count) for retry counts (cma_connect_ib).
func cut7(n uint8) uint8 { return min(n, 7) }
