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
	fmt.Fprintf(os.Stderr, "%s: warning: -m %d runs at %d: %s\n", name0(c.t.name), want.Bytes(), active.Bytes(), c.env.mtuLimit(want, active))
	c.o.mtu = active.Bytes()
}

// mtuLimit says why the port's active_mtu is below want: the interface's MTU (with
// the MTU that would carry want), or the link's own limit.
func (e *env) mtuLimit(want, active roce.MTU) string {
	if ifi, err := net.InterfaceByName(e.ifname); err == nil && roce.MTUFromNetdev(ifi.MTU) < want {
		return fmt.Sprintf("the interface %s's MTU %d gives the port active_mtu %d (rdma_rxe's rule: the largest path MTU 80 bytes under it); raise it to %d or more for %d (ip link set %s mtu %d)",
			ifi.Name, ifi.MTU, active.Bytes(), roce.NetdevMTU(want), want.Bytes(), ifi.Name, roce.NetdevMTU(want))
	}
	if en, ok := e.prov.(*engine); ok {
		if caps := en.dev.Link().Caps(); caps.MaxPathMTUReason != "" {
			return fmt.Sprintf("this link carries path MTU %d at most: %s", active.Bytes(), caps.MaxPathMTUReason)
		}
	}
	return fmt.Sprintf("the port's active_mtu is %d", active.Bytes())
}

// checkPathMTU refuses, before any exchange, a path MTU (pingpong's -m) whose
// packets the link does not carry, saying why and with the fix: both sides then
// fail at once with the cause, where the side that connected second used to see
// only its peer leave the exchange. A path MTU above the port's active_mtu whose
// packets fit is taken, as ibv_rc_pingpong on rdma_rxe takes it (rdma_rxe checks
// max_mtu only: rxe_qp.c rxe_qp_chk_attr): -m 1024 on a 1100-byte interface.
func (e *env) checkPathMTU(want roce.MTU) error {
	en, ok := e.prov.(*engine)
	ifi, err := net.InterfaceByName(e.ifname)
	if !ok || err != nil { // no interface of ours to measure: the port's active_mtu decides
		if active := e.prov.MaxMTU(); active != 0 && want > active {
			return fmt.Errorf("-m %d: %s; or give both sides -m %d", want.Bytes(), e.mtuLimit(want, active), active.Bytes())
		}
		return nil
	}
	if limit := en.dev.Link().Caps(); limit.MaxPathMTU != 0 && want > limit.MaxPathMTU {
		return fmt.Errorf("-m %d: this link carries path MTU %d at most: %s; give both sides -m %d or lower", want.Bytes(), limit.MaxPathMTU.Bytes(), limit.MaxPathMTUReason, limit.MaxPathMTU.Bytes())
	}
	v6 := !e.gid.GID.IsIPv4Mapped()
	need := roce.LargestIPPacket(want, v6)
	if need <= ifi.MTU {
		return nil
	}
	fix := fmt.Sprintf("raise it to %d or more (ip link set %s mtu %d)", roce.NetdevMTUFor(want, v6), ifi.Name, roce.NetdevMTUFor(want, v6))
	if fit := roce.LargestFitting(ifi.MTU, v6); fit != 0 {
		fix += fmt.Sprintf(", or give both sides -m %d", fit.Bytes())
	}
	return fmt.Errorf("-m %d: its longest %s packets are %d bytes, and the interface %s's MTU is %d: %s", want.Bytes(), family(v6), need, ifi.Name, ifi.MTU, fix)
}

// family names an address family: IPv6 when v6, else IPv4.
func family(v6 bool) string {
	if v6 {
		return "IPv6"
	}
	return "IPv4"
}
