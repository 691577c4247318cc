package interop

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLibChecks runs the lib cells' checks on outputs recorded from passing runs
// (testdata/libcells: host through the library, guest on rdma_rxe) and on
// altered copies, without a guest: a correct run passes, and each alteration
// (the size, a "Couldn't" line, a library message, the device, the peer, a
// client left in the daemon, no packets, a datagram in the kernel's stack, an
// unclean daemon exit) fails with its reason.
func TestLibChecks(t *testing.T) {
	lab := &Lab{XIf: "xx0a0b0c", XIP: netip.MustParseAddr("10.81.0.1"), GuestIP: netip.MustParseAddr("10.81.0.11")}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("testdata", "libcells", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	status := "xroce0\tnetdev xx0a0b0c\tnode_guid 5054:00ff:fe81:000b\tport 1 PORT_ACTIVE\tactive_mtu 1024\t/tmp/x/xroce0.sock\n" +
		"  clients: 0\n  counters:\n    sent_pkts                610\n    rcvd_pkts                39040\n    rdma_recvs               610\n"
	daemonLog := "xroce daemon: 2026/12/01 11:00:00 serving xroce0 on xx0a0b0c (xdp native, copy, multi-buffer, 1 queue, 2 GIDs) at /tmp/x/xroce0.sock\n" +
		"xroce daemon: 2026/12/01 11:00:09 xroce0 stopped\n"
	base := []struct {
		c          cell
		xout, gout string
	}{
		{cell{tool: "write_bw", size: 65536, mtu: 1500, link: "xdp", lib: true}, read("write_bw-host-server.txt"), read("write_bw-guest-client.txt")},
		{cell{tool: "read_lat", size: 64, mtu: 1500, link: "xdp", lib: true, xroceClient: true}, read("read_lat-host-client.txt"), read("read_lat-guest-server.txt")},
		{cell{tool: "pingpong", size: 4096, mtu: 1500, link: "xdp", lib: true}, read("pingpong-host-server.txt"), read("pingpong-guest-client.txt")},
	}
	for _, b := range base {
		r := libRun{xout: b.xout, gout: b.gout, status: status, daemonLog: daemonLog}
		if err := b.c.checkLib(lab, r); err != nil {
			t.Errorf("%v: the recorded run fails the checks: %v", b.c, err)
		}
		for _, alt := range []struct {
			what string
			f    func(r *libRun, c *cell)
			want string
		}{
			{"another size", func(r *libRun, c *cell) { c.size *= 2 }, "bytes"},
			{"a Couldn't line", func(r *libRun, c *cell) { r.gout += "Couldn't read remote address\n" }, "Couldn't"},
			{"a library message", func(r *libRun, c *cell) { r.xout = "xroce: the daemon refused modify QP\n" + r.xout }, "the library on the host"},
			{"a client left", func(r *libRun, c *cell) { r.status = strings.Replace(r.status, "clients: 0", "clients: 1", 1) }, "no clients"},
			{"no packets", func(r *libRun, c *cell) {
				r.status = strings.Replace(r.status, "    rcvd_pkts                39040\n", "", 1)
			}, "packets sent and received"},
			{"frames in the kernel's stack", func(r *libRun, c *cell) { r.noPorts = 3 }, "UdpNoPorts grew by 3"},
			{"an unclean stop", func(r *libRun, c *cell) { r.daemonLog = strings.Replace(r.daemonLog, "stopped", "", 1) }, "xroce daemon"},
		} {
			r, c := r, b.c
			alt.f(&r, &c)
			err := c.checkLib(lab, r)
			if err == nil || !strings.Contains(err.Error(), alt.want) {
				t.Errorf("%v with %s: %v, want an error with %q", b.c, alt.what, err, alt.want)
			}
		}
	}
	// The device in perftest's header and the peer's GID in rc_pingpong's.
	r := libRun{xout: strings.Replace(base[0].xout, "Device         : xroce0", "Device         : rxe0", 1), gout: base[0].gout, status: status, daemonLog: daemonLog}
	if err := base[0].c.checkLib(lab, r); err == nil || !strings.Contains(err.Error(), `no "Device         : xroce0\n"`) {
		t.Errorf("write_bw on another host device: %v", err)
	}
	r = libRun{xout: strings.ReplaceAll(base[2].xout, "::ffff:10.81.0.11", "::ffff:10.81.0.12"), gout: base[2].gout, status: status, daemonLog: daemonLog}
	if err := base[2].c.checkLib(lab, r); err == nil || !strings.Contains(err.Error(), "remote address") {
		t.Errorf("pingpong with another peer: %v", err)
	}
}

// TestPerftestRaced: the client output of the run that lost perftest 4.5-0.17's
// race (write_lat -R, xroce client, 2026-12-01; the guest's client, 2026-12-03) is
// recognised for perftest's -R cells only, and other failures are not.
func TestPerftestRaced(t *testing.T) {
	const raced = "RDMA CM event error:\nEvent: RDMA_CM_EVENT_REJECTED; error: 8.\n\nERRNO: No such file or directory.\n" +
		"Failed to handle RDMA CM event.\nERRNO: No such file or directory.\nFailed to connect RDMA CM events.\n"
	const guestRaced = "RDMA CM event error:\nEvent: RDMA_CM_EVENT_REJECTED; error: 8.\n\nERRNO: Operation not supported.\n" +
		"Failed to handle RDMA CM event.\nERRNO: Operation not supported.\nFailed to connect RDMA CM events.\n" +
		"ERRNO: Operation not supported.\nSegmentation fault\n"
	cm := cell{tool: "write_lat", size: 64, mtu: 1500, link: "xdp", lib: true, xroceClient: true, flags: "-R"}
	for _, tc := range []struct {
		c    cell
		out  string
		want bool
	}{
		{cm, raced, true},
		{cm, strings.Replace(raced, "error: 8.", "error: 28.", 1), false},
		{cm, strings.Replace(raced, "REJECTED", "UNREACHABLE", 1), false},
		{cell{tool: "write_lat", size: 64, mtu: 1500, link: "xdp", lib: true, xroceClient: true}, raced, false},
		{cell{tool: "rping", size: 64, mtu: 1500, link: "xdp", lib: true, xroceClient: true, flags: "-R"}, raced, false},
		// The guest's client on rdma_rxe, xroce the server (write_lat -R, 2026-12-03):
		// the same race, which the matrix now runs again too.
		{cell{tool: "write_lat", size: 64, mtu: 1500, link: "xdp", lib: true, flags: "-R"}, guestRaced, true},
	} {
		if got := tc.c.perftestRaced(tc.out); got != tc.want {
			t.Errorf("%v on %q: %v, want %v", tc.c, tc.out[:60], got, tc.want)
		}
	}
	if b := cm.perftestBinary(); b != "ib_write_lat" {
		t.Errorf("perftestBinary %q", b)
	}
}
