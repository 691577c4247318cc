package icmp

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"time"
)

// Watch opens a raw ICMP socket (ICMPv6 when v6) in this network namespace and,
// until ctx ends, calls f for every report Parse makes of what it reads, with its
// sender. The socket is open when Watch returns (a datagram sent after it is not
// missed); a goroutine reads it. Errors: the socket cannot be opened (it needs
// CAP_NET_RAW).
func Watch(ctx context.Context, v6 bool, f func(Report)) error {
	network, addr := "ip4:icmp", "0.0.0.0"
	if v6 {
		network, addr = "ip6:ipv6-icmp", "::"
	}
	c, err := net.ListenPacket(network, addr)
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		c.Close()
	}()
	go read(ctx, c, v6, f)
	return nil
}

func read(ctx context.Context, c net.PacketConn, v6 bool, f func(Report)) {
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
		if r, isRoCE := Parse(buf[:n], v6); ok && isRoCE {
			r.From = src.Unmap()
			f(r)
		}
	}
}
