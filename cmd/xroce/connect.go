package main

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/xroce/xroce/cmd/xroce/oob"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// remoteAccess is what crosscheck's QP allows its peer: RDMA WRITE, RDMA READ and
// atomics (the perftest-style tools allow only their test's operation: qpAccess).
const remoteAccess = transport.AccessRemoteWrite | transport.AccessRemoteRead | transport.AccessRemoteAtomic

// connectParams are the bring-up attributes of a QP towards the peer QP of a perftest
// key exchange: the peer's QPN and PSN, our PSN, our GID index sgid, path MTU mtu,
// rdAtom outstanding READs/atomics each way at most (the peer's out_reads,
// at least 1, as perftest sets max_rd_atomic from dest->out_reads), and access
// allowed to the peer. Timers are perftest's defaults.
func connectParams(remote, local oob.Dest, sgid int, mtu roce.MTU, rdAtom int, access transport.Access) transport.ConnectParams {
	return transport.ConnectParams{Access: access, AH: transport.AddressHandle{DGID: remote.GID, SGIDIndex: sgid},
		PathMTU: mtu, DestQPN: remote.QPN, RQPSN: remote.PSN, MaxDestRdAtomic: uint8(rdAtom),
		SQPSN: local.PSN, MaxRdAtomic: uint8(min(max(remote.OutReads, 1), rdAtom))}
}

// oobConn connects to the server's TCP port (client), or waits for one client on it
// (server, printing perftest's banner when asked).
func oobConn(server string, port int, out io.Writer, banner bool) (net.Conn, error) {
	if server != "" {
		// An IPv6 address may come bracketed, as in URLs; JoinHostPort adds the brackets.
		server = strings.TrimSuffix(strings.TrimPrefix(server, "["), "]")
		if a, err := netip.ParseAddr(server); err == nil && a.Is6() && a.IsLinkLocalUnicast() && a.Zone() == "" {
			return nil, fmt.Errorf("%s is link-local: name the interface it is on, as in %s%%eth0", server, server)
		}
		return oob.Dial(net.JoinHostPort(server, fmt.Sprint(port)), 10*time.Second)
	}
	ln, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
	if err != nil {
		return nil, fmt.Errorf("listening on TCP port %d: %w", port, err)
	}
	defer ln.Close()
	if banner {
		fmt.Fprintf(out, "\n************************************\n* Waiting for client to connect... *\n************************************\n")
	}
	return ln.Accept()
}
