package transport

import (
	"fmt"

	"github.com/xroce/xroce/roce"
)

// Unreliable Connected and Unreliable Datagram queue pairs (IBTA Vol 1 §9.7.7, §9.8,
// §10.2; rdma_rxe rxe_req.c, rxe_resp.c and rxe_recv.c for the verbs-visible facts).
// Neither service acknowledges or retransmits: a send completes once its last packet
// is built into a frame (the data has left the application's buffer; the link takes
// the frame at the end of the same pass), and the responder drops what it cannot
// accept, counted, without ever moving the QP to an error state because of what a
// peer sent (CVE-2024-40992 was rdma_rxe doing so for a UD packet larger than its
// receive buffer).

// QPType is a queue pair's transport service (enum ibv_qp_type, with its values).
type QPType uint8

// Queue pair types. The zero value of QPInitAttr.Type means QPT_RC.
const (
	QPT_RC QPType = 2
	QPT_UC QPType = 3
	QPT_UD QPType = 4
)

func (t QPType) String() string {
	switch t {
	case QPT_RC:
		return "IBV_QPT_RC"
	case QPT_UC:
		return "IBV_QPT_UC"
	case QPT_UD:
		return "IBV_QPT_UD"
	}
	return fmt.Sprintf("IBV_QPT(%d)", uint8(t))
}

// normalize returns t with 0 read as QPT_RC, or an error for a type the engine does
// not implement.
func (t QPType) normalize() (QPType, error) {
	switch t {
	case 0:
		return QPT_RC, nil
	case QPT_RC, QPT_UC, QPT_UD:
		return t, nil
	}
	return 0, fmt.Errorf("transport: QP type %v is not supported (RC, UC and UD are)", t)
}

// WCFlags is a work completion's flags (enum ibv_wc_flags, with its values).
type WCFlags uint8

// Work completion flags.
const (
	WC_GRH      WCFlags = 1 << 0 // IBV_WC_GRH
	WC_WITH_IMM WCFlags = 1 << 1 // IBV_WC_WITH_IMM
)

// Flags returns wc's wc_flags: WC_GRH when GRH is set, WC_WITH_IMM when HasImm is.
func (wc WorkCompletion) Flags() WCFlags {
	var f WCFlags
	if wc.GRH {
		f |= WC_GRH
	}
	if wc.HasImm {
		f |= WC_WITH_IMM
	}
	return f
}

// GRHLen is the size of the GRH area at the start of every UD receive buffer: the
// 40-byte IBA Global Route Header, which on RoCEv2 holds the IPv6 header, or for IPv4
// 20 zero bytes and then the IPv4 header (union rdma_network_hdr in
// include/rdma/ib_verbs.h; rdma_rxe rxe_resp.c execute).
const GRHLen = 40

// initService sets the service fields of a new QP from its type.
func (qp *QueuePair) initService() {
	switch qp.init.Type {
	case QPT_UC:
		qp.svc = roce.ServiceUC
	case QPT_UD:
		qp.svc = roce.ServiceUD
		qp.udMTU = qp.dev.MaxPathMTU().Bytes()
		qp.udSport = roce.UDSourcePort(qp.qpn)
	default:
		qp.svc = roce.ServiceRC
	}
}

// Type returns the QP's transport service.
func (qp *QueuePair) Type() QPType { return qp.init.Type }

// transitions returns the state changes of the QP's type with the attributes each
// requires and those it may set (IBTA Vol 1 §11.2.4.2 Table 93; ibv_modify_qp(3)).
func (qp *QueuePair) transitions() map[[2]QPState][2]QPAttrMask {
	switch qp.init.Type {
	case QPT_UC:
		return ucTransitions
	case QPT_UD:
		return udTransitions
	}
	return transitions
}

// UC has the path attributes of RC but nothing about acknowledgements, retries or
// READ/atomic resources.
var ucTransitions = map[[2]QPState][2]QPAttrMask{
	{QPS_RESET, QPS_INIT}: {QP_ACCESS_FLAGS, QP_PKEY_INDEX | QP_PORT},
	{QPS_INIT, QPS_INIT}:  {0, QP_ACCESS_FLAGS | QP_PKEY_INDEX | QP_PORT},
	{QPS_INIT, QPS_RTR}:   {QP_AV | QP_PATH_MTU | QP_DEST_QPN | QP_RQ_PSN, QP_ACCESS_FLAGS | QP_PKEY_INDEX},
	{QPS_RTR, QPS_RTS}:    {QP_SQ_PSN, QP_ACCESS_FLAGS},
	{QPS_RTS, QPS_RTS}:    {0, QP_ACCESS_FLAGS},
	{QPS_RTS, QPS_SQD}:    {0, 0},
	{QPS_SQD, QPS_RTS}:    {0, QP_ACCESS_FLAGS},
	{QPS_SQD, QPS_SQD}:    {0, QP_ACCESS_FLAGS | QP_AV | QP_PKEY_INDEX},
	{QPS_SQE, QPS_RTS}:    {0, QP_ACCESS_FLAGS},
}

// UD has no path (each send names its address handle) and a Q_Key.
var udTransitions = map[[2]QPState][2]QPAttrMask{
	{QPS_RESET, QPS_INIT}: {QP_QKEY, QP_PKEY_INDEX | QP_PORT},
	{QPS_INIT, QPS_INIT}:  {0, QP_QKEY | QP_PKEY_INDEX | QP_PORT},
	{QPS_INIT, QPS_RTR}:   {0, QP_QKEY | QP_PKEY_INDEX},
	{QPS_RTR, QPS_RTS}:    {QP_SQ_PSN, QP_QKEY},
	{QPS_RTS, QPS_RTS}:    {0, QP_QKEY},
	{QPS_RTS, QPS_SQD}:    {0, 0},
	{QPS_SQD, QPS_RTS}:    {0, QP_QKEY},
	{QPS_SQD, QPS_SQD}:    {0, QP_QKEY | QP_PKEY_INDEX},
	{QPS_SQE, QPS_RTS}:    {0, QP_QKEY},
}

// AH is an address handle (struct ibv_ah): the path of UD sends to one destination,
// resolved once when it is created, as ibv_create_ah does.
type AH struct {
	pd   *ProtectionDomain
	attr AddressHandle
	tmpl roce.Packet // Ethernet and IP headers
}

// CreateAH resolves attr (its SGID entry and the next hop of its DGID, which may wait
// for ARP or neighbour discovery) into an address handle for UD sends of QPs in pd.
func (pd *ProtectionDomain) CreateAH(attr AddressHandle) (*AH, error) {
	path, err := pd.dev.resolveAH(&attr, "address handle")
	if err != nil {
		return nil, err
	}
	ah := &AH{pd: pd, attr: attr}
	pd.dev.headerTemplate(&ah.tmpl, &path, &attr)
	return ah, nil
}

// Attr returns the attributes the address handle was created with.
func (ah *AH) Attr() AddressHandle { return ah.attr }

// checkUnreliable checks a send WR against what the QP's service carries (IBTA Vol 1
// Table 38): UC has no RDMA READ or atomics; UD has SEND and SEND with immediate only,
// one packet each, to an address handle of the QP's PD. qp.postMu is held.
func (qp *QueuePair) checkUnreliable(wr *SendWR, total uint64) error {
	if _, ok := roce.NextOpcode(qp.svc, wr.Opcode.operation(), 0, 1); !ok {
		return fmt.Errorf("transport: QP 0x%x: %v is not available on a %v QP: %w", qp.qpn, wr.Opcode, qp.init.Type, ErrBadWR)
	}
	if qp.svc != roce.ServiceUD {
		return nil
	}
	if wr.AH == nil || wr.AH.pd != qp.pd {
		return fmt.Errorf("transport: QP 0x%x: a UD send needs an address handle of the QP's protection domain: %w", qp.qpn, ErrBadWR)
	}
	return nil // a message longer than the MTU is accepted: oversizeUD
}

// oversizeUD completes a UD message longer than the port's MTU without sending
// anything, successfully: "the CI shall not emit any packets for this message ...
// shall not generate an error" (IBTA Vol 1 C10-93.1.1), as rdma_rxe's requester
// fakes a successful UD send, its PSN used (rxe_req.c).
func (r *requester) oversizeUD(qp *QueuePair, w *sendWQE) bool {
	if qp.svc != roce.ServiceUD || w.length <= qp.udMTU {
		return false
	}
	w.assigned = true
	w.firstPSN = r.psn
	r.psn = roce.PSNNext(r.psn)
	qp.completeHead(WC_SUCCESS)
	return true
}

// stepUnreliable sends up to budget packets of a UC or UD QP's send queue, in order,
// and completes each WR when its last packet is built. Nothing is kept for
// retransmission.
func (r *requester) stepUnreliable(qp *QueuePair, budget int) bool {
	did := false
	for budget > 0 && qp.sq.len() > 0 {
		w := *qp.sq.at(0)
		if w.status != WC_SUCCESS { // a local error completes in order, then the QP fails
			qp.fail(w.status)
			return true
		}
		if !w.assigned {
			if qp.state != QPS_RTS { // SQD: finish the message under way, start no other
				break
			}
			if r.oversizeUD(qp, w) {
				did = true
				continue
			}
			w.assigned = true
			w.firstPSN = r.psn
			w.npkts = packets(w, qp.pmtu)
			r.psn = roce.PSNAdd(r.psn, w.npkts)
		}
		for budget > 0 && w.sent < w.npkts {
			r.sendUnreliable(qp, w, w.sent)
			w.sent++
			budget--
		}
		did = true
		if w.sent < w.npkts {
			break
		}
		qp.completeHead(WC_SUCCESS)
	}
	return did
}

// sendUnreliable builds packet i of a UC SEND or RDMA WRITE, or a UD SEND. The last
// packet of a message asks for an acknowledgement, as rdma_rxe's requester sets AckReq
// for every service; nobody answers it.
func (r *requester) sendUnreliable(qp *QueuePair, w *sendWQE, i int) {
	d := qp.dev
	op, _ := roce.NextOpcode(qp.svc, w.wr.Opcode.operation(), i, w.npkts) // checked at post time
	psn := roce.PSNAdd(w.firstPSN, i)
	var p *roce.Packet
	if qp.svc == roce.ServiceUD {
		p = &d.txPkt
		*p = w.wr.AH.tmpl
		p.UDP = roce.UDP{SrcPort: qp.udSport, DstPort: roce.UDPPort}
		p.BTH = roce.BTH{Opcode: op, PKey: 0xFFFF, DestQP: w.wr.RemoteQPN, PSN: psn & roce.PSNMask}
		qkey := w.wr.RemoteQKey
		if qkey&0x80000000 != 0 {
			qkey = qp.attr.QKey
		}
		p.DETH = roce.DETH{QKey: qkey, SrcQP: qp.qpn}
	} else {
		p = d.start(qp, op, psn)
	}
	d.fillData(p, qp, w, i, op)
	last := i == w.npkts-1
	r.noack++
	if last || r.noack >= maxPktsPerAck {
		p.BTH.AckReq = true
		r.noack = 0
	}
	d.emit(qp)
}

// unreliableRequest is the responder of a UC or UD QP: it handles one request packet
// of the QP's service, which the device has already matched to the QP's state, P_Key
// and (UC) peer address.
func (qp *QueuePair) unreliableRequest(p *roce.Packet) {
	if qp.svc == roce.ServiceUD {
		qp.udRequest(p)
		return
	}
	qp.ucRequest(p)
}

// headRecv returns the receive WQE a new message goes to, taking in receives posted
// since the pass began, or nil when none is posted.
func (qp *QueuePair) headRecv() *recvWQE {
	if !qp.recvReady() {
		return nil
	}
	return *qp.rq.at(0)
}

// udRequest receives a UD SEND (IBTA Vol 1 §9.8, §10.2.4.1): a Q_Key other than the
// QP's, a payload longer than the MTU, or no receive WR drops the packet (counted); a
// receive WR too small for the GRH area and the payload completes with
// IBV_WC_LOC_LEN_ERR. None of them changes the QP's state.
func (qp *QueuePair) udRequest(p *roce.Packet) {
	if p.DETH.QKey != qp.attr.QKey {
		qp.count(CntQKeyViolation)
		return
	}
	if len(p.Payload) > qp.pmtu {
		qp.count(CntRcvdOversize)
		return
	}
	rw := qp.headRecv()
	if rw == nil {
		qp.count(CntOutOfBuffer)
		return
	}
	if rw.sg.total < 0 { // the receive WR's local key was bad: a local error, fatal as with RC
		qp.completeRecv(WorkCompletion{Status: WC_LOC_QP_OP_ERR, Opcode: WC_RECV, solicited: p.BTH.SE})
		qp.toError()
		return
	}
	n := GRHLen + len(p.Payload)
	if n > rw.sg.total {
		qp.count(CntRespLocalLenErr)
		qp.completeRecv(WorkCompletion{Status: WC_LOC_LEN_ERR, Opcode: WC_RECV, solicited: p.BTH.SE})
		return
	}
	// The GRH area holds the network header as received: the IPv6 header, or 20 zero
	// bytes and the IPv4 header.
	var grh [GRHLen]byte
	f := p.Frame()
	if p.IsIPv6 {
		copy(grh[:], f[p.L3Off:p.L4Off])
	} else {
		copy(grh[GRHLen-20:], f[p.L3Off:p.L4Off])
	}
	rw.sg.copyIn(grh[:], 0)
	rw.sg.copyIn(p.Payload, GRHLen)
	wc := WorkCompletion{Status: WC_SUCCESS, Opcode: WC_RECV, ByteLen: uint32(n), SrcQP: p.DETH.SrcQP, GRH: true, solicited: p.BTH.SE}
	if p.Headers&roce.HdrImmDt != 0 {
		wc.HasImm, wc.ImmData = true, uint32(p.ImmDt)
	}
	qp.completeRecv(wc)
}

// ucRequest receives a UC SEND or RDMA WRITE packet (IBTA Vol 1 §9.7.7; rdma_rxe
// rxe_resp.c check_psn and check_op_seq for UC). A packet whose PSN is not the one
// expected, unless it begins a message, drops the rest of the current message: its
// receive WR, if it took one, stays posted for the next message. A FIRST or ONLY
// packet always begins a new message, whatever its PSN (the QP resynchronises on
// it), and abandons a message left unfinished.
func (qp *QueuePair) ucRequest(p *roce.Packet) {
	r := &qp.resp
	psn := p.BTH.PSN
	op := p.BTH.Opcode
	pos := op.Position()
	start := pos == roce.PosFirst || pos == roce.PosOnly
	gap := psn != r.epsn
	r.epsn = roce.PSNNext(psn)
	newGap := gap && !r.dropMsg // counted once, at the packet that shows it
	if newGap {
		qp.count(CntOutOfSeqRequest)
	}
	switch {
	case start:
		r.dropMsg = false
		qp.abandonMsg()
	case gap || r.dropMsg:
		qp.dropMessage(!newGap)
		return
	}
	isSend, isWrite := op.Is(roce.ClassSend), op.Is(roce.ClassWrite)
	if !start && !(r.inSend && isSend) && !(r.inWrite && isWrite) { // continues no message of its kind
		qp.dropMessage(true)
		return
	}
	// Length (§9.7.7.2.3 with §9.7.5.1.4): FIRST and MIDDLE carry exactly one PMTU.
	pl := len(p.Payload)
	switch {
	case pl > qp.pmtu:
		qp.count(CntRcvdOversize)
		qp.dropMessage(false)
		return
	case (pos == roce.PosFirst || pos == roce.PosMiddle) && pl != qp.pmtu, pos == roce.PosLast && pl == 0:
		if pos != roce.PosLast { // shorter than the path MTU (longer went above)
			qp.count(CntRcvdUndersize)
		}
		qp.dropMessage(true)
		return
	}
	if isSend {
		qp.ucSend(p, pos)
	} else {
		qp.ucWrite(p, pos)
	}
}

// abandonMsg forgets a message under way: a receive WR it had begun to fill stays
// posted, from its first byte, for the next message.
func (qp *QueuePair) abandonMsg() {
	r := &qp.resp
	r.inSend, r.inWrite = false, false
	r.recvOff = 0
	r.wbuf, r.woff = nil, 0
}

// dropMessage drops this packet and the rest of its message, counting the packet as
// dropped when count is set (otherwise the caller counted why).
func (qp *QueuePair) dropMessage(count bool) {
	if count {
		qp.count(CntRcvdMsgDropped)
	}
	qp.abandonMsg()
	qp.resp.dropMsg = true
}

// ucSend places a UC SEND packet in the receive WR at the head of the queue.
func (qp *QueuePair) ucSend(p *roce.Packet, pos roce.Position) {
	r := &qp.resp
	rw := qp.headRecv()
	if rw == nil {
		qp.count(CntOutOfBuffer)
		qp.dropMessage(false)
		return
	}
	if rw.sg.total < 0 {
		qp.completeRecv(WorkCompletion{Status: WC_LOC_QP_OP_ERR, Opcode: WC_RECV, solicited: p.BTH.SE})
		qp.toError()
		return
	}
	if r.recvOff+len(p.Payload) > rw.sg.total {
		qp.count(CntRespLocalLenErr)
		qp.completeRecv(WorkCompletion{Status: WC_LOC_LEN_ERR, Opcode: WC_RECV, solicited: p.BTH.SE})
		qp.dropMessage(false)
		return
	}
	rw.sg.copyIn(p.Payload, r.recvOff)
	r.recvOff += len(p.Payload)
	r.inSend = pos == roce.PosFirst || pos == roce.PosMiddle
	if r.inSend {
		return
	}
	wc := WorkCompletion{Status: WC_SUCCESS, Opcode: WC_RECV, ByteLen: uint32(r.recvOff), solicited: p.BTH.SE}
	if p.Headers&roce.HdrImmDt != 0 {
		wc.HasImm, wc.ImmData = true, uint32(p.ImmDt)
	}
	r.recvOff = 0
	qp.completeRecv(wc)
}

// ucWrite places a UC RDMA WRITE packet. The R_Key, access and bounds are checked at
// the first packet; a refused WRITE is dropped, with no error on either side (rdma_rxe
// class D/E for UC without SRQ).
func (qp *QueuePair) ucWrite(p *roce.Packet, pos roce.Position) {
	r := &qp.resp
	imm := p.Headers&roce.HdrImmDt != 0
	if imm && qp.headRecv() == nil {
		qp.count(CntOutOfBuffer)
		qp.dropMessage(false)
		return
	}
	if pos == roce.PosFirst || pos == roce.PosOnly {
		n := uint64(p.RETH.DMALen)
		if pos == roce.PosOnly && n != uint64(len(p.Payload)) || pos == roce.PosFirst && n <= uint64(qp.pmtu) {
			qp.dropMessage(true)
			return
		}
		r.wbuf, r.woff = nil, 0
		if n > 0 {
			if qp.attr.AccessFlags&AccessRemoteWrite != 0 {
				r.wbuf = qp.dev.mrs.remote(p.RETH.RKey, qp.pd, p.RETH.VA, n, AccessRemoteWrite)
			}
			if r.wbuf == nil {
				qp.dropMessage(true)
				return
			}
		}
	}
	if r.woff+len(p.Payload) > len(r.wbuf) {
		qp.dropMessage(true)
		return
	}
	copy(r.wbuf[r.woff:], p.Payload)
	r.woff += len(p.Payload)
	r.inWrite = pos == roce.PosFirst || pos == roce.PosMiddle
	if r.inWrite {
		return
	}
	if r.woff != len(r.wbuf) { // ended before the length its RETH announced
		qp.dropMessage(true)
		return
	}
	if imm {
		qp.completeRecv(WorkCompletion{Status: WC_SUCCESS, Opcode: WC_RECV_RDMA_WITH_IMM,
			ByteLen: uint32(r.woff), HasImm: true, ImmData: uint32(p.ImmDt), solicited: p.BTH.SE})
	}
	qp.count(CntRxWriteRequests)
	r.wbuf, r.woff = nil, 0
}
