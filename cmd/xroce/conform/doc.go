// Package conform is xroce's RoCE conformance suite (issue 16): scenarios written as
// data (one YAML file each, embedded in the binary or read from a directory) that
// drive a peer's RC responder with crafted frames and judge its answers against
// IBTA Vol 1 chapter 9 (9.7.4 ACK generation, 9.7.5 responder behaviour, 9.9 error
// classes) and Annex A17 (RoCEv2).
//
// In this increment the suite plays the requester: it connects to a standard
// perftest server (ib_write_bw, ib_read_bw, ib_send_bw or ib_atomic_bw; rdma_rxe,
// an HCA or xroce's own) through perftest's out-of-band exchange (package oob),
// learns the server's QPN, expected PSN, rkey and address, then sends the
// scenario's frames straight on a transport.Link and compares what comes back with
// the scenario's expectation. The frames are built and parsed by package roce.
// The responder role (answering a peer's requester) is not done yet.
package conform
