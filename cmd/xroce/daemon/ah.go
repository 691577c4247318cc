package daemon

import (
	"sync"

	"golang.org/x/sys/unix"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// Address handles (ibv_create_ah) for UD sends. A UD send slot names its address
// handle by the session's handle; the poller resolves it while it takes the slot,
// so the table is shared between the session and the poller. A WR already posted
// keeps its handle's path when the handle is destroyed.

type ahObj struct {
	ah *transport.AH
	pd *pdObj
}

// ahTable is a session's address handles by handle.
type ahTable struct {
	mu sync.Mutex
	m  map[uint32]*ahObj
}

// get returns the address handle h, or nil.
func (t *ahTable) get(h uint32) *transport.AH {
	t.mu.Lock()
	defer t.mu.Unlock()
	if o := t.m[h]; o != nil {
		return o.ah
	}
	return nil
}

func (t *ahTable) set(h uint32, o *ahObj) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if o == nil {
		delete(t.m, h)
	} else {
		t.m[h] = o
	}
}

func (t *ahTable) obj(h uint32) *ahObj {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[h]
}

// noGRH explains an address vector without a GRH, which RoCE cannot route: an
// application sets is_global only when it holds a remote GID that is not all
// zeros, and it has none when it was given no GID index (ibv_rc_pingpong without
// -g, qperf without -cm1), or when its peer was given an index its device lacks
// and sent the empty entry's zeros (rdma_rxe's sysfs reads such an entry as zeros
// too). The message goes to the application whose modify or create failed, which
// may be the side whose own index is right.
const noGRH = "without a GRH (is_global 0): RoCE routes by GID, and this application has no remote GID: " +
	"give both sides a GID index the device has (ibv_rc_pingpong -g 1, perftest -x 1, qperf -cm1; ibv_devinfo -v lists them). " +
	"If this side has one, its peer was given an index its device lacks and sent a GID of zeros. " +
	"qperf's UD and UC tests (ud_bw, ud_lat, uc_bw, uc_lat...) take no -cm1: they address by LID and run on no RoCE device, rdma_rxe's neither"

// createAH resolves an address handle (its GID entry and next hop, as the
// engine's CreateAH does) in a PD of the session.
func (s *session) createAH(r *CreateAHReq) (*Handle, error) {
	pd := s.pds[r.PD]
	if pd == nil {
		return nil, fail(unix.EINVAL, "no PD %d in this session", r.PD)
	}
	if r.PortNum != 1 {
		return nil, fail(unix.EINVAL, "address handle on port %d: the device has port 1 only", r.PortNum)
	}
	if r.IsGlobal == 0 {
		return nil, fail(unix.EINVAL, "address handle %s", noGRH)
	}
	ah, err := pd.pd.CreateAH(transport.AddressHandle{DGID: roce.GID(r.DGID), SGIDIndex: int(r.SGIDIndex),
		TrafficClass: r.TrafficClass, HopLimit: r.HopLimit, FlowLabel: r.FlowLabel})
	if err != nil {
		return nil, fail(unix.EINVAL, "%v", err)
	}
	h := s.handleID()
	s.ahs.set(h, &ahObj{ah: ah, pd: pd})
	pd.refs++
	return &Handle{h}, nil
}

func (s *session) destroyAH(h uint32) error {
	o := s.ahs.obj(h)
	if o == nil {
		return fail(unix.EINVAL, "no address handle %d in this session", h)
	}
	s.ahs.set(h, nil)
	o.pd.refs--
	return nil
}
