package main

import (
	"fmt"
	"net"
	"os"

	"github.com/xroce/xroce/roce"
)

// activeMTU lowers -m to the port's active_mtu when it is higher, as perftest's
// set_mtu does (src/perftest_parameters.c, with its two lines on stdout), and says
// on stderr why the port carries no more: the interface's MTU, or the link's own
// limit.
func (c *conn) activeMTU() {
	want, err := roce.MTUFromBytes(c.o.mtu)
	active := c.env.prov.MaxMTU()
	if c.o.mtu == 0 || err != nil || active == 0 || want <= active {
		return
	}
	fmt.Fprintf(c.o.out, "Requested mtu is higher than active mtu \nChanging to active mtu - %d\n", active.Bytes())
	fmt.Fprintf(os.Stderr, "%s: -m %d: %s\n", name0(c.t.name), want.Bytes(), c.env.mtuLimit(want, active))
	c.o.mtu = active.Bytes()
}

// mtuLimit says why the port's active_mtu is below want: the interface's MTU (with
// the MTU that would carry want), or the link's own limit.
func (e *env) mtuLimit(want, active roce.MTU) string {
	if ifi, err := net.InterfaceByName(e.ifname); err == nil && roce.MTUFromNetdev(ifi.MTU) < want {
		return fmt.Sprintf("the interface %s's MTU %d carries path MTU %d at most; raise it to %d or more for %d (ip link set %s mtu %d)",
			ifi.Name, ifi.MTU, active.Bytes(), roce.NetdevMTU(want), want.Bytes(), ifi.Name, roce.NetdevMTU(want))
	}
	if en, ok := e.prov.(*engine); ok {
		if caps := en.dev.Link().Caps(); caps.MaxPathMTUReason != "" {
			return fmt.Sprintf("this link carries path MTU %d at most: %s", active.Bytes(), caps.MaxPathMTUReason)
		}
	}
	return fmt.Sprintf("the port's active_mtu is %d", active.Bytes())
}

// checkPathMTU refuses, before any exchange, a path MTU (pingpong's -m) above the
// port's active_mtu, saying why the port carries no more and with the fix: both
// sides then fail at once with the cause, where the side that connected second
// used to see only its peer leave the exchange.
func (e *env) checkPathMTU(want roce.MTU) error {
	if active := e.prov.MaxMTU(); active != 0 && want > active {
		return fmt.Errorf("-m %d: %s; or give both sides -m %d", want.Bytes(), e.mtuLimit(want, active), active.Bytes())
	}
	return nil
}
