//go:build verbs

package main

import (
	"fmt"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/transport/verbs"
)

// verbsBuilt reports whether this binary has the verbs provider.
const verbsBuilt = true

// hca is the libibverbs provider: an RDMA device (an HCA, or rdma_rxe) opened by
// name. It remembers what it created so that close can destroy it in order.
type hca struct {
	dev  *verbs.Device
	pd   *verbs.ProtectionDomain
	mrs  []*verbs.MemoryRegion
	cqs  []*verbs.CompletionQueue
	qps  []*verbs.QueuePair
	bufs [][]byte
}

func (h *hca) GIDTable() roce.GIDTable { return h.dev.GIDTable() }
func (h *hca) MaxMTU() roce.MTU        { return h.dev.ActiveMTU() }

func (h *hca) Counters() map[string]uint64 { return h.dev.HWCounters() }

func (h *hca) Alloc(n int) ([]byte, error) {
	b, err := verbs.Alloc(n)
	if err == nil {
		h.bufs = append(h.bufs, b)
	}
	return b, err
}

func (h *hca) RegMR(buf []byte, access transport.Access) (memRegion, error) {
	mr, err := h.pd.RegMR(buf, access)
	if err != nil {
		return nil, err
	}
	h.mrs = append(h.mrs, mr)
	return mr, nil
}

func (h *hca) CreateCQ(depth int) (compQueue, error) {
	cq, err := h.dev.CreateCQ(depth)
	if err != nil {
		return nil, err
	}
	h.cqs = append(h.cqs, cq)
	return cq, nil
}

func (h *hca) CreateQP(send, recv compQueue, cap transport.QPCap) (queuePair, error) {
	s, ok1 := send.(*verbs.CompletionQueue)
	r, ok2 := recv.(*verbs.CompletionQueue)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("verbs: CQs from another provider")
	}
	qp, err := h.pd.CreateQP(verbs.QPInitAttr{SendCQ: s, RecvCQ: r, Cap: cap})
	if err != nil {
		return nil, err
	}
	h.qps = append(h.qps, qp)
	return qp, nil
}

func (h *hca) close() {
	for _, q := range h.qps {
		_ = q.Destroy()
	}
	for _, m := range h.mrs {
		_ = m.Dereg()
	}
	for _, c := range h.cqs {
		_ = c.Destroy()
	}
	for _, b := range h.bufs {
		_ = verbs.Free(b)
	}
	_ = h.pd.Dealloc()
	_ = h.dev.Close()
}

// openVerbs opens the RDMA device named by -d through libibverbs.
func openVerbs(o linkOptions) (*env, error) {
	if o.pcap.path != "" {
		return nil, fmt.Errorf("--pcap records xroce's own link; with --provider verbs the HCA moves the frames: capture them with tcpdump on its netdev (rdma_rxe) or ibdump (mlx5)")
	}
	dev, err := verbs.Open(o.dev)
	if err != nil {
		return nil, err
	}
	pd, err := dev.AllocPD()
	if err != nil {
		dev.Close()
		return nil, err
	}
	h := &hca{dev: dev, pd: pd}
	gid, err := pickGID(dev.GIDTable(), o.gidIndex, o.dev, o.gidFlag)
	if err != nil {
		h.close()
		return nil, err
	}
	return &env{prov: h, gid: gid, stop: atExit(h.close)}, nil
}
