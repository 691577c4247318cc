// Package cm is the wire format of the InfiniBand Communication Manager as RoCEv2
// carries it: the common MAD header (IBTA Vol 1 §13.4.2), the CM messages of
// chapter 12 (§12.6: REQ, MRA, REJ, REP, RTU, DREQ, DREP, LAP, APR; and the Service
// ID Resolution messages SIDR_REQ and SIDR_REP) and the private-data header of the RDMA IP CM Service (Annex A11,
// Linux's struct cma_hdr), in a UD SEND_ONLY to QP1 (the GSI) with DETH Q_Key
// 0x80010000, built and read with package roce's BTH, DETH and frame code.
//
// It performs no I/O and keeps no state: the connection state machine is another
// package's job. It imports the standard library and roce only (a test checks it).
//
// # Layout
//
// A MAD is 256 bytes: a 24-byte common header (Header) and 232 bytes of data that
// hold one CM message (Message). Each message type has a Decode method that reads
// the 232 bytes of MAD data and a Put method that writes them, reserved bits zero.
// Field positions in the docs are those of the spec's message-contents tables,
// Byte[Bit] from the start of the MAD data, bit 0 being a byte's most significant
// bit, and a width in bits: "43[5], 2 bits" is the mask 0x06 of byte 43. The tables
// (Release 1.4 numbering: Table 106 REQ … Table 120 SIDR_REP) are those Linux
// transcribes in include/rdma/ibta_vol1_c12.h; the tests check the layout against
// rdma_rxe's own CM exchange (testdata/rxe/ib_write_bw_rdmacm.pcap) and Wireshark's
// dissector.
//
// Decoders never panic on bad input: they return an *Error naming the field. They
// check what makes a MAD unreadable (length, Base Version, Management Class, Class
// Version, Attribute ID, information lengths beyond their fields) and leave the
// meaning of values (an MTU the port lacks, a reserved transport service type) to
// the state machine, which answers those with a REJ (RejectReason).
package cm
