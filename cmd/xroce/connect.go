package main

import (
	"github.com/xroce/xroce/cmd/xroce/oob"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// remoteAccess is what the perftest-style tools' QPs allow their peer: perftest
// sets IBV_ACCESS_REMOTE_WRITE, _READ and _ATOMIC at INIT for every test.
const remoteAccess = transport.AccessRemoteWrite | transport.AccessRemoteRead | transport.AccessRemoteAtomic

// connectParams are the bring-up attributes of a QP towards the peer QP of a perftest
// key exchange: the peer's QPN and PSN, our PSN, our GID index sgid, path MTU mtu,
// and rdAtom outstanding READs/atomics each way at most (the peer's out_reads,
// at least 1, as perftest sets max_rd_atomic from dest->out_reads). Timers are
// perftest's defaults.
func connectParams(remote, local oob.Dest, sgid int, mtu roce.MTU, rdAtom int) transport.ConnectParams {
	return transport.ConnectParams{Access: remoteAccess, AH: transport.AddressHandle{DGID: remote.GID, SGIDIndex: sgid},
		PathMTU: mtu, DestQPN: remote.QPN, RQPSN: remote.PSN, MaxDestRdAtomic: uint8(rdAtom),
		SQPSN: local.PSN, MaxRdAtomic: uint8(min(max(remote.OutReads, 1), rdAtom))}
}
