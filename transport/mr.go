package transport

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Access is a set of memory-region access flags (enum ibv_access_flags).
type Access uint32

// Access flags. Remote write and remote atomic require LocalWrite, as verbs does.
const (
	AccessLocalWrite   Access = 1 << 0 // IBV_ACCESS_LOCAL_WRITE
	AccessRemoteWrite  Access = 1 << 1 // IBV_ACCESS_REMOTE_WRITE
	AccessRemoteRead   Access = 1 << 2 // IBV_ACCESS_REMOTE_READ
	AccessRemoteAtomic Access = 1 << 3 // IBV_ACCESS_REMOTE_ATOMIC
)

// ProtectionDomain groups memory regions and queue pairs: a QP may only use regions
// of its own PD, locally and remotely (IBTA Vol 1 §10.2.3).
type ProtectionDomain struct {
	dev *Device
	id  uint32
}

// MemoryRegion is a registered []byte. Its address (Addr) is the buffer's virtual
// address, as with verbs, so a peer's RETH VA and R_Key name bytes in it.
type MemoryRegion struct {
	pd     *ProtectionDomain
	buf    []byte
	addr   uint64
	access Access
	lkey   uint32
	rkey   uint32
	valid  bool
}

// Buf returns the registered bytes.
func (mr *MemoryRegion) Buf() []byte { return mr.buf }

// Addr returns the virtual address of the region's first byte.
func (mr *MemoryRegion) Addr() uint64 { return mr.addr }

// Len returns the region's length in bytes.
func (mr *MemoryRegion) Len() int { return len(mr.buf) }

// LKey returns the local key: a 24-bit index and an 8-bit key portion.
func (mr *MemoryRegion) LKey() uint32 { return mr.lkey }

// RKey returns the remote key; it is 0 unless a remote access flag was given.
func (mr *MemoryRegion) RKey() uint32 { return mr.rkey }

// Access returns the region's access flags.
func (mr *MemoryRegion) Access() Access { return mr.access }

// mrTable maps the 24-bit index of an lkey or rkey to its region. It has its own
// lock: posters resolve local keys without the engine lock, and the engine checks
// R_Keys while registrations go on.
type mrTable struct {
	mu      sync.RWMutex
	regions []*MemoryRegion       // index → region (nil when free); index 0 is never used
	chosen  map[int]*MemoryRegion // regions registered with a chosen key beyond regions
	keyGen  uint8
	gen     atomic.Uint64 // deregistrations so far: a poster's mrCache is good while it stays
}

// Errors of memory registration.
var (
	ErrBadAccess = errors.New("transport: remote write or atomic access requires local write")
	ErrEmptyMR   = errors.New("transport: cannot register an empty buffer")
	ErrMRInvalid = errors.New("transport: memory region is not registered")
)

// AllocPD allocates a protection domain.
func (d *Device) AllocPD() *ProtectionDomain {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.nextPD++
	return &ProtectionDomain{dev: d, id: d.nextPD}
}

// RegMR registers buf with the given access flags and returns the region. The keys
// carry the table index in their upper 24 bits and a key portion that changes with
// every registration in their low 8 bits, so a stale key does not match a reused slot.
// Errors: ErrEmptyMR, ErrBadAccess (remote write or atomic without local write).
func (pd *ProtectionDomain) RegMR(buf []byte, access Access) (*MemoryRegion, error) {
	return pd.RegMRWith(buf, access, MROptions{})
}

// MROptions sets what registration otherwise chooses.
type MROptions struct {
	// IOVA, when HasIOVA, is the address peers use for the region's first byte
	// instead of its virtual address (as ibv_reg_mr_iova).
	IOVA    uint64
	HasIOVA bool
	// Key, when non-zero, is the lkey and rkey to use: its upper 24 bits are the table
	// index, which must be free. For replaying captured traffic, whose requests carry
	// the original rkey.
	Key uint32
}

// ErrKeyInUse is returned when MROptions.Key names a table slot already in use.
var ErrKeyInUse = errors.New("transport: memory key index already in use")

// RegMRWith registers buf like RegMR, with options. Errors: those of RegMR and
// ErrKeyInUse.
func (pd *ProtectionDomain) RegMRWith(buf []byte, access Access, opts MROptions) (*MemoryRegion, error) {
	if len(buf) == 0 {
		return nil, ErrEmptyMR
	}
	if access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && access&AccessLocalWrite == 0 {
		return nil, ErrBadAccess
	}
	t := &pd.dev.mrs
	t.mu.Lock()
	defer t.mu.Unlock()
	idx := 0
	if opts.Key != 0 {
		// A chosen key (replays) may name any index: those regions live in a map,
		// so a large or corrupt key does not grow the table.
		idx = int(opts.Key >> 8)
		if idx == 0 || idx < len(t.regions) && t.regions[idx] != nil || t.chosen[idx] != nil {
			return nil, ErrKeyInUse
		}
	}
	for i := 1; idx == 0 && i < len(t.regions); i++ {
		if t.regions[i] == nil && t.chosen[i] == nil {
			idx = i
		}
	}
	for idx == 0 {
		if len(t.regions) == 0 {
			t.regions = append(t.regions, nil)
		}
		if len(t.regions) >= 1<<24 {
			return nil, fmt.Errorf("transport: memory region table full")
		}
		t.regions = append(t.regions, nil)
		if i := len(t.regions) - 1; t.chosen[i] == nil {
			idx = i
		}
	}
	t.keyGen++
	key := uint32(idx)<<8 | uint32(t.keyGen)
	if opts.Key != 0 {
		key = opts.Key
	}
	addr := uint64(uintptr(unsafe.Pointer(&buf[0])))
	if opts.HasIOVA {
		addr = opts.IOVA
	}
	mr := &MemoryRegion{pd: pd, buf: buf, addr: addr, access: access, lkey: key, valid: true}
	if access&(AccessRemoteWrite|AccessRemoteRead|AccessRemoteAtomic) != 0 {
		mr.rkey = key
	}
	if opts.Key == 0 {
		t.regions[idx] = mr
	} else {
		if t.chosen == nil {
			t.chosen = map[int]*MemoryRegion{}
		}
		t.chosen[idx] = mr
	}
	return mr, nil
}

// Dereg deregisters the region: its keys stop working at once for new requests.
func (mr *MemoryRegion) Dereg() error {
	t := &mr.pd.dev.mrs
	t.mu.Lock()
	defer t.mu.Unlock()
	if !mr.valid {
		return ErrMRInvalid
	}
	mr.valid = false
	t.gen.Add(1)
	if idx := int(mr.lkey >> 8); t.chosen[idx] == mr {
		delete(t.chosen, idx)
	} else {
		t.regions[idx] = nil
	}
	return nil
}

// lookup returns the region for key if it is registered, matches exactly, and
// belongs to pd. t.mu is held.
func (t *mrTable) lookup(key uint32, pd *ProtectionDomain) *MemoryRegion {
	idx := int(key >> 8)
	if idx <= 0 {
		return nil
	}
	var mr *MemoryRegion
	if idx < len(t.regions) {
		mr = t.regions[idx]
	}
	if mr == nil && t.chosen != nil {
		mr = t.chosen[idx]
	}
	if mr == nil || mr.lkey != key || mr.pd != pd {
		return nil
	}
	return mr
}

// slice returns the bytes [va, va+n) of the region, checking bounds without
// overflow; ok is false when any byte lies outside.
func (mr *MemoryRegion) slice(va uint64, n uint64) ([]byte, bool) {
	if va < mr.addr {
		return nil, false
	}
	off := va - mr.addr
	size := uint64(len(mr.buf))
	if off > size || n > size-off {
		return nil, false
	}
	return mr.buf[off : off+n], true
}

// remote resolves a peer's R_Key and address range for an operation needing access;
// it returns nil unless the key is valid for pd, carries the access, and the range
// lies inside the region (IBTA Vol 1 §9.7.5.1.3, rxe_resp.c check_rkey).
func (t *mrTable) remote(rkey uint32, pd *ProtectionDomain, va, n uint64, need Access) []byte {
	t.mu.RLock()
	defer t.mu.RUnlock()
	mr := t.lookup(rkey, pd)
	if mr == nil || mr.rkey != rkey || mr.access&need != need {
		return nil
	}
	b, ok := mr.slice(va, n)
	if !ok {
		return nil
	}
	return b
}
