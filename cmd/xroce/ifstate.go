package main

import (
	"fmt"
	"net"
	"time"
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
