// Package conform is xroce's RoCE conformance suite (issue 16): scenarios written as
// data (one YAML file each, embedded in the binary or read from a directory) that
// drive a peer's RC responder with crafted frames and judge its answers against
// IBTA Vol 1 chapter 9 (9.7.4 ACK generation, 9.7.5 responder behaviour, 9.9 error
// classes) and Annex A17 (RoCEv2).
//
// It plays two roles. As requester it connects to a standard perftest server
// (ib_write_bw, ib_read_bw, ib_send_bw or ib_atomic_bw; rdma_rxe, an HCA or
// xroce's own) through perftest's out-of-band exchange (package oob), learns the
// server's QPN, expected PSN, rkey and address, then sends the scenario's frames
// straight on a transport.Link and compares what comes back with the scenario's
// expectation (run.go). As responder it is the server of a perftest client: it
// makes the exchange as the server, answers the client's request packets by the
// scenario's rules (responder.go, rules.go) and judges the client's
// retransmission passes and how it ends (passes.go, rrun.go). The frames are
// built and parsed by package roce.
package conform
