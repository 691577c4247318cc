//go:build verbs

package verbs

/*
#cgo LDFLAGS: -libverbs
#include <stdlib.h>
#include "xverbs.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/xroce/xroce/roce"
)

// Device is an opened RDMA device (struct ibv_context) and its port 1.
type Device struct {
	name string
	ctx  *C.struct_ibv_context
	gids roce.GIDTable
	mtu  roce.MTU // the port's active MTU
}

// ErrNoDevice is returned by Open when no RDMA device has the given name.
var ErrNoDevice = errors.New("verbs: no such RDMA device")

// Devices lists the RDMA devices libibverbs sees (ibv_get_device_list), by name.
func Devices() ([]string, error) {
	var n C.int
	list, err := C.ibv_get_device_list(&n)
	if list == nil {
		return nil, fmt.Errorf("verbs: ibv_get_device_list: %v", err)
	}
	defer C.ibv_free_device_list(list)
	var names []string
	for _, d := range unsafe.Slice(list, int(n)) {
		names = append(names, C.GoString(C.ibv_get_device_name(d)))
	}
	sort.Strings(names)
	return names, nil
}

// Open opens the RDMA device called name (as ibv_devices lists it: rxe0, mlx5_0)
// and reads port 1's active MTU and GID table. Errors: ErrNoDevice (naming the
// devices there are), or the errno of ibv_open_device / ibv_query_port.
func Open(name string) (*Device, error) {
	var n C.int
	list, err := C.ibv_get_device_list(&n)
	if list == nil {
		return nil, fmt.Errorf("verbs: ibv_get_device_list: %v (is the rdma_rxe or mlx5_ib module loaded, and /dev/infiniband present?)", err)
	}
	defer C.ibv_free_device_list(list)
	var names []string
	for _, d := range unsafe.Slice(list, int(n)) {
		dn := C.GoString(C.ibv_get_device_name(d))
		names = append(names, dn)
		if dn != name {
			continue
		}
		ctx, err := C.ibv_open_device(d)
		if ctx == nil {
			return nil, fmt.Errorf("verbs: ibv_open_device %s: %v", name, err)
		}
		dev := &Device{name: name, ctx: ctx}
		if err := dev.queryPort(); err != nil {
			C.ibv_close_device(ctx)
			return nil, err
		}
		return dev, nil
	}
	return nil, fmt.Errorf("%w %q; devices here: %s", ErrNoDevice, name, strings.Join(names, ", "))
}

// queryPort reads port 1: the active MTU and the GID table (ibv_query_gid_ex).
// Empty GID slots are kept, as zero GIDs, so that indexes stay verbs' indexes.
func (d *Device) queryPort() error {
	var mtu, tblLen C.int
	if rc := C.xr_query_port(d.ctx, &mtu, &tblLen); rc != 0 {
		return fmt.Errorf("verbs: ibv_query_port %s 1: %v", d.name, syscall.Errno(rc))
	}
	d.mtu = roce.MTU(mtu)
	var t roce.GIDTable
	last := -1
	for i := 0; i < int(tblLen); i++ {
		e := roce.GIDEntry{Index: i}
		var typ C.int
		if C.xr_gid(d.ctx, C.int(i), (*C.uint8_t)(unsafe.Pointer(&e.GID[0])), &typ) == 0 {
			switch typ {
			case C.IBV_GID_TYPE_ROCE_V2:
				e.Version = roce.RoCEv2
			case C.IBV_GID_TYPE_ROCE_V1:
				e.Version = roce.RoCEv1
			}
			if e.GID != (roce.GID{}) {
				last = i
			}
		}
		t = append(t, e)
	}
	d.gids = t[:last+1]
	return nil
}

// Name is the device's name.
func (d *Device) Name() string { return d.name }

// GIDTable is port 1's GID table, with verbs' indexes (empty slots are zero GIDs
// with Version 0).
func (d *Device) GIDTable() roce.GIDTable { return d.gids }

// ActiveMTU is port 1's active MTU (ibv_port_attr.active_mtu): the largest path MTU
// a QP on it can use.
func (d *Device) ActiveMTU() roce.MTU { return d.mtu }

// Close closes the device (ibv_close_device); every PD, MR, CQ and QP on it must
// have been destroyed first.
func (d *Device) Close() error {
	if rc := C.ibv_close_device(d.ctx); rc != 0 {
		return fmt.Errorf("verbs: ibv_close_device: %v", syscall.Errno(rc))
	}
	return nil
}

// HWCounters reads port 1's hardware counters from sysfs
// (/sys/class/infiniband/NAME/ports/1/hw_counters/*: rdma_rxe's rxe_hw_counters.c
// names, or mlx5's: out_of_sequence, packet_seq_err, local_ack_timeout_err,
// roce_adp_retrans, duplicate_request, ...). A device without them gives an empty map.
func (d *Device) HWCounters() map[string]uint64 {
	m := map[string]uint64{}
	dir := filepath.Join("/sys/class/infiniband", d.name, "ports/1/hw_counters")
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
			m[e.Name()] = v
		}
	}
	return m
}
