package main

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/xroce/xroce/roce"
)

// interfaceState returns an error if the network interface name cannot carry
// frames: gone, administratively down, or without carrier (IFF_RUNNING clear: no
// cable, the switch port down, or the other end of a veth pair down).
func interfaceState(name string) error {
	ifi, err := net.InterfaceByName(name)
	switch {
	case err != nil:
		return fmt.Errorf("the interface %s is gone (deleted, or moved to another namespace)", name)
	case ifi.Flags&net.FlagUp == 0:
		return fmt.Errorf("the interface %s is down: bring it up (ip link set %s up)", name, name)
	case ifi.Flags&net.FlagRunning == 0:
		return fmt.Errorf("the interface %s has no carrier: its link is down (a cable, the switch port, or the other end of a veth pair); nothing reaches the peer until it is up", name)
	}
	return nil
}

// mtuState returns an error when the interface's MTU no longer carries the longest
// packets of path MTU pmtu (roce.LargestIPPacket, for IPv6 when v6): it was lowered
// after the QPs were connected, so their frames exceed it (a NIC drops them, the
// peer's veth end too when its MTU is the one lowered). pmtu 0 (not connected
// yet) or a missing interface give nil.
func mtuState(name string, pmtu roce.MTU, v6 bool) error {
	ifi, err := net.InterfaceByName(name)
	if err != nil || pmtu == 0 || roce.LargestIPPacket(pmtu, v6) <= ifi.MTU {
		return nil
	}
	use := "no path MTU's packets"
	if fits := roce.LargestFitting(ifi.MTU, v6); fits != 0 {
		use = fmt.Sprintf("path MTU %d at most", fits.Bytes())
	}
	return fmt.Errorf("the interface %s's MTU is now %d, which carries %s, and this run's path MTU is %d: set it back (ip link set %s mtu %d or more), or run with a smaller -m",
		name, ifi.MTU, use, pmtu.Bytes(), name, roce.NetdevMTUFor(pmtu, v6))
}

// addrState returns an error when the interface name no longer has the address a,
// the source of this run's QPs: removed (ip addr del), so the peer's answers to it
// go nowhere, as rdma_rxe's QP can no longer route from it. A missing interface, an
// invalid or unspecified a, or an IPv6 link-local one (the default GID, made from the MAC whether
// or not the interface has it) give nil.
func addrState(name string, a netip.Addr) error {
	ifi, err := net.InterfaceByName(name)
	if err != nil || !a.IsValid() || a.IsUnspecified() || a.IsLinkLocalUnicast() {
		return nil
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil
	}
	for _, x := range addrs {
		if p, ok := x.(*net.IPNet); ok {
			if b, ok := netip.AddrFromSlice(p.IP); ok && b.Unmap() == a {
				return nil
			}
		}
	}
	return fmt.Errorf("the address %v was removed from the interface %s, and this run's QPs send from it, so no answer reaches them: add it back (ip addr add %v/PREFIX dev %s) and run again",
		a, name, a, name)
}

// linkCheck is interfaceState, mtuState and addrState for c's interface, path MTU
// and source address (nil without an interface). The tools run it while they wait
// for the peer and, during a run whose completions keep coming, every
// linkCheckEvery.
func (c *conn) linkCheck() error {
	if c.env == nil || c.env.ifname == "" {
		return nil
	}
	if err := interfaceState(c.env.ifname); err != nil {
		return err
	}
	if err := mtuState(c.env.ifname, c.mtu, !c.env.gid.GID.IsIPv4Mapped()); err != nil {
		return err
	}
	if err := addrState(c.env.ifname, c.env.gid.GID.Addr()); err != nil {
		return err
	}
	return c.env.engineErr()
}

// linkCheckDue runs linkCheck when linkCheckEvery has passed since it last did.
func (c *conn) linkCheckDue() error {
	if now := time.Now(); now.Sub(c.linkLooked) >= linkCheckEvery {
		c.linkLooked = now
		return c.linkCheck()
	}
	return nil
}

// linkCheckEvery is how often a run whose completions keep coming looks at its
// interface: a lowered MTU leaves a veth carrying the too-long frames it sends.
const linkCheckEvery = time.Second

// checkInterfaceUp refuses to start on an interface that is down, or that has no
// carrier for carrierWait (the kernel reports a new carrier up to a second late: a
// veth pair just set up). A missing interface is left to the link's open, which
// names it.
func checkInterfaceUp(name string) error {
	if _, err := net.InterfaceByName(name); err != nil {
		return nil
	}
	deadline := time.Now().Add(carrierWait)
	for {
		ifi, err := net.InterfaceByName(name)
		if err != nil || ifi.Flags&net.FlagUp == 0 || ifi.Flags&net.FlagRunning != 0 || time.Now().After(deadline) {
			return interfaceState(name)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// carrierWait is how long a tool waits at start for an interface that is up to
// get its carrier.
const carrierWait = 3 * time.Second
