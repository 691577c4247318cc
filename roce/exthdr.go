package roce

import "encoding/binary"

// Each extension header has a Decode function that reads it from the start of a byte
// slice (ErrTruncated when the slice is short) and a Put method that writes it
// (panicking, like binary.BigEndian.PutUint32, when the slice is short). All fields
// are big-endian on the wire.

// RETH is the RDMA Extended Transport Header, 16 bytes (IBTA Vol 1 §9.3.4): the
// remote virtual address, the R_Key and the DMA length of the whole message in bytes.
// It follows the BTH of RDMA_WRITE_FIRST, RDMA_WRITE_ONLY(_WITH_IMMEDIATE) and
// RDMA_READ_REQUEST.
type RETH struct {
	VA     uint64
	RKey   uint32
	DMALen uint32
}

// DecodeRETH reads a RETH from b[0:RETHLen].
func DecodeRETH(b []byte) (RETH, error) {
	if len(b) < RETHLen {
		return RETH{}, ErrTruncated
	}
	return RETH{
		VA:     binary.BigEndian.Uint64(b[0:8]),
		RKey:   binary.BigEndian.Uint32(b[8:12]),
		DMALen: binary.BigEndian.Uint32(b[12:16]),
	}, nil
}

// Put writes h into b[0:RETHLen].
func (h *RETH) Put(b []byte) {
	_ = b[RETHLen-1]
	binary.BigEndian.PutUint64(b[0:8], h.VA)
	binary.BigEndian.PutUint32(b[8:12], h.RKey)
	binary.BigEndian.PutUint32(b[12:16], h.DMALen)
}

// AETH is the ACK Extended Transport Header, 4 bytes (IBTA Vol 1 §9.3.6): an 8-bit
// Syndrome and the 24-bit MSN (message sequence number) of the last message completed
// by the responder.
type AETH struct {
	Syndrome Syndrome
	MSN      uint32
}

// DecodeAETH reads an AETH from b[0:AETHLen].
func DecodeAETH(b []byte) (AETH, error) {
	if len(b) < AETHLen {
		return AETH{}, ErrTruncated
	}
	return AETH{Syndrome: Syndrome(b[0]), MSN: get24(b[1:4])}, nil
}

// Put writes h into b[0:AETHLen]; MSN is truncated to 24 bits.
func (h *AETH) Put(b []byte) {
	_ = b[AETHLen-1]
	b[0] = byte(h.Syndrome)
	put24(b[1:4], h.MSN)
}

// AtomicETH is the Atomic Extended Transport Header, 28 bytes (IBTA Vol 1 §9.3.5):
// remote VA (8-byte aligned), R_Key, swap-or-add data and compare data. It follows
// the BTH of COMPARE_SWAP and FETCH_ADD.
type AtomicETH struct {
	VA      uint64
	RKey    uint32
	SwapAdd uint64 // swap data for COMPARE_SWAP, add data for FETCH_ADD
	Compare uint64 // compare data for COMPARE_SWAP; ignored by FETCH_ADD
}

// DecodeAtomicETH reads an AtomicETH from b[0:AtomicETHLen].
func DecodeAtomicETH(b []byte) (AtomicETH, error) {
	if len(b) < AtomicETHLen {
		return AtomicETH{}, ErrTruncated
	}
	return AtomicETH{
		VA:      binary.BigEndian.Uint64(b[0:8]),
		RKey:    binary.BigEndian.Uint32(b[8:12]),
		SwapAdd: binary.BigEndian.Uint64(b[12:20]),
		Compare: binary.BigEndian.Uint64(b[20:28]),
	}, nil
}

// Put writes h into b[0:AtomicETHLen].
func (h *AtomicETH) Put(b []byte) {
	_ = b[AtomicETHLen-1]
	binary.BigEndian.PutUint64(b[0:8], h.VA)
	binary.BigEndian.PutUint32(b[8:12], h.RKey)
	binary.BigEndian.PutUint64(b[12:20], h.SwapAdd)
	binary.BigEndian.PutUint64(b[20:28], h.Compare)
}

// AtomicAckETH is the Atomic ACK Extended Transport Header, 8 bytes (IBTA Vol 1
// §9.3.7): the value the target held before the atomic operation.
type AtomicAckETH struct {
	OrigRemData uint64
}

// DecodeAtomicAckETH reads an AtomicAckETH from b[0:AtomicAckETHLen].
func DecodeAtomicAckETH(b []byte) (AtomicAckETH, error) {
	if len(b) < AtomicAckETHLen {
		return AtomicAckETH{}, ErrTruncated
	}
	return AtomicAckETH{OrigRemData: binary.BigEndian.Uint64(b[0:8])}, nil
}

// Put writes h into b[0:AtomicAckETHLen].
func (h *AtomicAckETH) Put(b []byte) {
	binary.BigEndian.PutUint64(b[0:8], h.OrigRemData)
}

// ImmDt is the 4-byte Immediate Data header (IBTA Vol 1 §9.3.8). The value is the
// big-endian reading of the four wire bytes, as ibv_wc.imm_data is (__be32) after
// ntohl.
type ImmDt uint32

// DecodeImmDt reads ImmDt from b[0:ImmDtLen].
func DecodeImmDt(b []byte) (ImmDt, error) {
	if len(b) < ImmDtLen {
		return 0, ErrTruncated
	}
	return ImmDt(binary.BigEndian.Uint32(b)), nil
}

// Put writes h into b[0:ImmDtLen].
func (h ImmDt) Put(b []byte) { binary.BigEndian.PutUint32(b, uint32(h)) }

// IETH is the Invalidate Extended Transport Header, 4 bytes (IBTA Vol 1 §9.3.9): the
// R_Key to invalidate, carried by SEND_LAST_WITH_INVALIDATE and
// SEND_ONLY_WITH_INVALIDATE.
type IETH struct {
	RKey uint32
}

// DecodeIETH reads an IETH from b[0:IETHLen].
func DecodeIETH(b []byte) (IETH, error) {
	if len(b) < IETHLen {
		return IETH{}, ErrTruncated
	}
	return IETH{RKey: binary.BigEndian.Uint32(b)}, nil
}

// Put writes h into b[0:IETHLen].
func (h *IETH) Put(b []byte) { binary.BigEndian.PutUint32(b, h.RKey) }

// DETH is the Datagram Extended Transport Header, 8 bytes (IBTA Vol 1 §9.3.3): the
// Q_Key and the 24-bit source QPN, after one reserved byte. UD only.
type DETH struct {
	QKey  uint32
	Resv  uint8
	SrcQP uint32
}

// DecodeDETH reads a DETH from b[0:DETHLen].
func DecodeDETH(b []byte) (DETH, error) {
	if len(b) < DETHLen {
		return DETH{}, ErrTruncated
	}
	return DETH{QKey: binary.BigEndian.Uint32(b[0:4]), Resv: b[4], SrcQP: get24(b[5:8])}, nil
}

// Put writes h into b[0:DETHLen]; SrcQP is truncated to 24 bits.
func (h *DETH) Put(b []byte) {
	_ = b[DETHLen-1]
	binary.BigEndian.PutUint32(b[0:4], h.QKey)
	b[4] = h.Resv
	put24(b[5:8], h.SrcQP)
}

// FETH is the Flush Extended Transport Header, 4 bytes, that precedes the RETH of a
// FLUSH (IBTA 1.5 memory placement extensions; rdma_rxe rxe_hdr.h): bits 5-4 are
// the selectivity level, bits 3-0 the placement type, the rest reserved.
type FETH struct {
	Bits uint32
}

// Selectivity returns the 2-bit selectivity level (0: whole region, 1: the RETH's
// range).
func (h FETH) Selectivity() uint8 { return uint8(h.Bits>>4) & 3 }

// PlacementType returns the 4-bit placement type (bit 0 global visibility, bit 1
// persistence).
func (h FETH) PlacementType() uint8 { return uint8(h.Bits) & 0x0F }

// DecodeFETH reads a FETH from b[0:FETHLen].
func DecodeFETH(b []byte) (FETH, error) {
	if len(b) < FETHLen {
		return FETH{}, ErrTruncated
	}
	return FETH{Bits: binary.BigEndian.Uint32(b)}, nil
}

// Put writes h into b[0:FETHLen].
func (h *FETH) Put(b []byte) { binary.BigEndian.PutUint32(b, h.Bits) }
