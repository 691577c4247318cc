package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"net"
	"strings"

	"github.com/spf13/pflag"
	"github.com/vishvananda/netlink"

	"github.com/xroce/xroce/cmd/xroce/daemon"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/xdp"
)

// runGids prints the GID table of an interface like show_gids:
// DEV PORT INDEX GID IPv4 VER DEV.
func runGids(name string, args []string) error {
	return gids(args, os.Stdout)
}

func gids(args []string, w io.Writer) error {
	dev, err := devArg("gids", args, w)
	if err != nil {
		return err
	}
	t, err := xdp.GIDTable(*dev)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV\n")
	fmt.Fprintf(w, "---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---\n")
	for _, e := range t {
		ip4 := ""
		if e.GID.IsIPv4Mapped() {
			ip4 = e.GID.Addr().String()
		}
		fmt.Fprintf(w, "%s\t1\t%d\t%s\t%-14s\t%v\t%s\n", "xroce_"+*dev, e.Index, e.GID.Hex(), ip4, e.Version, *dev)
	}
	fmt.Fprintf(w, "n_gids_found=%d\n", len(t))
	return nil
}

func name0(s string) string { return "xroce " + s }

// devArg parses the flags of a command that takes only an interface: -d NAME, or
// NAME alone.
func devArg(cmd string, args []string, w io.Writer) (*string, error) {
	fs := pflag.NewFlagSet(name0(cmd), pflag.ContinueOnError)
	fs.SetOutput(w)
	dev := fs.StringP("ib-dev", "d", "", "network interface")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil, errUsage
		}
		return nil, err
	}
	if *dev == "" && fs.NArg() == 1 {
		*dev = fs.Arg(0)
	}
	if *dev == "" {
		return nil, fmt.Errorf("give the network interface with -d")
	}
	return dev, nil
}

// runDevinfo prints ibv_devinfo's fields for an interface.
func runDevinfo(name string, args []string) error { return devinfo(args, os.Stdout) }

func devinfo(args []string, w io.Writer) error {
	for _, a := range args {
		if a == "-v" || a == "--verbose" {
			return fmt.Errorf("%s: the device's full attributes (ibv_devinfo -v) come through the verbs library: `xroce daemon -d IFACE`, then `xroce run -- ibv_devinfo -v`", a)
		}
	}
	dev, err := devArg("devinfo", args, w)
	if err != nil {
		return err
	}
	l, err := xdp.LookupLink(&netlink.Handle{}, *dev)
	if err != nil {
		return err
	}
	a := l.Attrs()
	mac, err := roce.MACFromHardwareAddr(a.HardwareAddr)
	if err != nil {
		return err
	}
	// The values the daemon's device reports, rdma_rxe's (daemon.RXEDeviceAttr).
	attr := daemon.RXEDeviceAttr(mac)
	g := attr.NodeGUID
	guid := fmt.Sprintf("%04x:%04x:%04x:%04x", g>>48, g>>32&0xffff, g>>16&0xffff, g&0xffff)
	state := "PORT_DOWN (1)"
	if a.OperState == netlink.OperUp || a.OperState == netlink.OperUnknown && a.Flags&net.FlagUp != 0 {
		state = "PORT_ACTIVE (4)"
	}
	active := roce.MTUFromNetdev(a.MTU)
	fmt.Fprintf(w, "hca_id:\txroce_%s\n", *dev)
	fmt.Fprintf(w, "\ttransport:\t\t\tInfiniBand (0)\n")
	fmt.Fprintf(w, "\tfw_ver:\t\t\t\t%s\n", strings.TrimRight(string(attr.FwVer[:]), "\x00"))
	fmt.Fprintf(w, "\tnode_guid:\t\t\t%s\n", guid)
	fmt.Fprintf(w, "\tsys_image_guid:\t\t\t%s\n", guid)
	fmt.Fprintf(w, "\tvendor_id:\t\t\t0x%04x\n", attr.VendorID)
	fmt.Fprintf(w, "\tvendor_part_id:\t\t\t%d\n", attr.VendorPartID)
	fmt.Fprintf(w, "\thw_ver:\t\t\t\t0x%X\n", attr.HwVer)
	fmt.Fprintf(w, "\tphys_port_cnt:\t\t\t1\n")
	fmt.Fprintf(w, "\t\tport:\t1\n")
	fmt.Fprintf(w, "\t\t\tstate:\t\t\t%s\n", state)
	fmt.Fprintf(w, "\t\t\tmax_mtu:\t\t4096 (5)\n")
	fmt.Fprintf(w, "\t\t\tactive_mtu:\t\t%d (%d)\n", active.Bytes(), active)
	fmt.Fprintf(w, "\t\t\tsm_lid:\t\t\t0\n")
	fmt.Fprintf(w, "\t\t\tport_lid:\t\t0\n")
	fmt.Fprintf(w, "\t\t\tport_lmc:\t\t0x00\n")
	fmt.Fprintf(w, "\t\t\tlink_layer:\t\tEthernet\n")
	if ok, rel := xdp.KernelHasMultiBuffer(); active == roce.MTU4096 && !ok {
		fmt.Fprintf(w, "\t\t\t(over AF_XDP xroce runs path MTUs up to 2048 on Linux %s: 4096 needs multi-buffer AF_XDP, Linux 6.6 or later; see docs/afxdp.md)\n", rel)
	}
	return nil
}
