package transport

// Loopback: a QP or address handle whose DGID is one of the device's own GIDs
// (two applications of one verbs daemon, or a client and a server on one device)
// sends to the device itself. rdma_rxe does not put such packets on the wire
// either: rxe_net.c's rxe_send hands a packet whose destination is local to
// rxe_loopback, which passes it to rxe_rcv. Here the address handle resolves to
// the link's own Ethernet address (resolveAH); emit encodes every frame to that
// address into an engine buffer instead of the link's memory, and the next pass
// of the engine takes it in as if received (inputLooped), ICRC check included.
// Such frames count in sent_pkts and rcvd_pkts, as rxe counts them, and are not in
// a --pcap recording of the link (nor in a capture of rdma_rxe's netdev).

// loopBack queues the frame d.txPkt holds for the device's own input and returns
// its length (0 if it could not be encoded); m is what the frame is, for the
// requester's timers, which start as when the link accepts a frame.
func (d *Device) loopBack(qp *QueuePair, m *txInfo) int {
	buf := d.frame()
	n, err := d.txPkt.Encode(buf)
	if err != nil { // the engine builds packets from the opcode table: a bug if reached
		d.bufs = append(d.bufs, buf)
		d.counters.inc(CntSendErr)
		return 0
	}
	d.loop = append(d.loop, buf[:n])
	qp.counters[CntSentPkts]++
	d.counters.inc(CntSentPkts)
	if m.qp != nil {
		m.qp.req.departed(m.qp, m)
	}
	return n
}

// inputLooped takes in the frames looped back since the last pass, in the order
// they were sent, and reports whether there were any. Frames they cause to be sent
// to the device itself wait for the next pass.
func (d *Device) inputLooped() bool {
	if len(d.loop) == 0 {
		return false
	}
	d.loop, d.loopIn = d.loopIn[:0], d.loop
	d.looping = true // as rxe_chk_dgid passes RXE_LOOPBACK_MASK packets
	for i, f := range d.loopIn {
		d.input(f)
		d.bufs = append(d.bufs, f[:cap(f)])
		d.loopIn[i] = nil
	}
	d.looping = false
	return true
}
