package rdmacm

import (
	"errors"
	"fmt"
)

// Errors, wrapped with the details by every call that returns them.
var (
	// ErrParam: a connection parameter the device cannot take (librdmacm: EINVAL).
	ErrParam = errors.New("rdmacm: invalid connection parameter")
	// ErrAddress: no local address fits (rdma_resolve_addr: EADDRNOTAVAIL).
	ErrAddress = errors.New("rdmacm: no usable local address")
	// ErrPortInUse: a port already listened on (rdma_bind_addr: EADDRINUSE).
	ErrPortInUse = errors.New("rdmacm: port in use")
	// ErrRejected: the peer answered with a REJ (RDMA_CM_EVENT_REJECTED); the error
	// is a *RejectError.
	ErrRejected = errors.New("rdmacm: connection rejected")
	// ErrUnreachable: the peer never answered (RDMA_CM_EVENT_UNREACHABLE, ETIMEDOUT).
	ErrUnreachable = errors.New("rdmacm: peer unreachable")
	// ErrClosed: the Service, the Listener or the connection is closed.
	ErrClosed = errors.New("rdmacm: closed")
	// ErrDisconnected: the connection ended (a DREQ, or a REJ once established).
	ErrDisconnected = errors.New("rdmacm: disconnected")
)

// portInUse is Listen's error for a port another listener of the device holds:
// errors.Is(err, ErrPortInUse), with the port and the fix in one sentence.
type portInUse struct{ port uint16 }

func (e portInUse) Error() string {
	return fmt.Sprintf("rdmacm: port %d is already bound on this device: another listener holds it; stop that one, or choose another port", e.port)
}

func (e portInUse) Is(target error) bool { return target == ErrPortInUse }
