package transport

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/xroce/xroce/roce"
)

// QPState is a queue pair's state (enum ibv_qp_state; IBTA Vol 1 §10.3.1).
type QPState uint8

// QP states.
const (
	QPS_RESET QPState = iota
	QPS_INIT
	QPS_RTR
	QPS_RTS
	QPS_SQD
	QPS_SQE
	QPS_ERR
)

func (s QPState) String() string {
	return [...]string{"IBV_QPS_RESET", "IBV_QPS_INIT", "IBV_QPS_RTR", "IBV_QPS_RTS", "IBV_QPS_SQD", "IBV_QPS_SQE", "IBV_QPS_ERR"}[s%7]
}

// AddressHandle is the path to the peer (struct ibv_ah_attr with its GRH, RoCEv2).
type AddressHandle struct {
	DGID         roce.GID
	SGIDIndex    int
	TrafficClass uint8 // IPv4 TOS / IPv6 traffic class
	HopLimit     uint8 // IPv4 TTL / IPv6 hop limit; 0 means 64
	FlowLabel    uint32
}

// QPAttr holds the attributes Modify sets (struct ibv_qp_attr), with verbs' names.
type QPAttr struct {
	State           QPState
	PathMTU         roce.MTU
	DestQPN         uint32
	RQPSN           uint32 // the first PSN the responder expects
	SQPSN           uint32 // the first PSN the requester sends
	MaxRdAtomic     uint8  // outstanding RDMA READ/atomic requests this QP may issue
	MaxDestRdAtomic uint8  // outstanding RDMA READ/atomic requests this QP accepts
	MinRNRTimer     uint8  // RNR NAK timer code sent to the peer (roce.RNRTimerDelay)
	Timeout         uint8  // local ACK timeout: 4.096 µs × 2^Timeout; 0 = infinite
	RetryCnt        uint8  // retries after a timeout or NAK sequence error, 0-7
	RNRRetry        uint8  // retries after RNR NAK; 7 = infinite
	AH              AddressHandle
	AccessFlags     Access // remote operations the responder allows (qp_access_flags)
	// QKey is a UD QP's Q_Key (qkey): a UD packet is accepted only with this Q_Key in
	// its DETH, and a send work request whose RemoteQKey has the high bit set sends
	// it instead (IBTA Vol 1 §10.2.4.1 "controlled Q_Keys").
	QKey uint32
}

// QPAttrMask selects the attributes Modify changes (enum ibv_qp_attr_mask).
type QPAttrMask uint32

// Attribute mask bits, with verbs' values.
const (
	QP_STATE              QPAttrMask = 1 << 0
	QP_ACCESS_FLAGS       QPAttrMask = 1 << 3
	QP_PKEY_INDEX         QPAttrMask = 1 << 4
	QP_PORT               QPAttrMask = 1 << 5
	QP_QKEY               QPAttrMask = 1 << 6
	QP_AV                 QPAttrMask = 1 << 7
	QP_PATH_MTU           QPAttrMask = 1 << 8
	QP_TIMEOUT            QPAttrMask = 1 << 9
	QP_RETRY_CNT          QPAttrMask = 1 << 10
	QP_RNR_RETRY          QPAttrMask = 1 << 11
	QP_RQ_PSN             QPAttrMask = 1 << 12
	QP_MAX_QP_RD_ATOMIC   QPAttrMask = 1 << 13
	QP_MIN_RNR_TIMER      QPAttrMask = 1 << 15
	QP_SQ_PSN             QPAttrMask = 1 << 16
	QP_MAX_DEST_RD_ATOMIC QPAttrMask = 1 << 17
	QP_DEST_QPN           QPAttrMask = 1 << 20
)

var qpAttrMaskNames = [...]struct {
	m    QPAttrMask
	name string
}{
	{QP_STATE, "IBV_QP_STATE"}, {QP_ACCESS_FLAGS, "IBV_QP_ACCESS_FLAGS"}, {QP_PKEY_INDEX, "IBV_QP_PKEY_INDEX"},
	{QP_PORT, "IBV_QP_PORT"}, {QP_QKEY, "IBV_QP_QKEY"}, {QP_AV, "IBV_QP_AV"}, {QP_PATH_MTU, "IBV_QP_PATH_MTU"}, {QP_TIMEOUT, "IBV_QP_TIMEOUT"},
	{QP_RETRY_CNT, "IBV_QP_RETRY_CNT"}, {QP_RNR_RETRY, "IBV_QP_RNR_RETRY"}, {QP_RQ_PSN, "IBV_QP_RQ_PSN"},
	{QP_MAX_QP_RD_ATOMIC, "IBV_QP_MAX_QP_RD_ATOMIC"}, {QP_MIN_RNR_TIMER, "IBV_QP_MIN_RNR_TIMER"},
	{QP_SQ_PSN, "IBV_QP_SQ_PSN"}, {QP_MAX_DEST_RD_ATOMIC, "IBV_QP_MAX_DEST_RD_ATOMIC"}, {QP_DEST_QPN, "IBV_QP_DEST_QPN"},
	// verbs bits the engine does not take, named for the verbs daemon's messages
	{1 << 1, "IBV_QP_CUR_STATE"}, {1 << 2, "IBV_QP_EN_SQD_ASYNC_NOTIFY"}, {1 << 14, "IBV_QP_ALT_PATH"},
	{1 << 18, "IBV_QP_PATH_MIG_STATE"}, {1 << 19, "IBV_QP_CAP"}, {1 << 25, "IBV_QP_RATE_LIMIT"},
}

// String names the mask's bits as enum ibv_qp_attr_mask spells them, joined by '|',
// e.g. "IBV_QP_AV|IBV_QP_PATH_MTU"; bits without a name show as hex.
func (m QPAttrMask) String() string {
	var s string
	for _, e := range qpAttrMaskNames {
		if m&e.m != 0 {
			if s != "" {
				s += "|"
			}
			s += e.name
			m &^= e.m
		}
	}
	if m != 0 {
		if s != "" {
			s += "|"
		}
		s += fmt.Sprintf("0x%x", uint32(m))
	}
	if s == "" {
		return "0"
	}
	return s
}

// QPCap sizes a QP's queues (struct ibv_qp_cap).
type QPCap struct {
	MaxSendWR, MaxRecvWR   int
	MaxSendSGE, MaxRecvSGE int
	MaxInlineData          int
}

// QPInitAttr creates a QP (struct ibv_qp_init_attr).
type QPInitAttr struct {
	// Type is the transport service: QPT_RC (the default, also for 0), QPT_UC or
	// QPT_UD (unreliable.go).
	Type           QPType
	SendCQ, RecvCQ *CompletionQueue
	Cap            QPCap
	SigAll         bool // every send WR generates a completion
	// QPN, when non-zero, is the QP number to use instead of the next free one; for
	// replaying captured traffic. QPN 1 (the GSI QP) may be given to a UD QP.
	QPN uint32
	// SRQ, when set, is the shared receive queue the QP takes its receive WQEs
	// from (srq.go); Cap's receive sizes are then unused, and PostRecv refuses.
	SRQ *SharedReceiveQueue
}

// Device limits, as rdma_rxe reports them (rxe_param.h).
const (
	MaxQPRdAtom   = 128     // max_qp_rd_atom and max_qp_init_rd_atom
	MaxUnackedPSN = 128     // RXE_MAX_UNACKED_PSNS: the requester's PSN window
	MaxMsgSize    = 1 << 31 // max_msg_sz
	MaxInline     = 512     // RXE_MAX_INLINE_DATA: max_inline_data's limit (32 SGEs' worth)
	MaxQPWR       = 1 << 20 // max_qp_wr: a QP's send and receive queue depths (CreateQP)
	MaxSGE        = 32      // max_sge: SGEs per send or receive WR (CreateQP)
	MaxCQE        = 32767   // max_cqe: a CQ's depth (ibv_devinfo -v on rxe0, docs/verbs-library.md)
	maxPktsPerAck = 64      // RXE_MAX_PKT_PER_ACK: AckReq at least this often
)

// Errors of QP operations.
var (
	ErrQPState    = errors.New("transport: operation not allowed in the QP's state")
	ErrQueueFull  = errors.New("transport: work queue full")
	ErrTooManySGE = errors.New("transport: too many scatter/gather entries")
	ErrInline     = errors.New("transport: inline data larger than max_inline_data")
	ErrMsgSize    = errors.New("transport: message larger than max_msg_sz")
	ErrBadWR      = errors.New("transport: malformed work request")
	ErrQPCap      = errors.New("transport: QP capabilities above the device's max_qp_wr or max_sge")
)

// CreateQP creates a queue pair of attr.Type (RC by default) in RESET. QPNs start at
// 17 as rdma_rxe's do. Queue depths above MaxQPWR or SGE counts above MaxSGE fail
// with ErrQPCap, as rdma_rxe refuses them (EINVAL).
func (pd *ProtectionDomain) CreateQP(attr QPInitAttr) (*QueuePair, error) {
	if attr.SendCQ == nil || attr.RecvCQ == nil {
		return nil, fmt.Errorf("transport: CreateQP needs a send and a receive CQ")
	}
	svc, err := attr.Type.normalize()
	if err != nil {
		return nil, err
	}
	attr.Type = svc
	c := &attr.Cap
	if c.MaxSendWR <= 0 {
		c.MaxSendWR = 256
	}
	if c.MaxRecvWR <= 0 {
		c.MaxRecvWR = 256
	}
	if c.MaxSendSGE <= 0 {
		c.MaxSendSGE = 4
	}
	if c.MaxRecvSGE <= 0 {
		c.MaxRecvSGE = 4
	}
	if c.MaxInlineData < 0 || c.MaxInlineData > MaxInline {
		return nil, fmt.Errorf("transport: max_inline_data %d out of range 0..%d", c.MaxInlineData, MaxInline)
	}
	if c.MaxSendWR > MaxQPWR || c.MaxRecvWR > MaxQPWR || c.MaxSendSGE > MaxSGE || c.MaxRecvSGE > MaxSGE {
		return nil, fmt.Errorf("%w: max_send_wr %d, max_recv_wr %d (at most %d each), max_send_sge %d, max_recv_sge %d (at most %d each)",
			ErrQPCap, c.MaxSendWR, c.MaxRecvWR, MaxQPWR, c.MaxSendSGE, c.MaxRecvSGE, MaxSGE)
	}
	d := pd.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := attr.SRQ; s != nil && (s.gone || s.dev != d) {
		return nil, fmt.Errorf("transport: CreateQP: the SRQ is destroyed, or another device's")
	}
	qpn := attr.QPN & 0xFFFFFF
	if qpn == 0 {
		for d.qps[d.nextQPN] != nil || d.nextQPN < 2 {
			d.nextQPN = (d.nextQPN + 1) & 0xFFFFFF
		}
		qpn = d.nextQPN
		d.nextQPN++
	} else if d.qps[qpn] != nil || qpn == 0 || (qpn == 1 && attr.Type != QPT_UD) {
		return nil, fmt.Errorf("transport: QPN 0x%x is in use or reserved", qpn)
	}
	qp := &QueuePair{dev: d, pd: pd, init: attr, qpn: qpn}
	qp.initService()
	d.qps[qp.qpn] = qp
	if attr.SRQ != nil {
		attr.SRQ.qps++
	}
	if r, ok := d.link.(RxReserver); ok {
		r.ReserveRx(len(d.qps) * MaxUnackedPSN)
	}
	return qp, nil
}

// Destroy removes the QP (ibv_destroy_qp): frames for its QPN are dropped from now on
// and outstanding work requests are discarded without completions, as verbs does. A
// destroyed QP rejects posts with ErrQPState.
func (qp *QueuePair) Destroy() error {
	d := qp.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if qp.destroyed {
		return ErrQPState
	}
	qp.reset()
	qp.destroyed = true
	delete(d.qps, qp.qpn)
	if s := qp.init.SRQ; s != nil {
		s.qps--
	}
	return nil
}

// QPN returns the queue pair number.
func (qp *QueuePair) QPN() uint32 { return qp.qpn }

// State returns the current state. It does not wait for the engine.
func (qp *QueuePair) State() QPState { return QPState(qp.pubState.Load()) }

// transitions lists, for each allowed state change, the attributes it requires and
// those it may set (IBTA Vol 1 §11.2.4.2 Table 93; ibv_modify_qp(3)).
var transitions = map[[2]QPState][2]QPAttrMask{
	{QPS_RESET, QPS_INIT}: {QP_ACCESS_FLAGS, QP_PKEY_INDEX | QP_PORT},
	{QPS_INIT, QPS_INIT}:  {0, QP_ACCESS_FLAGS | QP_PKEY_INDEX | QP_PORT},
	{QPS_INIT, QPS_RTR}: {QP_AV | QP_PATH_MTU | QP_DEST_QPN | QP_RQ_PSN | QP_MAX_DEST_RD_ATOMIC | QP_MIN_RNR_TIMER,
		QP_ACCESS_FLAGS | QP_PKEY_INDEX},
	{QPS_RTR, QPS_RTS}: {QP_SQ_PSN | QP_TIMEOUT | QP_RETRY_CNT | QP_RNR_RETRY | QP_MAX_QP_RD_ATOMIC,
		QP_ACCESS_FLAGS | QP_MIN_RNR_TIMER},
	{QPS_RTS, QPS_RTS}: {0, QP_ACCESS_FLAGS | QP_MIN_RNR_TIMER | QP_TIMEOUT | QP_RETRY_CNT | QP_RNR_RETRY},
	{QPS_RTS, QPS_SQD}: {0, 0},
	{QPS_SQD, QPS_RTS}: {0, QP_ACCESS_FLAGS | QP_MIN_RNR_TIMER | QP_TIMEOUT | QP_RETRY_CNT | QP_RNR_RETRY},
	{QPS_SQD, QPS_SQD}: {0, QP_ACCESS_FLAGS | QP_MIN_RNR_TIMER | QP_TIMEOUT | QP_RETRY_CNT | QP_RNR_RETRY | QP_MAX_QP_RD_ATOMIC | QP_MAX_DEST_RD_ATOMIC |
		QP_AV | QP_PORT | QP_PKEY_INDEX}, // a new path while drained
	{QPS_SQE, QPS_RTS}: {0, QP_ACCESS_FLAGS | QP_MIN_RNR_TIMER},
}

// Modify changes the QP's attributes selected by mask, and its state when mask has
// QP_STATE. Any state may go to RESET or ERR. Errors name the missing or invalid
// attribute; the QP is unchanged on error.
func (qp *QueuePair) Modify(attr QPAttr, mask QPAttrMask) error {
	d := qp.dev
	// The path (GID entry, neighbour) is resolved before the engine lock is taken:
	// resolving may wait for ARP or neighbour discovery.
	var path qpPath
	var pathErr error
	if mask&QP_STATE != 0 && (attr.State == QPS_RTR || attr.State == QPS_SQD) && mask&QP_AV != 0 {
		path, pathErr = qp.resolvePath(&attr)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if qp.destroyed {
		return fmt.Errorf("transport: QP 0x%x is destroyed: %w", qp.qpn, ErrQPState)
	}
	from, to := qp.state, qp.state
	if mask&QP_STATE != 0 {
		to = attr.State
	}
	switch to {
	case QPS_RESET:
		qp.reset()
		return nil
	case QPS_ERR:
		qp.toError()
		return nil
	}
	tr, ok := qp.transitions()[[2]QPState{from, to}]
	if !ok {
		return fmt.Errorf("transport: QP 0x%x: cannot move from %v to %v: %w", qp.qpn, from, to, ErrQPState)
	}
	if miss := tr[0] &^ mask; miss != 0 {
		return fmt.Errorf("transport: QP 0x%x: %v → %v needs attributes %v", qp.qpn, from, to, miss)
	}
	if extra := mask &^ (tr[0] | tr[1] | QP_STATE); extra != 0 {
		return fmt.Errorf("transport: QP 0x%x: %v → %v does not take attributes %v", qp.qpn, from, to, extra)
	}
	a := qp.attr
	if mask&QP_ACCESS_FLAGS != 0 {
		a.AccessFlags = attr.AccessFlags
	}
	if mask&QP_AV != 0 {
		a.AH = attr.AH
	}
	if mask&QP_PATH_MTU != 0 {
		if !attr.PathMTU.Valid() {
			return fmt.Errorf("transport: QP 0x%x: path MTU %v is not an IB MTU", qp.qpn, attr.PathMTU)
		}
		if c := d.link.Caps(); c.MaxPathMTU != 0 && attr.PathMTU > c.MaxPathMTU {
			return fmt.Errorf("transport: QP 0x%x: path MTU %d is not supported on this link (at most %d): %s",
				qp.qpn, attr.PathMTU.Bytes(), c.MaxPathMTU.Bytes(), c.MaxPathMTUReason)
		}
		if err := fitsLink(attr.PathMTU, a.AH.DGID, d.link.MTU()); err != nil {
			return fmt.Errorf("transport: QP 0x%x: %w", qp.qpn, err)
		}
		a.PathMTU = attr.PathMTU
	}
	if mask&QP_DEST_QPN != 0 {
		a.DestQPN = attr.DestQPN & 0xFFFFFF
	}
	if mask&QP_RQ_PSN != 0 {
		a.RQPSN = attr.RQPSN & roce.PSNMask
	}
	if mask&QP_SQ_PSN != 0 {
		a.SQPSN = attr.SQPSN & roce.PSNMask
	}
	if mask&QP_MAX_QP_RD_ATOMIC != 0 {
		if attr.MaxRdAtomic > MaxQPRdAtom {
			return fmt.Errorf("transport: QP 0x%x: max_rd_atomic %d exceeds %d", qp.qpn, attr.MaxRdAtomic, MaxQPRdAtom)
		}
		a.MaxRdAtomic = attr.MaxRdAtomic
	}
	if mask&QP_MAX_DEST_RD_ATOMIC != 0 {
		if attr.MaxDestRdAtomic > MaxQPRdAtom {
			return fmt.Errorf("transport: QP 0x%x: max_dest_rd_atomic %d exceeds %d", qp.qpn, attr.MaxDestRdAtomic, MaxQPRdAtom)
		}
		a.MaxDestRdAtomic = attr.MaxDestRdAtomic
	}
	if mask&QP_MIN_RNR_TIMER != 0 {
		a.MinRNRTimer = attr.MinRNRTimer & 0x1F
	}
	if mask&QP_TIMEOUT != 0 {
		if attr.Timeout > 31 {
			return fmt.Errorf("transport: QP 0x%x: timeout %d out of range 0..31", qp.qpn, attr.Timeout)
		}
		a.Timeout = attr.Timeout
	}
	if mask&QP_RETRY_CNT != 0 {
		if attr.RetryCnt > 7 {
			return fmt.Errorf("transport: QP 0x%x: retry_cnt %d out of range 0..7", qp.qpn, attr.RetryCnt)
		}
		a.RetryCnt = attr.RetryCnt
	}
	if mask&QP_RNR_RETRY != 0 {
		if attr.RNRRetry > 7 {
			return fmt.Errorf("transport: QP 0x%x: rnr_retry %d out of range 0..7", qp.qpn, attr.RNRRetry)
		}
		a.RNRRetry = attr.RNRRetry
	}
	if mask&QP_QKEY != 0 {
		a.QKey = attr.QKey
	}
	if to == QPS_RTR && from == QPS_INIT && qp.init.Type == QPT_UD {
		qp.pmtu = qp.udMTU // no path: every UD message is one packet of at most the port's MTU
		qp.resp.init(a.RQPSN)
	} else if to == QPS_RTR && from == QPS_INIT {
		if pathErr != nil {
			return pathErr
		}
		qp.setPath(&path, &a)
		qp.resp.init(a.RQPSN)
	}
	if to == QPS_SQD && from == QPS_SQD && mask&QP_AV != 0 { // a new path, as IBTA Vol 1 §10.3.1 allows in SQD
		if pathErr != nil {
			return pathErr
		}
		qp.setPath(&path, &a)
	}
	if to == QPS_RTS && from == QPS_RTR {
		qp.req.init(a.SQPSN, qp.dev.pathTo(qp.peer))
	}
	qp.attr = a
	qp.retryLeft, qp.rnrRetryLeft = a.RetryCnt, a.RNRRetry
	qp.setState(to)
	qp.draining = to == QPS_SQD && (from == QPS_RTS || qp.draining)
	qp.drained()
	d.schedule(qp)
	d.wakeLoop()
	return nil
}

// qpPath is an address handle resolved to addresses: the source and destination IP
// addresses and the next hop's Ethernet address.
type qpPath struct {
	src, dst netip.Addr
	mac      [6]byte
}

// resolvePath resolves a's address handle: the SGID entry and the neighbour of the
// DGID. It takes no engine lock; the neighbour lookup may wait.
func (qp *QueuePair) resolvePath(a *QPAttr) (qpPath, error) {
	return qp.dev.resolveAH(&a.AH, fmt.Sprintf("QP 0x%x", qp.qpn))
}

// resolveAH resolves an address handle: its SGID entry and the neighbour of its DGID.
// who names the object in errors. It takes no engine lock; the neighbour lookup may
// wait.
func (d *Device) resolveAH(ah *AddressHandle, who string) (qpPath, error) {
	gids := d.GIDTable()
	sgid, err := gids.Entry(ah.SGIDIndex)
	if err != nil {
		return qpPath{}, fmt.Errorf("transport: %s: %w", who, err)
	}
	src, dst := sgid.GID.Addr(), ah.DGID.Addr()
	if src.Is4() != dst.Is4() {
		return qpPath{}, fmt.Errorf("transport: %s: SGID index %d is %s but the DGID %s is %s; pick a GID index of the same kind as the peer's (IPv4-mapped for an IPv4 peer)",
			who, ah.SGIDIndex, gidKind(src), ah.DGID, gidKind(dst))
	}
	if _, own := gids.Find(ah.DGID); own && d.mac != [6]byte{} {
		// The device itself: its frames loop back inside the engine (loopback.go).
		return qpPath{src: src, dst: dst, mac: d.mac}, nil
	}
	mac, err := d.link.Resolve(dst)
	if err != nil {
		return qpPath{}, fmt.Errorf("transport: %s: %w", who, err)
	}
	return qpPath{src: src, dst: dst, mac: mac}, nil
}

// setPath builds the QP's frame header template from its resolved path and a.
func (qp *QueuePair) setPath(path *qpPath, a *QPAttr) {
	t := &qp.tmpl
	qp.dev.headerTemplate(t, path, &a.AH)
	dst := path.dst
	t.UDP = roce.UDP{SrcPort: roce.UDPSourcePort(a.AH.FlowLabel, qp.qpn, a.DestQPN), DstPort: roce.UDPPort}
	t.BTH = roce.BTH{PKey: 0xFFFF, DestQP: a.DestQPN}
	qp.peer = dst
	qp.req.path = qp.dev.pathTo(dst) // in SQD a new path; at RTR set again by req.init at RTS
	qp.local = path.src
	qp.pmtu = a.PathMTU.Bytes()
}

// headerTemplate sets t to the Ethernet and IP headers of packets along path with
// the GRH fields of ah; the rest of t is zero.
func (d *Device) headerTemplate(t *roce.Packet, path *qpPath, ah *AddressHandle) {
	src, dst, mac := path.src, path.dst, path.mac
	hop := ah.HopLimit
	if hop == 0 {
		hop = 64
	}
	*t = roce.Packet{}
	t.Eth.Src = d.link.HardwareAddr()
	t.Eth.Dst = mac
	t.IsIPv6 = !src.Is4()
	tc := ah.TrafficClass
	if d.cc == CCDCQCN && roce.ECN(tc&3) == roce.NotECT {
		tc |= uint8(roce.ECT0) // DCQCN's packets are ECN-capable; a traffic class with ECN bits keeps them
	}
	if t.IsIPv6 {
		t.IPv6 = roce.IPv6{TrafficClass: tc, FlowLabel: ah.FlowLabel & 0xFFFFF, HopLimit: hop,
			Src: src.As16(), Dst: dst.As16()}
	} else {
		t.IPv4 = roce.IPv4{TOS: tc, FlagsFrag: 0x4000, TTL: hop, Src: src.As4(), Dst: dst.As4()}
	}
}

func gidKind(a netip.Addr) string {
	if a.Is4() {
		return "IPv4-mapped"
	}
	return "IPv6"
}

// timeoutDuration returns the local ACK timeout, 4.096 µs × 2^Timeout (IBTA Vol 1
// §11.2.4.2 "Local Ack Timeout"); 0 means no timeout.
func timeoutDuration(code uint8) time.Duration {
	if code == 0 {
		return 0
	}
	return time.Duration(4096<<code) * time.Nanosecond
}
