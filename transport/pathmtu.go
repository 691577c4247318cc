package transport

import (
	"fmt"

	"github.com/xroce/xroce/roce"
)

// fitsLink checks a QP's path MTU m against the MTU of the link it sends on (bytes):
// nil when the longest packet of m (roce.LargestIPPacket, for the address family of
// the QP's destination dgid; IPv6, the longer, when it is not set yet) fits.
//
// rdma_rxe takes any path MTU up to the port's max_mtu, 4096 (rxe_qp.c
// rxe_qp_chk_attr), including one above its active MTU: ibv_rc_pingpong's default
// -m 1024 on a 1100-byte netdev (active MTU 512) runs, its 1092-byte packets fit. So
// does xroce. A path MTU whose packets the link cannot carry is refused here, with
// the fix, where rdma_rxe would send packets that the netdev drops until the
// requester runs out of retries.
func fitsLink(m roce.MTU, dgid roce.GID, linkMTU int) error {
	v6 := !dgid.IsIPv4Mapped()
	need := roce.LargestIPPacket(m, v6)
	if need <= linkMTU {
		return nil
	}
	family := "IPv4"
	if v6 {
		family = "IPv6"
	}
	fix := fmt.Sprintf("raise the link's MTU to %d or more", roce.NetdevMTUFor(m, v6))
	if fit := roce.LargestFitting(linkMTU, v6); fit != 0 {
		fix = fmt.Sprintf("use path MTU %d or lower, or %s", fit.Bytes(), fix)
	}
	return fmt.Errorf("path MTU %d makes %s packets of up to %d bytes, more than the link's MTU %d carries: %s", m.Bytes(), family, need, linkMTU, fix)
}
