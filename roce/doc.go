// Package roce is the RoCEv2 wire format: InfiniBand transport headers carried in
// UDP/4791 over IPv4 or IPv6 (IBTA Vol 1 Release 1.4 chapter 9, Annex A17 "RoCEv2").
//
// It decodes and encodes whole Ethernet frames and each header on its own, computes
// and verifies the invariant CRC (ICRC), does 24-bit PSN arithmetic, converts path
// MTUs, and builds GIDs and GID tables the way Linux rdma_rxe does. It performs no
// I/O and imports the standard library only (a test checks it); xdp.GIDTable reads an
// interface's addresses for BuildGIDTable.
//
// The hot-path decoder (Packet.Decode) works on the frame's bytes in place and does
// not allocate. Package roce/rocelayers adds gopacket layers (the BTH and every
// extension header) and registers them on UDP port 4791 when imported; both paths
// produce the same bytes.
package roce
