package xdp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/xroce/xroce/bpf"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// UDPConfig opens a UDPLink.
type UDPConfig struct {
	Interface string // the interface whose addresses and MTU the link uses
	Netns     string // network namespace path, or empty for the caller's
}

// UDPLink is a transport.Link on kernel UDP sockets bound to port 4791 (IPv4 and
// IPv6). It needs no privileges beyond binding the port, and works where XDP cannot
// attach. The kernel owns the IP and UDP headers, so on the way out the link sends
// from port 4791 with IPv4 ID 0 (Linux sends DF datagrams of an unconnected socket
// with ID 0, as RFC 6864 allows) and recomputes the ICRC for those headers; on the
// way in it rebuilds the headers around the datagram for the engine. The kernel does
// not tell a UDP socket the IPv4 ID that the sender's ICRC covers, so the ICRC of
// received IPv4 datagrams cannot be checked and is recomputed (the Ethernet FCS
// still guards the link; Caps reports ICRCRecomputed); for IPv6 the rebuilt header
// is exact and the engine checks the ICRC.
type UDPLink struct {
	ifc *iface
	fds []int // IPv4 and IPv6 sockets
	w   *waiter

	mu             sync.Mutex
	closed         bool
	rx             [][]byte
	oob            []byte
	scratch        []byte
	unverifiedICRC uint64
}

// UDPLink buffer sizes: a frame of a 9000-byte MTU with an Ethernet header.
const udpFrameMax = 14 + 9216

// OpenUDP binds UDP port 4791 on the interface's namespace. Errors: the interface
// does not exist (ErrNoInterface), or the port is in use or not allowed.
func OpenUDP(cfg UDPConfig) (*UDPLink, error) {
	l := &UDPLink{oob: make([]byte, 256), scratch: make([]byte, udpFrameMax)}
	err := inNetns(cfg.Netns, func() error {
		var err error
		if l.ifc, err = openIface(cfg.Interface); err != nil {
			return err
		}
		// xroce's XDP program redirects every UDP/4791 frame to its AF_XDP
		// sockets: a UDP socket on the same interface would see none of them.
		if _, name, ok, _ := bpf.Attached(cfg.Interface); ok && name == bpf.ProgramName {
			return fmt.Errorf("xdp: %s: %w: another xroce process is using it over AF_XDP, and its XDP program takes the RoCE frames before this UDP socket can; stop it or use another interface",
				cfg.Interface, bpf.ErrBusy)
		}
		if l.w, err = newWaiter(); err != nil {
			return err
		}
		for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
			fd, err := unix.Socket(fam, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				if fam == unix.AF_INET6 && errors.Is(err, unix.EAFNOSUPPORT) {
					continue
				}
				return fmt.Errorf("xdp: UDP socket: %w", err)
			}
			l.fds = append(l.fds, fd)
			var sa unix.Sockaddr = &unix.SockaddrInet4{Port: roce.UDPPort}
			if fam == unix.AF_INET {
				err = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_PKTINFO, 1)
				if err == nil {
					err = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, unix.IP_PMTUDISC_DO)
				}
			} else {
				sa = &unix.SockaddrInet6{Port: roce.UDPPort}
				err = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 1)
				if err == nil {
					err = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1)
				}
			}
			if err != nil {
				return fmt.Errorf("xdp: UDP socket options: %w", err)
			}
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 8<<20)
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 8<<20)
			if err := unix.Bind(fd, sa); err != nil {
				return fmt.Errorf("xdp: binding UDP port %d: %w (is rdma_rxe or another xroce using it?)", roce.UDPPort, err)
			}
			l.w.watch(fd)
		}
		return nil
	})
	if err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// Send implements transport.Link: each frame's UDP payload goes out through the
// kernel with the frame's source address (IP_PKTINFO) and traffic class.
func (l *UDPLink) Send(frames [][]byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, errClosed
	}
	var notSent *transport.NotSentError
	for i, f := range frames {
		if len(f) > len(l.scratch) {
			return i, fmt.Errorf("%w: %d bytes", ErrFrameTooLong, len(f))
		}
		b := l.scratch[:len(f)]
		copy(b, f)
		var p roce.Packet
		if err := p.Decode(b); err != nil && err != roce.ErrBadICRC {
			return i, fmt.Errorf("xdp: UDP link: sending a frame that does not decode: %w", err)
		}
		// The kernel will send from port 4791 with IPv4 ID 0: make the ICRC match.
		binary.BigEndian.PutUint16(b[p.L4Off:], roce.UDPPort)
		var fd int
		var to unix.Sockaddr
		var oob []byte
		if p.IsIPv6 {
			fd = l.fds[len(l.fds)-1]
			to = &unix.SockaddrInet6{Port: roce.UDPPort, Addr: p.IPv6.Dst}
			oob = cmsg6(p.IPv6.Src, p.IPv6.TrafficClass)
		} else {
			binary.BigEndian.PutUint16(b[p.L3Off+4:], 0)
			fd = l.fds[0]
			to = &unix.SockaddrInet4{Port: roce.UDPPort, Addr: p.IPv4.Dst}
			oob = cmsg4(p.IPv4.Src, p.IPv4.TOS)
		}
		if err := roce.FinishFrame(b); err != nil {
			return i, fmt.Errorf("xdp: UDP link: %w", err)
		}
		if _, err := unix.SendmsgN(fd, b[p.L4Off+8:p.ICRCOff+roce.ICRCLen], oob, to, unix.MSG_DONTWAIT); err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.ENOBUFS) {
				return i, notSentErr(notSent) // busy: the engine resends after its adaptive delay
			}
			if !passing(err) {
				return i, fmt.Errorf("xdp: UDP send to %v: %w", p.DstAddr(), err)
			}
			if notSent == nil {
				notSent = &transport.NotSentError{Err: fmt.Errorf("xdp: UDP send to %v: %w", p.DstAddr(), err)}
			}
			notSent.Dropped++
		}
	}
	return len(frames), notSentErr(notSent)
}

// passing reports whether a sendmsg error drops the datagram for a reason that may
// pass, as a network drops a packet: the interface down, no route, no neighbour
// (ARP or ND failed).
func passing(err error) bool {
	return errors.Is(err, unix.ENETDOWN) || errors.Is(err, unix.ENETUNREACH) || errors.Is(err, unix.EHOSTUNREACH)
}

// notSentErr returns e as an error, nil when e is nil.
func notSentErr(e *transport.NotSentError) error {
	if e == nil {
		return nil
	}
	return e
}

// cmsg4 and cmsg6 build the control messages that choose a datagram's source
// address (IP_PKTINFO / IPV6_PKTINFO) and its TOS / traffic class.
func cmsg4(src [4]byte, tos uint8) []byte {
	info := unix.Inet4Pktinfo{Spec_dst: src}
	return pktinfoCmsg(unix.IPPROTO_IP, unix.IP_PKTINFO, unsafe.Slice((*byte)(unsafe.Pointer(&info)), unix.SizeofInet4Pktinfo), unix.IP_TOS, tos)
}

func cmsg6(src [16]byte, tclass uint8) []byte {
	info := unix.Inet6Pktinfo{Addr: src}
	return pktinfoCmsg(unix.IPPROTO_IPV6, unix.IPV6_PKTINFO, unsafe.Slice((*byte)(unsafe.Pointer(&info)), unix.SizeofInet6Pktinfo), unix.IPV6_TCLASS, tclass)
}

// pktinfoCmsg lays out two control messages of one level: the packet-info structure
// and a 4-byte class value.
func pktinfoCmsg(level, infoType int, info []byte, classType int, class uint8) []byte {
	b := make([]byte, unix.CmsgSpace(len(info))+unix.CmsgSpace(4))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = int32(level), int32(infoType)
	h.SetLen(unix.CmsgLen(len(info)))
	copy(b[unix.CmsgLen(0):], info)
	o := unix.CmsgSpace(len(info))
	h = (*unix.Cmsghdr)(unsafe.Pointer(&b[o]))
	h.Level, h.Type = int32(level), int32(classType)
	h.SetLen(unix.CmsgLen(4))
	binary.NativeEndian.PutUint32(b[o+unix.CmsgLen(0):], uint32(class))
	return b
}

// Recv implements transport.Link: datagrams become Ethernet frames again.
func (l *UDPLink) Recv(frames [][]byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return 0, errClosed
	}
	for len(l.rx) < len(frames) {
		l.rx = append(l.rx, make([]byte, udpFrameMax))
	}
	got := 0
	for k, fd := range l.fds {
		v6 := k == 1
		hdr := 14 + 20 + 8
		if v6 {
			hdr = 14 + 40 + 8
		}
		for got < len(frames) {
			buf := l.rx[got]
			n, oobn, _, from, err := unix.Recvmsg(fd, buf[hdr:], l.oob, unix.MSG_DONTWAIT)
			if err != nil {
				if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
					break
				}
				return got, fmt.Errorf("xdp: UDP receive: %w", err)
			}
			dst, ok := pktinfoDst(l.oob[:oobn])
			if !ok {
				continue
			}
			f := buf[:hdr+n]
			if !l.rebuild(f, from, dst, n, v6) {
				continue
			}
			frames[got] = f
			got++
		}
	}
	return got, nil
}

// rebuild writes Ethernet, IP and UDP headers in front of a received datagram.
func (l *UDPLink) rebuild(f []byte, from unix.Sockaddr, dst netip.Addr, n int, v6 bool) bool {
	copy(f[0:6], l.ifc.mac[:])
	clear(f[6:12])
	ip := f[14:]
	var src netip.Addr
	var sport int
	switch sa := from.(type) {
	case *unix.SockaddrInet4:
		src, sport = netip.AddrFrom4(sa.Addr), sa.Port
	case *unix.SockaddrInet6:
		src, sport = netip.AddrFrom16(sa.Addr), sa.Port
	default:
		return false
	}
	var udp []byte
	if v6 {
		binary.BigEndian.PutUint16(f[12:], roce.EtherTypeIPv6)
		binary.BigEndian.PutUint32(ip[0:4], 6<<28)
		binary.BigEndian.PutUint16(ip[4:6], uint16(8+n))
		ip[6], ip[7] = 17, 64
		s, d := src.As16(), dst.As16()
		copy(ip[8:24], s[:])
		copy(ip[24:40], d[:])
		udp = ip[40:]
	} else {
		binary.BigEndian.PutUint16(f[12:], roce.EtherTypeIPv4)
		ip[0], ip[1] = 0x45, 0
		binary.BigEndian.PutUint16(ip[2:4], uint16(20+8+n))
		binary.BigEndian.PutUint32(ip[4:8], 0x00004000) // ID 0, DF
		ip[8], ip[9] = 64, 17
		binary.BigEndian.PutUint16(ip[10:12], 0)
		s, d := src.Unmap().As4(), dst.Unmap().As4()
		copy(ip[12:16], s[:])
		copy(ip[16:20], d[:])
		udp = ip[20:]
	}
	binary.BigEndian.PutUint16(udp[0:2], uint16(sport))
	binary.BigEndian.PutUint16(udp[2:4], roce.UDPPort)
	binary.BigEndian.PutUint16(udp[4:6], uint16(8+n))
	binary.BigEndian.PutUint16(udp[6:8], 0)
	if !v6 {
		// The sender's IPv4 ID is unknown: the ICRC cannot be checked, only made
		// consistent. A datagram that is not RoCE at all still fails in the engine.
		if roce.FinishFrame(f) == nil {
			l.unverifiedICRC++
		}
	}
	return true
}

// pktinfoDst returns the destination address from an IP_PKTINFO or IPV6_PKTINFO
// control message.
func pktinfoDst(oob []byte) (netip.Addr, bool) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return netip.Addr{}, false
	}
	for _, m := range msgs {
		switch {
		case m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_PKTINFO && len(m.Data) >= unix.SizeofInet4Pktinfo:
			info := (*unix.Inet4Pktinfo)(unsafe.Pointer(&m.Data[0]))
			return netip.AddrFrom4(info.Addr), true
		case m.Header.Level == unix.IPPROTO_IPV6 && m.Header.Type == unix.IPV6_PKTINFO && len(m.Data) >= unix.SizeofInet6Pktinfo:
			info := (*unix.Inet6Pktinfo)(unsafe.Pointer(&m.Data[0]))
			return netip.AddrFrom16(info.Addr), true
		}
	}
	return netip.Addr{}, false
}

// Wait implements transport.Link.
func (l *UDPLink) Wait(deadline time.Time) error { return l.w.wait(deadline) }

// Wake implements transport.Link.
func (l *UDPLink) Wake() { l.w.wake() }

// MTU implements transport.Link.
func (l *UDPLink) MTU() int { return l.ifc.currentMTU() }

// Caps implements transport.Link: any path MTU the interface's MTU allows; the ICRC
// of received IPv4 datagrams is recomputed (see UDPLink and UnverifiedICRC).
func (l *UDPLink) Caps() transport.LinkCaps { return transport.LinkCaps{ICRCRecomputed: true} }

// HardwareAddr implements transport.Link.
func (l *UDPLink) HardwareAddr() [6]byte { return l.ifc.mac }

// Addrs implements transport.Link.
func (l *UDPLink) Addrs() []netip.Addr { return l.ifc.addrs() }

// Resolve implements transport.Link. The kernel resolves neighbours for UDP sockets
// and the engine's Ethernet addresses are not used on this link; a peer that no
// route reaches through the interface is refused here (transport.ErrNoRoute), as
// on the AF_XDP link, instead of at every sendto.
func (l *UDPLink) Resolve(ip netip.Addr) ([6]byte, error) {
	_, err := l.ifc.nextHop(ip.Unmap())
	return [6]byte{}, err
}

// UnverifiedICRC counts received IPv4 datagrams whose ICRC could not be checked.
func (l *UDPLink) UnverifiedICRC() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.unverifiedICRC
}

// Close closes the sockets.
func (l *UDPLink) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	for _, fd := range l.fds {
		unix.Close(fd)
	}
	if l.w != nil {
		l.w.close()
	}
	if l.ifc != nil {
		l.ifc.close()
	}
	return nil
}
