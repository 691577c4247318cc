package xdp

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// ethtoolChannels is struct ethtool_channels (include/uapi/linux/ethtool.h).
type ethtoolChannels struct {
	Cmd                                         uint32
	MaxRx, MaxTx, MaxOther, MaxCombined         uint32
	RxCount, TxCount, OtherCount, CombinedCount uint32
}

// rxQueues returns how many receive queues the interface has in use (ethtool -l:
// RX plus combined channels), or fallback when the driver does not say. The netlink
// IFLA_NUM_RX_QUEUES attribute counts allocated queues, not active ones (veth
// allocates one per CPU but uses one unless `ethtool -L` says otherwise).
func rxQueues(fd int, name string, fallback int) int {
	ch := ethtoolChannels{Cmd: unix.ETHTOOL_GCHANNELS}
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data uintptr
		_    [16]byte
	}
	copy(ifr.name[:], name)
	ifr.data = uintptr(unsafe.Pointer(&ch))
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); errno != 0 {
		return fallback
	}
	if n := int(ch.RxCount + ch.CombinedCount); n > 0 {
		return n
	}
	return fallback
}
