package daemon

import (
	"encoding/binary"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// Source is what the daemon serves: one device with one port.
type Source interface {
	Name() string
	Ifname() string
	Ifindex() int
	DeviceAttr() DeviceAttr
	PortAttr() PortAttr
	GIDTable() roce.GIDTable
	// Counters are rdma_rxe's hw_counters, in transport.CounterNames order.
	Counters() []Counter
}

// Counter is one named counter.
type Counter struct {
	Name  string
	Value uint64
}

// Device capability bits (enum ibv_device_cap_flags, rdma-core libibverbs/verbs.h).
const (
	capBadPkeyCntr      = 1 << 1
	capBadQkeyCntr      = 1 << 2
	capAutoPathMig      = 1 << 4
	capChangePhyPort    = 1 << 5
	capUDAVPortEnforce  = 1 << 6
	capPortActiveEvent  = 1 << 10
	capSysImageGUID     = 1 << 11
	capRCRNRNAKGen      = 1 << 12
	capSRQResize        = 1 << 13
	capMemMgtExtensions = 1 << 21
)

// NodeGUID is the node GUID rdma_rxe derives from the netdev's MAC (the modified
// EUI-64 of the link-local GID's interface identifier; drivers/infiniband/sw/rxe
// rxe.c uses addrconf_addr_eui48): 52:54:00:81:00:0b gives 5054:00ff:fe81:000b.
func NodeGUID(mac [6]byte) uint64 {
	g := roce.LinkLocalGID(mac)
	return binary.BigEndian.Uint64(g[8:])
}

// RXEDeviceAttr returns the device attributes rdma_rxe reports on Debian 12's
// kernel (6.1; ibv_devinfo -v on rxe0, recorded in docs/verbs-library.md, with
// vendor_id 0xffffff from rxe_param.h's RXE_VENDOR_ID), except what the engine does
// not have: memory windows (MEM_WINDOW, MEM_WINDOW_TYPE_2B, max_mw), which are
// reported absent. Shared receive queues are rxe's: SRQ_RESIZE, max_srq 917503,
// max_srq_wr 1048576, max_srq_sge 27.
func RXEDeviceAttr(mac [6]byte) DeviceAttr {
	flags := uint32(capBadPkeyCntr | capBadQkeyCntr | capAutoPathMig | capChangePhyPort |
		capUDAVPortEnforce | capPortActiveEvent | capSysImageGUID | capRCRNRNAKGen | capSRQResize | capMemMgtExtensions)
	a := DeviceAttr{
		NodeGUID:              NodeGUID(mac),
		SysImageGUID:          NodeGUID(mac),
		MaxMRSize:             ^uint64(0),
		PageSizeCap:           0xfffff000,
		VendorID:              0xffffff,
		MaxQP:                 1048560,
		MaxQPWR:               transport.MaxQPWR,
		DeviceCapFlags:        flags,
		MaxSGE:                transport.MaxSGE,
		MaxSGERd:              transport.MaxSGE,
		MaxCQ:                 1048576,
		MaxCQE:                transport.MaxCQE,
		MaxMR:                 524287,
		MaxPD:                 1048576,
		MaxQPRdAtom:           transport.MaxQPRdAtom,
		MaxResRdAtom:          258048,
		MaxQPInitRdAtom:       transport.MaxQPRdAtom,
		AtomicCap:             1, // IBV_ATOMIC_HCA
		MaxMcastGrp:           8192,
		MaxMcastQPAttach:      56,
		MaxTotalMcastQPAttach: 458752,
		MaxAH:                 32767,
		MaxSRQ:                917503,
		MaxSRQWR:              transport.MaxSRQWR,
		MaxSRQSGE:             transport.MaxSRQSGE,
		MaxPkeys:              64,
		LocalCAAckDelay:       15,
		PhysPortCnt:           1,
		DeviceCapFlagsEx:      uint64(flags),
		NumCompVectors:        1,
	}
	copy(a.FwVer[:], "0.0.0")
	return a
}

// Port attribute values (rdma-core libibverbs/verbs.h enums).
const (
	PortDown         = 1 // IBV_PORT_DOWN
	PortActive       = 4 // IBV_PORT_ACTIVE
	PhysStateDisable = 3 // IB_PORT_PHYS_STATE_DISABLED
	PhysStateLinkUp  = 5 // IB_PORT_PHYS_STATE_LINK_UP
	LinkLayerEth     = 2 // IBV_LINK_LAYER_ETHERNET
	GIDTableLen      = 1024
)

// RXEPortAttr returns port 1's attributes as rdma_rxe reports them for a netdev
// (rxe_verbs.c rxe_query_port and rxe_param.h's port defaults): ACTIVE and
// LINK_UP when the netdev is up with carrier, max_mtu 4096, active_mtu from the
// netdev MTU — here capped at what the link carries (over AF_XDP, 2048) so that
// applications that copy active_mtu into their QPs get a path MTU that works —,
// port_cap_flags 0x00010000, max_msg_sz 8 MiB, a 1-entry P_Key table, a 1024-entry
// GID table, and width and speed from the netdev's speed as ib_get_eth_speed
// (drivers/infiniband/core/verbs.c, 6.1) maps it.
//
// A netdev MTU too small for any path MTU (under 336 bytes) reports active_mtu 256,
// as rxe_set_mtu does (rxe.c: "mtu ? min(mtu, IB_MTU_4096) : IB_MTU_256").
func RXEPortAttr(up bool, active roce.MTU, speedMbps int) PortAttr {
	if active == 0 {
		active = roce.MTU256
	}
	p := PortAttr{
		State: PortDown, MaxMTU: uint32(roce.MTU4096), ActiveMTU: uint32(active),
		GIDTblLen: GIDTableLen, PortCapFlags: 0x00010000, MaxMsgSz: 0x800000,
		PkeyTblLen: 1, MaxVLNum: 1, PhysState: PhysStateDisable, LinkLayer: LinkLayerEth,
	}
	if up {
		p.State, p.PhysState = PortActive, PhysStateLinkUp
	}
	p.ActiveWidth, p.ActiveSpeed = EthSpeed(speedMbps)
	return p
}

// EthSpeed maps a netdev speed in Mb/s to an IB width and speed the way Linux
// 6.1's ib_get_eth_speed does (unknown speed counts as 1000): it returns the verbs
// encodings (width 1 = 1X, 2 = 4X; speed 1 = SDR, 2 = DDR, 8 = FDR10, 32 = EDR).
func EthSpeed(mbps int) (width, speed uint8) {
	const w1x, w4x = 1, 2
	const sdr, ddr, fdr10, edr = 1, 2, 8, 32
	if mbps <= 0 {
		mbps = 1000
	}
	switch {
	case mbps <= 1000:
		return w1x, sdr
	case mbps <= 10000:
		return w1x, fdr10
	case mbps <= 20000:
		return w4x, ddr
	case mbps <= 25000:
		return w1x, edr
	case mbps <= 40000:
		return w4x, fdr10
	default:
		return w4x, edr
	}
}

// EngineSource serves a transport.Device on its link's interface.
type EngineSource struct {
	DevName string
	Iface   string
	Dev     *transport.Device
	// LinkCounters, when set, returns the link's own counters (LinkCounterPrefix
	// and the kernel's name: what AF_XDP dropped before the engine took it), which
	// Counters lists after the engine's.
	LinkCounters func() []Counter
	mac          [6]byte
	index        int
}

// LinkCounterPrefix starts the names of the counters of the link under the
// engine (EngineSource.LinkCounters): "xsk_" and a field of the kernel's struct
// xdp_statistics (include/uapi/linux/if_xdp.h), summed over the AF_XDP sockets.
const LinkCounterPrefix = "xsk_"

// NewEngineSource describes dev, which runs on the network interface iface.
func NewEngineSource(name, iface string, dev *transport.Device) (*EngineSource, error) {
	l, err := netlink.LinkByName(iface)
	if err != nil {
		return nil, err
	}
	return &EngineSource{DevName: name, Iface: iface, Dev: dev, mac: dev.Link().HardwareAddr(), index: l.Attrs().Index}, nil
}

// Name implements Source.
func (e *EngineSource) Name() string { return e.DevName }

// Ifname implements Source.
func (e *EngineSource) Ifname() string { return e.Iface }

// Ifindex implements Source.
func (e *EngineSource) Ifindex() int { return e.index }

// DeviceAttr implements Source.
func (e *EngineSource) DeviceAttr() DeviceAttr { return RXEDeviceAttr(e.mac) }

// PortAttr implements Source: the netdev's state and speed are read at each query.
func (e *EngineSource) PortAttr() PortAttr {
	up := false
	if l, err := netlink.LinkByIndex(e.index); err == nil {
		a := l.Attrs()
		up = a.OperState == netlink.OperUp || a.OperState == netlink.OperUnknown && a.Flags&net.FlagUp != 0
	}
	return RXEPortAttr(up, e.Dev.MaxPathMTU(), netdevSpeed(e.Iface))
}

// netdevSpeed reads the netdev's speed in Mb/s from sysfs; 0 when unknown.
func netdevSpeed(iface string) int {
	b, err := os.ReadFile("/sys/class/net/" + iface + "/speed")
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return n
}

// GIDTable implements Source.
func (e *EngineSource) GIDTable() roce.GIDTable { return e.Dev.GIDTable() }

// Counters implements Source.
func (e *EngineSource) Counters() []Counter {
	m := e.Dev.Counters().Map()
	out := make([]Counter, 0, len(transport.CounterNames))
	for _, n := range transport.CounterNames {
		out = append(out, Counter{n, m[n]})
	}
	if e.LinkCounters != nil {
		out = append(out, e.LinkCounters()...)
	}
	return out
}
