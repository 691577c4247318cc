// Package ibcm is the connection state machine of the InfiniBand Communication
// Manager (IBTA Vol 1 ch. 12), as Linux's ib_cm runs it, on the wire format of
// package roce/cm: REQ/REP/RTU establishment in both roles, REJ, MRA, DREQ/DREP
// from either side, TimeWait, retransmission with the spec's timeouts and retry
// counts, and the answers to duplicates (a duplicate REQ gets the same REP, a
// duplicate REP the same RTU, a duplicate DREQ the same DREP).
//
// A Manager has no goroutines, no I/O and no clock of its own: every call takes the
// current time, the caller sends what Sends returns (each a whole MAD for QP1 of an
// address), hands it every MAD received, calls Advance when NextDeadline passes, and
// acts on what Events returns (moving QPs to RTR/RTS, accepting or rejecting). The
// parameters of each message are the caller's (an rdma_cm layer above chooses them);
// the Manager fills in what the protocol owns: communication IDs, transaction IDs,
// the Local CA GUID, and, for answers, the peer's IDs.
package ibcm
