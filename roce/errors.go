package roce

// ErrorKind classifies a decode failure, so callers (the engine's counters, the
// dump tool) can switch on it.
type ErrorKind uint8

// Decode failure kinds.
const (
	KindTruncated      ErrorKind = iota + 1 // the bytes end before a header or field does
	KindNotRoCE                             // not IPv4/IPv6 UDP to port 4791, or an unsupported encapsulation
	KindUnknownOpcode                       // BTH opcode not in the opcode table
	KindBadPadCount                         // PadCnt inconsistent with the payload
	KindLengthMismatch                      // IP/UDP lengths disagree with each other or the frame, or a payload where none is allowed
	KindBadICRC                             // the ICRC does not match the packet
	KindBadVersion                          // BTH TVer is not 0
)

// DecodeError is the error type of every decoder in this package. The package-level
// values below are the only ones returned, so errors.Is and == both work and
// returning one never allocates.
type DecodeError struct {
	Kind ErrorKind
	msg  string
}

func (e *DecodeError) Error() string { return e.msg }

// Errors returned by the decoders.
var (
	ErrTruncated         = &DecodeError{KindTruncated, "roce: truncated packet"}
	ErrNotRoCE           = &DecodeError{KindNotRoCE, "roce: not a RoCEv2 frame (IPv4/IPv6 UDP port 4791)"}
	ErrIPv4Options       = &DecodeError{KindNotRoCE, "roce: IPv4 header with options"}
	ErrIPFragment        = &DecodeError{KindNotRoCE, "roce: IP fragment"}
	ErrUnknownOpcode     = &DecodeError{KindUnknownOpcode, "roce: unknown BTH opcode"}
	ErrBadPadCount       = &DecodeError{KindBadPadCount, "roce: BTH pad count inconsistent with payload"}
	ErrLengthMismatch    = &DecodeError{KindLengthMismatch, "roce: IP/UDP length does not match the frame"}
	ErrUnexpectedPayload = &DecodeError{KindLengthMismatch, "roce: payload on an opcode that carries none"}
	ErrBadICRC           = &DecodeError{KindBadICRC, "roce: ICRC mismatch"}
	ErrBadVersion        = &DecodeError{KindBadVersion, "roce: BTH transport header version is not 0"}
)
