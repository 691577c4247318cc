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

// queueCounts returns how many receive and transmit queues the interface has in use
// (ethtool -l: RX, or TX, plus combined channels; the kernel's real_num_rx_queues and
// real_num_tx_queues on veth, include/linux/netdevice.h). A count the driver does not
// give is 1 for receive and the receive count for transmit. The netlink
// IFLA_NUM_RX_QUEUES and IFLA_NUM_TX_QUEUES attributes count allocated queues, not
// active ones (veth allocates one per CPU but uses one unless `ethtool -L` says
// otherwise).
func queueCounts(fd int, name string) (rx, tx int) {
	ch, ok := channels(fd, name)
	rx, tx = int(ch.RxCount+ch.CombinedCount), int(ch.TxCount+ch.CombinedCount)
	if !ok || rx == 0 {
		rx = 1
	}
	if !ok || tx == 0 {
		tx = rx
	}
	return rx, tx
}

// channels reads the interface's ethtool channels (ETHTOOL_GCHANNELS); ok is false
// when the driver does not answer.
func channels(fd int, name string) (ch ethtoolChannels, ok bool) {
	ch = ethtoolChannels{Cmd: unix.ETHTOOL_GCHANNELS}
	var ifr struct {
		name [unix.IFNAMSIZ]byte
		data uintptr
		_    [16]byte
	}
	copy(ifr.name[:], name)
	ifr.data = uintptr(unsafe.Pointer(&ch))
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr)))
	return ch, errno == 0
}
