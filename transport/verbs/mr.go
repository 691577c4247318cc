//go:build verbs

package verbs

/*
#include "xverbs.h"
*/
import "C"

import (
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/xroce/xroce/transport"
)

// ProtectionDomain is a protection domain (struct ibv_pd).
type ProtectionDomain struct {
	dev *Device
	pd  *C.struct_ibv_pd
}

// AllocPD allocates a protection domain (ibv_alloc_pd).
func (d *Device) AllocPD() (*ProtectionDomain, error) {
	pd, err := C.ibv_alloc_pd(d.ctx)
	if pd == nil {
		return nil, fmt.Errorf("verbs: ibv_alloc_pd: %v", err)
	}
	return &ProtectionDomain{dev: d, pd: pd}, nil
}

// Dealloc frees the protection domain (ibv_dealloc_pd).
func (pd *ProtectionDomain) Dealloc() error {
	if rc := C.ibv_dealloc_pd(pd.pd); rc != 0 {
		return fmt.Errorf("verbs: ibv_dealloc_pd: %v", syscall.Errno(rc))
	}
	return nil
}

// Alloc returns n bytes of zeroed, page-aligned memory outside the Go heap
// (an anonymous mmap), which RegMR can register: the HCA keeps its address, which
// Go memory must not give it. Free it with Free after deregistering it.
func Alloc(n int) ([]byte, error) {
	if n <= 0 {
		n = 1
	}
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("verbs: mmap %d bytes: %w", n, err)
	}
	return b, nil
}

// Free unmaps memory from Alloc.
func Free(b []byte) error { return unix.Munmap(b) }

// MemoryRegion is a registered memory region (struct ibv_mr). Its address is the
// buffer's virtual address, as verbs' ibv_reg_mr gives it.
type MemoryRegion struct {
	mr  *C.struct_ibv_mr
	buf []byte
}

// RegMR registers buf, which must come from Alloc, with the given access flags
// (ibv_reg_mr). Errors: the errno of ibv_reg_mr (EINVAL for access without local
// write where remote write or atomics are asked, ENOMEM past the memlock limit).
func (pd *ProtectionDomain) RegMR(buf []byte, access transport.Access) (*MemoryRegion, error) {
	if len(buf) == 0 {
		return nil, fmt.Errorf("verbs: RegMR: empty buffer")
	}
	mr, err := C.ibv_reg_mr(pd.pd, unsafe.Pointer(unsafe.SliceData(buf)), C.size_t(len(buf)), C.int(access))
	if mr == nil {
		return nil, fmt.Errorf("verbs: ibv_reg_mr %d bytes: %v", len(buf), err)
	}
	return &MemoryRegion{mr: mr, buf: buf}, nil
}

// Addr is the region's first byte's address, as the peer names it in a RETH.
func (m *MemoryRegion) Addr() uint64 { return uint64(uintptr(unsafe.Pointer(unsafe.SliceData(m.buf)))) }

// LKey is the region's local key.
func (m *MemoryRegion) LKey() uint32 { return uint32(m.mr.lkey) }

// RKey is the region's remote key.
func (m *MemoryRegion) RKey() uint32 { return uint32(m.mr.rkey) }

// Buf is the registered memory.
func (m *MemoryRegion) Buf() []byte { return m.buf }

// Dereg deregisters the region (ibv_dereg_mr).
func (m *MemoryRegion) Dereg() error {
	if rc := C.ibv_dereg_mr(m.mr); rc != 0 {
		return fmt.Errorf("verbs: ibv_dereg_mr: %v", syscall.Errno(rc))
	}
	return nil
}
