package main

import (
	"encoding/binary"

	"github.com/xroce/xroce/transport"
)

// The cross-check's workload: a fixed script of RC operations from the client
// (requester) to the server (responder) over seeded memory, and the model of what
// each side's completions and memory must be afterwards. Both providers run the
// same script; the interop harness compares what each reports.

// Memory layout of each side's xcheckMem-byte region (offsets).
const (
	xcheckMem    = 1 << 20
	xcWriteArea  = 0         // server: WRITE targets; client: WRITE and SEND sources
	xcReadArea   = 256 << 10 // server: READ sources; client: READ targets
	xcRecvArea   = 512 << 10 // server: receive buffers
	xcImmArea    = 640 << 10 // server: WRITE_WITH_IMM targets
	xcAtomicArea = 960 << 10 // server: atomic targets; client: the original values returned
)

// xcheckSizes cross every PMTU boundary of 256..4096 and include zero-length
// messages (for the operations that allow them).
var xcheckSizes = []int{0, 1, 63, 255, 256, 257, 1023, 1024, 1025, 2047, 2048, 2049, 4095, 4096, 4097, 12289, 65536}

// xcOp is one scripted work request.
type xcOp struct {
	wr      transport.SendWR // addresses relative to the regions (offsets)
	local   int              // offset of the local buffer
	length  int
	remote  int // offset in the server's region
	recv    int // the receive it consumes on the server (-1: none)
	recvLen int // that receive's buffer length
	recvOff int // and offset
}

// xcheckScript returns the client's operations and the server's receives, in order.
func xcheckScript() (ops []xcOp, recvs []xcOp) {
	woff, roff, soff, ioff := 0, 0, 0, 0
	add := func(op transport.WROpcode, size int, imm uint32) {
		o := xcOp{wr: transport.SendWR{WRID: uint64(len(ops)), Opcode: op, Flags: transport.SendSignaled, ImmData: imm},
			length: size, recv: -1}
		switch op {
		case transport.WR_RDMA_WRITE:
			o.local, o.remote = xcWriteArea+woff, xcWriteArea+woff+3 // unaligned on the peer
			woff += size + 5
		case transport.WR_RDMA_READ:
			o.local, o.remote = xcReadArea+roff+1, xcReadArea+roff
			roff += size + 7
		case transport.WR_SEND, transport.WR_SEND_WITH_IMM:
			o.local = xcWriteArea + soff
			o.recv, o.recvLen, o.recvOff = len(recvs), size+9, xcRecvArea+soff
			soff += size + 11
		case transport.WR_RDMA_WRITE_WITH_IMM:
			o.local, o.remote = xcWriteArea+ioff, xcImmArea+ioff+1
			o.recv, o.recvLen, o.recvOff = len(recvs), 0, 0 // a receive with no buffer
			ioff += size + 3
		}
		if o.recv >= 0 {
			recvs = append(recvs, o)
		}
		ops = append(ops, o)
	}
	for i, s := range xcheckSizes {
		add(transport.WR_RDMA_WRITE, s, 0)
		if s > 0 {
			add(transport.WR_RDMA_READ, s, 0)
		}
		add(transport.WR_SEND, s, 0)
		add(transport.WR_RDMA_WRITE_WITH_IMM, s, 0x5a000000+uint32(i))
		if i%2 == 0 {
			add(transport.WR_SEND_WITH_IMM, s, 0xc0de0000+uint32(i))
		}
	}
	// Atomics on two 8-byte targets: four FETCH_AND_ADDs, then a CMP_AND_SWP that
	// succeeds and one that fails.
	slot1 := binary.LittleEndian.Uint64(xcheckInit(false)[xcAtomicArea+8:])
	for k := 0; k < 4; k++ {
		o := xcOp{wr: transport.SendWR{WRID: uint64(len(ops)), Opcode: transport.WR_ATOMIC_FETCH_AND_ADD, Flags: transport.SendSignaled,
			CompareAdd: 0x0101010101 * uint64(k+1)}, local: xcAtomicArea + 8*k, length: 8, remote: xcAtomicArea, recv: -1}
		ops = append(ops, o)
	}
	// Both compare with the target's initial value: the first swaps, so the second
	// finds the swapped value and leaves it.
	for k, cmp := range []uint64{slot1, slot1} {
		o := xcOp{wr: transport.SendWR{WRID: uint64(len(ops)), Opcode: transport.WR_ATOMIC_CMP_AND_SWP, Flags: transport.SendSignaled,
			CompareAdd: cmp, Swap: 0xfeedface00000000 + uint64(k)}, local: xcAtomicArea + 32 + 8*k, length: 8, remote: xcAtomicArea + 8, recv: -1}
		ops = append(ops, o)
	}
	return ops, recvs
}

// xcheckInit is a side's region before the script: its seeded pattern.
func xcheckInit(client bool) []byte {
	b := make([]byte, xcheckMem)
	seed := uint64(0x5eed0002)
	if client {
		seed = 0x5eed0001
	}
	pattern(b, seed)
	return b
}

// xcheckModel runs the script on both regions and returns the memory each side
// must end with and the completions each must report, in order.
func xcheckModel() (cli, srv []byte, cliWCs, srvWCs []transport.WorkCompletion) {
	cli, srv = xcheckInit(true), xcheckInit(false)
	ops, _ := xcheckScript()
	for _, o := range ops {
		wc := transport.WorkCompletion{WRID: o.wr.WRID, Status: transport.WC_SUCCESS, ByteLen: uint32(o.length)}
		switch o.wr.Opcode {
		case transport.WR_RDMA_WRITE:
			wc.Opcode = transport.WC_RDMA_WRITE
			copy(srv[o.remote:o.remote+o.length], cli[o.local:])
		case transport.WR_RDMA_WRITE_WITH_IMM:
			wc.Opcode, wc.HasImm, wc.ImmData = transport.WC_RDMA_WRITE, true, o.wr.ImmData
			copy(srv[o.remote:o.remote+o.length], cli[o.local:])
			srvWCs = append(srvWCs, transport.WorkCompletion{WRID: uint64(o.recv), Status: transport.WC_SUCCESS,
				Opcode: transport.WC_RECV_RDMA_WITH_IMM, ByteLen: uint32(o.length), ImmData: o.wr.ImmData, HasImm: true})
		case transport.WR_RDMA_READ:
			wc.Opcode = transport.WC_RDMA_READ
			copy(cli[o.local:o.local+o.length], srv[o.remote:])
		case transport.WR_SEND, transport.WR_SEND_WITH_IMM:
			wc.Opcode = transport.WC_SEND
			wc.HasImm, wc.ImmData = o.wr.Opcode == transport.WR_SEND_WITH_IMM, o.wr.ImmData
			copy(srv[o.recvOff:o.recvOff+o.length], cli[o.local:])
			r := transport.WorkCompletion{WRID: uint64(o.recv), Status: transport.WC_SUCCESS, Opcode: transport.WC_RECV, ByteLen: uint32(o.length)}
			if o.wr.Opcode == transport.WR_SEND_WITH_IMM {
				r.ImmData, r.HasImm = o.wr.ImmData, true
			}
			srvWCs = append(srvWCs, r)
		case transport.WR_ATOMIC_FETCH_AND_ADD, transport.WR_ATOMIC_CMP_AND_SWP:
			wc.Opcode = transport.WC_FETCH_ADD
			old := binary.LittleEndian.Uint64(srv[o.remote:])
			switch {
			case o.wr.Opcode == transport.WR_ATOMIC_FETCH_AND_ADD:
				binary.LittleEndian.PutUint64(srv[o.remote:], old+o.wr.CompareAdd)
			case old == o.wr.CompareAdd:
				wc.Opcode = transport.WC_COMP_SWAP
				binary.LittleEndian.PutUint64(srv[o.remote:], o.wr.Swap)
			default:
				wc.Opcode = transport.WC_COMP_SWAP
			}
			binary.LittleEndian.PutUint64(cli[o.local:], old)
		}
		cliWCs = append(cliWCs, wc)
	}
	return cli, srv, cliWCs, srvWCs
}
