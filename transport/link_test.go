package transport_test

import (
	"net/netip"
	"testing"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/test/testlink"
	"github.com/xroce/xroce/transport"
)

// TestPathMTULimits: QueuePair.Modify refuses a path MTU above the link's
// Caps().MaxPathMTU with the link's reason, and one whose longest packets its
// netdev MTU does not carry, naming the fix; it takes any other, above the port's
// active MTU too, as rdma_rxe does.
func TestPathMTULimits(t *testing.T) {
	for _, c := range []struct {
		mtu  int
		caps transport.LinkCaps
		pmtu roce.MTU
		err  string // "" for success
	}{
		{9000, transport.LinkCaps{}, roce.MTU4096, ""},
		{9000, transport.LinkCaps{MaxPathMTU: roce.MTU2048, MaxPathMTUReason: "one chunk per frame"}, roce.MTU2048, ""},
		{9000, transport.LinkCaps{MaxPathMTU: roce.MTU2048, MaxPathMTUReason: "one chunk per frame"}, roce.MTU4096,
			"transport: QP 0x11: path MTU 4096 is not supported on this link (at most 2048): one chunk per frame"},
		{1500, transport.LinkCaps{}, roce.MTU1024, ""},
		{1500, transport.LinkCaps{}, roce.MTU2048,
			"transport: QP 0x11: path MTU 2048 makes IPv4 packets of up to 2116 bytes, more than the link's MTU 1500 carries: use path MTU 1024 or lower, or raise the link's MTU to 2128 or more"},
		// rdma_rxe takes a path MTU above the port's active MTU (512 on a 1100-byte
		// netdev) when it is at most max_mtu; its 1092-byte IPv4 packets fit.
		{1100, transport.LinkCaps{}, roce.MTU1024, ""},
		{1091, transport.LinkCaps{}, roce.MTU1024,
			"transport: QP 0x11: path MTU 1024 makes IPv4 packets of up to 1092 bytes, more than the link's MTU 1091 carries: use path MTU 512 or lower, or raise the link's MTU to 1104 or more"},
		{300, transport.LinkCaps{}, roce.MTU256,
			"transport: QP 0x11: path MTU 256 makes IPv4 packets of up to 324 bytes, more than the link's MTU 300 carries: raise the link's MTU to 336 or more"},
		{1500, transport.LinkCaps{MaxPathMTU: roce.MTU2048}, roce.MTU2048,
			"transport: QP 0x11: path MTU 2048 makes IPv4 packets of up to 2116 bytes, more than the link's MTU 1500 carries: use path MTU 1024 or lower, or raise the link's MTU to 2128 or more"},
	} {
		end, _ := transport.NewPipe(transport.PipeConfig{MAC: macA, Addrs: []netip.Addr{addrA}, MTU: c.mtu, Caps: c.caps},
			transport.PipeConfig{MAC: macB, Addrs: []netip.Addr{addrB}})
		if got := end.Caps(); got != c.caps {
			t.Errorf("PipeEnd.Caps() = %+v, want %+v", got, c.caps)
		}
		dev, err := transport.Open(end, transport.Options{Clock: transport.NewFakeClock()})
		must(t, err)
		cq := dev.CreateCQ(16)
		qp, err := dev.AllocPD().CreateQP(transport.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: transport.QPCap{MaxSendWR: 4, MaxRecvWR: 4}})
		must(t, err)
		must(t, qp.Modify(transport.QPAttr{State: transport.QPS_INIT}, transport.QP_STATE|transport.QP_ACCESS_FLAGS))
		err = qp.Modify(transport.QPAttr{State: transport.QPS_RTR, PathMTU: c.pmtu, DestQPN: 0x22,
			AH: transport.AddressHandle{DGID: roce.GIDFromAddr(addrB), SGIDIndex: 1}},
			transport.QP_STATE|transport.QP_AV|transport.QP_PATH_MTU|transport.QP_DEST_QPN|transport.QP_RQ_PSN|
				transport.QP_MAX_DEST_RD_ATOMIC|transport.QP_MIN_RNR_TIMER)
		switch {
		case c.err == "" && err != nil:
			t.Errorf("MTU %d, caps %+v, path MTU %d: %v", c.mtu, c.caps, c.pmtu.Bytes(), err)
		case c.err != "" && (err == nil || err.Error() != c.err):
			t.Errorf("MTU %d, caps %+v, path MTU %d: error %v, want %q", c.mtu, c.caps, c.pmtu.Bytes(), err, c.err)
		}
		must(t, dev.Close())
	}
}

// TestReserveRx: each QP created asks a link that holds receive buffers
// (transport.RxReserver, the AF_XDP link) for MaxUnackedPSN more frames in flight.
func TestReserveRx(t *testing.T) {
	end, _ := transport.NewPipe(transport.PipeConfig{MAC: macA, Addrs: []netip.Addr{addrA}},
		transport.PipeConfig{MAC: macB, Addrs: []netip.Addr{addrB}})
	link := &testlink.Reserving{Link: end}
	dev, err := transport.Open(link, transport.Options{Clock: transport.NewFakeClock()})
	must(t, err)
	defer dev.Close()
	cq := dev.CreateCQ(16)
	pd := dev.AllocPD()
	var qps []*transport.QueuePair
	for range 3 {
		qp, err := pd.CreateQP(transport.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: transport.QPCap{MaxSendWR: 4, MaxRecvWR: 4}})
		must(t, err)
		qps = append(qps, qp)
	}
	must(t, qps[1].Destroy())
	if _, err := pd.CreateQP(transport.QPInitAttr{SendCQ: cq, RecvCQ: cq, Cap: transport.QPCap{MaxSendWR: 4, MaxRecvWR: 4}}); err != nil {
		t.Fatal(err)
	}
	want := []int{128, 256, 384, 384}
	if len(link.Frames) != len(want) {
		t.Fatalf("ReserveRx calls %v, want %v", link.Frames, want)
	}
	for i := range want {
		if link.Frames[i] != want[i] {
			t.Fatalf("ReserveRx calls %v, want %v", link.Frames, want)
		}
	}
}
