//go:build verbs

package verbs

/*
#include <stdlib.h>
#include "xverbs.h"
*/
import "C"

import (
	"context"
	"fmt"
	"syscall"
	"time"
	"unsafe"

	"github.com/xroce/xroce/transport"
)

// CompletionQueue is a completion queue (struct ibv_cq). Poll and Wait are for one
// goroutine at a time.
type CompletionQueue struct {
	cq    *C.struct_ibv_cq
	wcs   *C.struct_ibv_wc           // C array of pollBatch entries
	stash []transport.WorkCompletion // polled by Wait, not yet by Poll
}

const pollBatch = 64

// CreateCQ creates a completion queue with at least depth entries (ibv_create_cq).
func (d *Device) CreateCQ(depth int) (*CompletionQueue, error) {
	cq, err := C.ibv_create_cq(d.ctx, C.int(depth), nil, nil, 0)
	if cq == nil {
		return nil, fmt.Errorf("verbs: ibv_create_cq %d: %v", depth, err)
	}
	wcs := (*C.struct_ibv_wc)(C.calloc(pollBatch, C.size_t(unsafe.Sizeof(C.struct_ibv_wc{}))))
	return &CompletionQueue{cq: cq, wcs: wcs}, nil
}

// Poll moves up to len(wcs) completions into wcs (ibv_poll_cq) and returns how many.
// ImmData is in host order (ntohl of wc.imm_data), as transport reports it.
func (c *CompletionQueue) Poll(wcs []transport.WorkCompletion) int {
	got := copy(wcs, c.stash)
	c.stash = c.stash[:copy(c.stash, c.stash[got:])]
	for got < len(wcs) {
		n := c.pollC(wcs[got:])
		got += n
		if n < pollBatch {
			break
		}
	}
	return got
}

// pollC polls at most min(len(wcs), pollBatch) completions from the CQ itself.
func (c *CompletionQueue) pollC(wcs []transport.WorkCompletion) int {
	n := int(C.xr_poll_cq(c.cq, C.int(min(len(wcs), pollBatch)), c.wcs))
	for i := 0; i < n; i++ {
		w := (*C.struct_ibv_wc)(unsafe.Add(unsafe.Pointer(c.wcs), uintptr(i)*unsafe.Sizeof(C.struct_ibv_wc{})))
		wc := transport.WorkCompletion{WRID: uint64(w.wr_id), Status: transport.WCStatus(w.status),
			Opcode: transport.WCOpcode(w.opcode), ByteLen: uint32(w.byte_len), QPN: uint32(w.qp_num)}
		if w.wc_flags&C.IBV_WC_WITH_IMM != 0 {
			wc.HasImm, wc.ImmData = true, uint32(C.xr_wc_imm(w))
		}
		wcs[i] = wc
	}
	return max(n, 0)
}

// Wait returns when Poll has a completion to give, or with ctx's error. It
// busy-polls, as perftest does, for the first 50 µs, then every 20 µs; what it
// polls stays queued for Poll.
func (c *CompletionQueue) Wait(ctx context.Context) error {
	spin := time.Now().Add(50 * time.Microsecond)
	var one [1]transport.WorkCompletion
	for len(c.stash) == 0 {
		if c.pollC(one[:]) == 1 {
			c.stash = append(c.stash, one[0])
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if time.Now().After(spin) {
			time.Sleep(20 * time.Microsecond)
		}
	}
	return nil
}

// Destroy destroys the queue (ibv_destroy_cq); its QPs must be destroyed first.
func (c *CompletionQueue) Destroy() error {
	if rc := C.ibv_destroy_cq(c.cq); rc != 0 {
		return fmt.Errorf("verbs: ibv_destroy_cq: %v", syscall.Errno(rc))
	}
	C.free(unsafe.Pointer(c.wcs))
	return nil
}
