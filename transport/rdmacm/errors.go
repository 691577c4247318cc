package rdmacm

import (
	"errors"
	"fmt"
	"net/netip"
)

// Errors, wrapped with the details by every call that returns them.
var (
	// ErrParam: a connection parameter the device cannot take (librdmacm: EINVAL).
	ErrParam = errors.New("rdmacm: invalid connection parameter")
	// ErrAddress: no local address fits (rdma_resolve_addr: EADDRNOTAVAIL).
	ErrAddress = errors.New("rdmacm: no usable local address")
	// ErrPortInUse: a port already listened on (rdma_bind_addr: EADDRINUSE).
	ErrPortInUse = errors.New("rdmacm: port in use")
	// ErrPortShared: a listener of every address beside another listener of the
	// port, or of one address beside one of every address (rdma_listen:
	// EADDRNOTAVAIL, cma_check_port).
	ErrPortShared = errors.New("rdmacm: port listened on for every address")
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

// portShared is ListenAddr's error for a port that a listener of every address
// would share with another listener (want or held is the zero Addr):
// errors.Is(err, ErrPortShared).
type portShared struct {
	port       uint16
	want, held netip.Addr
}

func (e portShared) Error() string {
	if !e.held.IsValid() && !e.want.IsValid() {
		return fmt.Sprintf("rdmacm: port %d is already listened on for every address of this device (rdma_cm refuses a second such listener too): stop that one, or choose another port", e.port)
	}
	if !e.held.IsValid() {
		return fmt.Sprintf("rdmacm: port %d is already listened on for every address of this device, so no listener can take it for %v (rdma_cm refuses it too): stop that one, bind both to their own addresses, or choose another port", e.port, e.want)
	}
	return fmt.Sprintf("rdmacm: port %d is already listened on for %v, so no listener can take it for every address (rdma_cm refuses it too): bind this one to another address of the device, or choose another port", e.port, e.held)
}

func (e portShared) Is(target error) bool { return target == ErrPortShared }
