// Package icmp reads the ICMP and ICMPv6 errors the kernel receives about RoCEv2
// datagrams (UDP port 4791, IBA Annex A17.2.4) this host sent. The AF_XDP link's
// XDP program passes ICMP to the kernel, so an engine never sees them; a raw
// socket of the network namespace does. The tools and the daemon use them to end,
// within seconds, what would otherwise wait for every CM retry: a peer host with
// no RoCE endpoint (port unreachable), a router with no route (network or host
// unreachable), or a hop limit too small for the path (time exceeded).
package icmp

import (
	"encoding/binary"
	"net/netip"

	"github.com/xroce/xroce/roce"
)

// Kind is what an ICMP error says about a RoCEv2 datagram.
type Kind uint8

// Kinds of reports.
const (
	PortUnreachable Kind = iota + 1 // RFC 792 type 3 code 3, RFC 4443 type 1 code 4: nothing listens on UDP 4791 there
	Unreachable                     // the destination network or host is unreachable (from a router, or this host)
	TimeExceeded                    // RFC 792 type 11 code 0, RFC 4443 type 3 code 0: the hop limit ran out on the way
)

func (k Kind) String() string {
	switch k {
	case PortUnreachable:
		return "port unreachable"
	case Unreachable:
		return "destination unreachable"
	case TimeExceeded:
		return "time exceeded (hop limit)"
	}
	return "?"
}

// Report is one ICMP error about a RoCEv2 datagram: what it says, who sent it
// (the peer's host, or a router on the way) and the datagram's destination.
type Report struct {
	Kind Kind
	From netip.Addr
	Dst  netip.Addr
	Code uint8 // the ICMP code
}

// Parse reads msg, an ICMP message (ICMPv6 when v6) without its IP header, as a
// report about a UDP datagram to port 4791, by the headers it quotes (RFC 792:
// the IP header and the first 8 bytes of the datagram; RFC 4443: as much of it as
// fits). It reports false for any other message, and never reads past msg.
func Parse(msg []byte, v6 bool) (Report, bool) {
	if len(msg) < 8 {
		return Report{}, false
	}
	typ, code := msg[0], msg[1]
	q := msg[8:] // the quoted datagram
	var r Report
	if !v6 {
		switch {
		case typ == 3 && code == 3:
			r.Kind = PortUnreachable
		case typ == 3 && (code == 0 || code == 1 || code == 6 || code == 7 || code == 13):
			r.Kind = Unreachable // net, host, unknown net or host, administratively prohibited
		case typ == 11 && code == 0:
			r.Kind = TimeExceeded
		default:
			return Report{}, false
		}
		if len(q) < 20 || q[0]>>4 != 4 {
			return Report{}, false
		}
		ihl := int(q[0]&0x0F) * 4
		if ihl < 20 || len(q) < ihl+4 || q[9] != 17 || binary.BigEndian.Uint16(q[ihl+2:]) != roce.UDPPort {
			return Report{}, false
		}
		r.Dst, _ = netip.AddrFromSlice(q[16:20])
		r.Code = code
		return r, true
	}
	switch {
	case typ == 1 && code == 4:
		r.Kind = PortUnreachable
	case typ == 1 && (code == 0 || code == 1 || code == 3):
		r.Kind = Unreachable // no route, administratively prohibited, address unreachable
	case typ == 3 && code == 0:
		r.Kind = TimeExceeded
	default:
		return Report{}, false
	}
	if len(q) < 44 || q[0]>>4 != 6 || q[6] != 17 || binary.BigEndian.Uint16(q[42:]) != roce.UDPPort {
		return Report{}, false
	}
	r.Dst, _ = netip.AddrFromSlice(q[24:40])
	r.Code = code
	return r, true
}
