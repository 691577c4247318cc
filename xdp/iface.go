package xdp

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// iface is what both links know about their interface, through a netlink handle
// bound to the interface's network namespace.
type iface struct {
	nl     *netlink.Handle
	name   string
	index  int
	mac    [6]byte
	mtu    int
	queues int // receive queues in use: one AF_XDP socket each
	// txQueues is how many transmit queues are in use. Copy-mode AF_XDP sends
	// nothing from a socket whose queue is not among them (net/xdp/xsk.c,
	// __xsk_generic_xmit), as on a veth made with fewer TX than RX queues.
	txQueues int
	driver   string // ethtool -i's driver name, or "unknown"
	trigger  [2]int // UDP sockets (IPv4, IPv6) used to make the kernel resolve a neighbour
}

// ErrNoInterface is returned when the interface does not exist.
var ErrNoInterface = errors.New("no such network interface")

// noInterface is the error for an interface name this namespace lacks; the
// name may be an RDMA device's (xroce0), which -d of xroce's commands is not.
func noInterface(name string) error {
	return fmt.Errorf("xdp: interface %q: %w in this network namespace (`ip link` lists them): -d names a network interface such as eth0, not an RDMA device such as xroce0", name, ErrNoInterface)
}

// routeHandle opens a netlink handle on NETLINK_ROUTE alone: links, addresses and
// neighbours are all the link needs. netlink.NewHandle() with no family opens every
// family the library knows (XFRM and NETFILTER too), which fails with "protocol not
// supported" on kernels without the xfrm_user or nfnetlink modules (minimal hosts,
// containers, Debian's kernel before they load).
func routeHandle() (*netlink.Handle, error) { return netlink.NewHandle(unix.NETLINK_ROUTE) }

// currentMTU returns the interface's MTU now (SIOCGIFMTU on the trigger socket,
// which costs one ioctl), so that a link whose MTU changes while xroce runs (ip link
// set … mtu 9000) reports the new one, as rdma_rxe follows NETDEV_CHANGEMTU. It
// falls back to the MTU read when the link was opened.
func (i *iface) currentMTU() int {
	fd := i.trigger[0]
	if fd < 0 {
		fd = i.trigger[1]
	}
	if fd < 0 {
		return i.mtu
	}
	ifr, err := unix.NewIfreq(i.name)
	if err != nil || unix.IoctlIfreq(fd, unix.SIOCGIFMTU, ifr) != nil {
		return i.mtu
	}
	return int(ifr.Uint32())
}

// LookupLink returns the Ethernet interface name through the netlink handle nl
// (netlink.Handle{} is the caller's namespace), or an error that names the cause and
// the fix: no such interface (ErrNoInterface), or one without an Ethernet address
// (lo, a tun device), which RoCE cannot run on.
func LookupLink(nl *netlink.Handle, name string) (netlink.Link, error) {
	l, err := nl.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil, noInterface(name)
		}
		return nil, fmt.Errorf("xdp: interface %q: %w", name, err)
	}
	if len(l.Attrs().HardwareAddr) != 6 {
		return nil, fmt.Errorf("xdp: interface %q has no Ethernet address, so no RoCE GIDs: RoCE runs over Ethernet; give -d an Ethernet interface (a NIC, a veth: `ip link` lists them)", name)
	}
	return l, nil
}

// up reports whether the interface is administratively up (IFF_UP, SIOCGIFFLAGS on
// the trigger socket), which copy-mode AF_XDP needs to transmit (net/xdp/xsk.c,
// xsk_xmit: ENETDOWN otherwise); true when it cannot tell.
func (i *iface) up() bool {
	fd := max(i.trigger[0], i.trigger[1])
	if fd < 0 {
		return true
	}
	ifr, err := unix.NewIfreq(i.name)
	if err != nil || unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr) != nil {
		return true
	}
	return ifr.Uint16()&unix.IFF_UP != 0
}

func openIface(name string) (*iface, error) {
	nl, err := routeHandle()
	if err != nil {
		return nil, fmt.Errorf("xdp: netlink: %w", err)
	}
	l, err := LookupLink(nl, name)
	if err != nil {
		nl.Close()
		return nil, err
	}
	a := l.Attrs()
	i := &iface{nl: nl, name: name, index: a.Index, mtu: a.MTU, queues: 1, txQueues: 1, trigger: [2]int{-1, -1}}
	copy(i.mac[:], a.HardwareAddr)
	for k, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		fd, err := unix.Socket(fam, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			// Bind the trigger to the interface so resolution happens on it.
			_ = unix.SetsockoptString(fd, unix.SOL_SOCKET, unix.SO_BINDTODEVICE, name)
			i.trigger[k] = fd
		}
	}
	if i.trigger[0] >= 0 {
		i.queues, i.txQueues = queueCounts(i.trigger[0], name)
	}
	i.driver = driverName(max(i.trigger[0], i.trigger[1]), name)
	return i, nil
}

func (i *iface) close() {
	for _, fd := range i.trigger {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
	i.nl.Close()
}

// addrs lists the interface's IP addresses as linkAddrs does.
func (i *iface) addrs() []netip.Addr {
	l, err := i.nl.LinkByIndex(i.index)
	if err != nil {
		return nil
	}
	out, _ := linkAddrs(i.nl, l)
	return out
}

// linkAddrs lists the IP addresses of l in the kernel's order, leaving out those
// whose duplicate address detection failed, as ib_core's roce_gid_mgmt.c
// (enum_netdev_ipv6_ips) does when it fills the GID table.
func linkAddrs(nl *netlink.Handle, l netlink.Link) ([]netip.Addr, error) {
	list, err := nl.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range list {
		if a.Flags&unix.IFA_F_DADFAILED != 0 {
			continue
		}
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			out = append(out, ip.Unmap())
		}
	}
	return out, nil
}

// GIDTable returns the GID table rdma_rxe shows for the named interface of the
// current network namespace: roce.BuildGIDTable of its MAC and of the addresses
// netlink lists for it (in the kernel's order, without those whose duplicate address
// detection failed). It opens no socket and needs no privilege.
//
// Errors: ErrNoInterface when the interface does not exist; an interface without a
// 6-byte Ethernet address (loopback, tun) has no RoCE GIDs; netlink failures.
func GIDTable(name string) (roce.GIDTable, error) {
	nl, err := routeHandle()
	if err != nil {
		return nil, fmt.Errorf("xdp: netlink: %w", err)
	}
	defer nl.Close()
	l, err := LookupLink(nl, name)
	if err != nil {
		return nil, err
	}
	mac, err := roce.MACFromHardwareAddr(l.Attrs().HardwareAddr)
	if err != nil {
		return nil, err
	}
	addrs, err := linkAddrs(nl, l)
	if err != nil {
		return nil, fmt.Errorf("xdp: addresses of %q: %w", name, err)
	}
	return roce.BuildGIDTable(mac, addrs), nil
}

// Neighbour resolution bounds.
const (
	resolveTimeout = 3 * time.Second
	resolveRetry   = 500 * time.Millisecond
)

// ErrNoNeighbour is returned when a peer's Ethernet address cannot be resolved.
var ErrNoNeighbour = errors.New("no ARP/neighbour answer")

// resolve returns the Ethernet address of ip from the kernel's neighbour table. When
// it is missing, it makes the kernel resolve it (a UDP datagram to the discard port
// of ip, which sends ARP or neighbour solicitation) and polls the table, giving up
// after resolveTimeout.
func (i *iface) resolve(dst netip.Addr) ([6]byte, error) {
	dst = dst.Unmap()
	ip, err := i.nextHop(dst)
	if err != nil {
		return [6]byte{}, err
	}
	fam, k := netlink.FAMILY_V4, 0
	if ip.Is6() {
		fam, k = netlink.FAMILY_V6, 1
	}
	start := time.Now()
	var lastTrigger time.Time
	for {
		neighs, err := i.nl.NeighList(i.index, fam)
		if err != nil {
			return [6]byte{}, fmt.Errorf("xdp: neighbour table of %s: %w", i.name, err)
		}
		for _, n := range neighs {
			if a, ok := netip.AddrFromSlice(n.IP); ok && a.Unmap() == ip && len(n.HardwareAddr) == 6 &&
				n.State&(netlink.NUD_REACHABLE|netlink.NUD_STALE|netlink.NUD_DELAY|netlink.NUD_PROBE|netlink.NUD_PERMANENT|netlink.NUD_NOARP) != 0 {
				var mac [6]byte
				copy(mac[:], n.HardwareAddr)
				return mac, nil
			}
		}
		if time.Since(start) > resolveTimeout {
			if ip != dst {
				return [6]byte{}, fmt.Errorf("xdp: %w from the gateway %s (the route to %s) on %s after %v: is it up?", ErrNoNeighbour, ip, dst, i.name, resolveTimeout)
			}
			return [6]byte{}, fmt.Errorf("xdp: %w from %s on %s after %v: is the peer up and on this link?", ErrNoNeighbour, ip, i.name, resolveTimeout)
		}
		if time.Since(lastTrigger) > resolveRetry && i.trigger[k] >= 0 {
			lastTrigger = time.Now()
			var sa unix.Sockaddr // to dst: the kernel routes it, and resolves its next hop
			if k == 0 {
				sa = &unix.SockaddrInet4{Port: 9, Addr: dst.As4()}
			} else {
				sa = &unix.SockaddrInet6{Port: 9, Addr: dst.As16()}
			}
			_ = unix.Sendto(i.trigger[k], nil, unix.MSG_DONTWAIT, sa)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// nextHop returns where frames to dst go on this interface: dst when the kernel's
// route to it is on-link, the route's gateway otherwise (as rdma_rxe's rxe_net.c
// routes with ip_route_output_key and resolves the route's neighbour). No route,
// or one that leaves through another interface, is an error wrapping
// transport.ErrNoRoute. An IPv6 link-local dst is on this link by definition.
func (i *iface) nextHop(dst netip.Addr) (netip.Addr, error) {
	if dst.Is6() && dst.IsLinkLocalUnicast() {
		return dst, nil
	}
	routes, err := i.nl.RouteGet(dst.AsSlice())
	if err != nil || len(routes) == 0 {
		return netip.Addr{}, fmt.Errorf("xdp: %w to %s in this network namespace (ip route get %s: %v): check the address, or add a route", transport.ErrNoRoute, dst, dst, err)
	}
	r := routes[0]
	if r.LinkIndex != i.index {
		via := fmt.Sprintf("interface %d", r.LinkIndex)
		if l, err := i.nl.LinkByIndex(r.LinkIndex); err == nil {
			via = l.Attrs().Name
		}
		if r.Type == unix.RTN_LOCAL {
			return netip.Addr{}, fmt.Errorf("xdp: %w to %s through %s: it is an address of this host (%s), which RoCE frames on %s cannot reach", transport.ErrNoRoute, dst, i.name, via, i.name)
		}
		return netip.Addr{}, fmt.Errorf("xdp: %w to %s through %s: the route leaves through %s (ip route get %s): run on that interface, or route %s through %s", transport.ErrNoRoute, dst, i.name, via, dst, dst, i.name)
	}
	if gw, ok := netip.AddrFromSlice(r.Gw); ok && r.Gw != nil {
		return gw.Unmap(), nil
	}
	return dst, nil
}
