package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/xroce/xroce/roce"
)

// watchPortUnreachable reads ICMP (or ICMPv6) until ctx ends and sends on hit
// (without blocking) each time peer reports destination port unreachable (RFC 792
// type 3 code 3; RFC 4443 type 1 code 4) for a UDP datagram to port 4791 (IBA
// Annex A17.2.4) it was sent: its host has no RoCEv2 endpoint, or not yet (no
// rdma_rxe, no RDMA NIC, no xroce running there). The AF_XDP link never sees
// these (its program passes ICMP to the kernel), so a raw socket of this
// namespace reads them. It returns false when the socket cannot be opened (not
// root); the caller then only waits longer. The socket is open when it returns
// (the first REQ's answer is not missed); a goroutine reads it.
func watchPortUnreachable(ctx context.Context, peer netip.Addr, hit chan<- struct{}) bool {
	peer = peer.Unmap()
	network, addr := "ip4:icmp", "0.0.0.0"
	if peer.Is6() {
		network, addr = "ip6:ipv6-icmp", "::"
	}
	c, err := net.ListenPacket(network, addr)
	if err != nil {
		return false
	}
	go func() {
		<-ctx.Done()
		c.Close()
	}()
	go readPortUnreachable(ctx, c, peer, hit)
	return true
}

// readPortUnreachable is watchPortUnreachable's reader.
func readPortUnreachable(ctx context.Context, c net.PacketConn, peer netip.Addr, hit chan<- struct{}) {
	buf := make([]byte, 1500)
	for ctx.Err() == nil {
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		ip, ok := from.(*net.IPAddr)
		if !ok {
			continue
		}
		src, ok := netip.AddrFromSlice(ip.IP)
		if ok && src.Unmap() == peer && portUnreachable(buf[:n], peer) {
			select {
			case hit <- struct{}{}:
			default:
			}
		}
	}
}

// errNoRoCEEndpoint names a peer whose host answered with ICMP port unreachable.
func errNoRoCEEndpoint(peer netip.Addr, tried time.Duration) error {
	return fmt.Errorf("no RoCE endpoint at %v: for %v its host answered our CM REQs on UDP port %d with ICMP port unreachable (no rdma_rxe, RDMA NIC or xroce there)", peer.Unmap(), tried, roce.UDPPort)
}

// portUnreachable reports whether msg, an ICMP message (ICMPv6 when peer is an
// IPv6 address) without its IP header, is destination port unreachable for a
// UDP datagram to peer's RoCEv2 port, by the headers it quotes.
func portUnreachable(msg []byte, peer netip.Addr) bool {
	if len(msg) < 8 {
		return false
	}
	q := msg[8:] // the quoted datagram: its IP header, then at least 8 bytes
	if !peer.Is6() {
		if msg[0] != 3 || msg[1] != 3 || len(q) < 20 || q[0]>>4 != 4 {
			return false
		}
		ihl := int(q[0]&0x0F) * 4
		if ihl < 20 || len(q) < ihl+4 || q[9] != 17 {
			return false
		}
		dst, _ := netip.AddrFromSlice(q[16:20])
		return dst == peer && binary.BigEndian.Uint16(q[ihl+2:]) == roce.UDPPort
	}
	if msg[0] != 1 || msg[1] != 4 || len(q) < 44 || q[0]>>4 != 6 || q[6] != 17 {
		return false
	}
	dst, _ := netip.AddrFromSlice(q[24:40])
	return dst == peer && binary.BigEndian.Uint16(q[42:]) == roce.UDPPort
}
