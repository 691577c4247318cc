package roce

import (
	"fmt"
	"time"
)

// Syndrome is the AETH syndrome byte (IBTA Vol 1 §9.3.6.1, Table 42): bit 7 reserved,
// bits 6-5 the kind (ACK, RNR NAK, NAK) and bits 4-0 a value whose meaning depends on
// the kind: the credit count for an ACK, the RNR timer code for an RNR NAK, the NAK
// code for a NAK.
type Syndrome uint8

// SyndromeKind is bits 6-5 of the syndrome.
type SyndromeKind uint8

// Syndrome kinds (Table 42).
const (
	KindACK    SyndromeKind = 0
	KindRNRNAK SyndromeKind = 1
	KindResv   SyndromeKind = 2
	KindNAK    SyndromeKind = 3
)

// NAK codes, the low 5 bits of a NAK syndrome (Table 43).
const (
	NAKPSNSequenceError       uint8 = 0
	NAKInvalidRequest         uint8 = 1
	NAKRemoteAccessError      uint8 = 2
	NAKRemoteOperationalError uint8 = 3
	NAKInvalidRDRequest       uint8 = 4
)

// CreditsInvalid is the credit count that means "no end-to-end credits" (§9.7.7.2.5).
// rdma_rxe always sends 0x1F, for an ACK syndrome of 0x1F.
const CreditsInvalid uint8 = 0x1F

// Syndromes as rdma_rxe sends them (drivers/infiniband/sw/rxe/rxe_hdr.h AETH_*).
const (
	SyndromeACK                       Syndrome = 0x1F // ACK, credits invalid
	SyndromeNAKPSNSequenceError       Syndrome = 0x60
	SyndromeNAKInvalidRequest         Syndrome = 0x61
	SyndromeNAKRemoteAccessError      Syndrome = 0x62
	SyndromeNAKRemoteOperationalError Syndrome = 0x63
)

// ACKSyndrome builds an ACK syndrome with the given 5-bit credit count.
func ACKSyndrome(credits uint8) Syndrome { return Syndrome(credits & 0x1F) }

// RNRNAKSyndrome builds an RNR NAK syndrome with the 5-bit RNR timer code
// (min_rnr_timer; Table 45 maps it to a delay, see RNRTimerDelay).
func RNRNAKSyndrome(timer uint8) Syndrome { return Syndrome(0x20 | timer&0x1F) }

// NAKSyndrome builds a NAK syndrome with the given NAK code (Table 43).
func NAKSyndrome(code uint8) Syndrome { return Syndrome(0x60 | code&0x1F) }

// Kind returns bits 6-5.
func (s Syndrome) Kind() SyndromeKind { return SyndromeKind(s>>5) & 3 }

// Value returns bits 4-0: credits, RNR timer code or NAK code.
func (s Syndrome) Value() uint8 { return uint8(s) & 0x1F }

// String renders the syndrome like Wireshark does: "ACK credits=31", "RNR NAK timer=12",
// "NAK PSN sequence error".
func (s Syndrome) String() string {
	switch s.Kind() {
	case KindACK:
		return fmt.Sprintf("ACK credits=%d", s.Value())
	case KindRNRNAK:
		return fmt.Sprintf("RNR NAK timer=%d", s.Value())
	case KindNAK:
		switch s.Value() {
		case NAKPSNSequenceError:
			return "NAK PSN sequence error"
		case NAKInvalidRequest:
			return "NAK invalid request"
		case NAKRemoteAccessError:
			return "NAK remote access error"
		case NAKRemoteOperationalError:
			return "NAK remote operational error"
		case NAKInvalidRDRequest:
			return "NAK invalid RD request"
		}
		return fmt.Sprintf("NAK code=%d", s.Value())
	}
	return fmt.Sprintf("Syndrome(0x%02x)", uint8(s))
}

// rnrTimerMicros is IBTA Vol 1 Table 45 "Encoding for RNR NAK Timer Field", in
// microseconds (the same table as rdma_rxe's rnrnak_usec in rxe_comp.c). Code 0
// means 655.36 ms.
var rnrTimerMicros = [32]uint32{
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880,
	163840, 245760, 327680, 491520,
}

// RNRTimerDelay returns the minimum delay that an RNR NAK timer code (0-31, the
// min_rnr_timer attribute) asks the requester to wait before retrying. Only the low
// 5 bits of code are used.
func RNRTimerDelay(code uint8) time.Duration {
	return time.Duration(rnrTimerMicros[code&0x1F]) * time.Microsecond
}
