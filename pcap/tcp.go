package pcap

import (
	"net/netip"
	"sort"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// TCPStream is the payload of one TCP connection of a capture, each direction
// reassembled in sequence order: retransmitted and overlapping segments count once,
// and a direction stops at its first hole (a segment the capture lacks).
type TCPStream struct {
	Client, Server netip.AddrPort // the client sent the SYN, or the first segment to the port
	ToServer       []byte
	ToClient       []byte
	First, Last    int  // frame indexes of the connection's first and last segment
	Gap            bool // a direction has a hole: its bytes after the hole are left out
}

// MaxTCPStream caps how many bytes of each direction TCPStreams keeps: the
// exchanges it is for are a few kilobytes.
const MaxTCPStream = 1 << 20

// TCPStreams returns the connections to TCP port (perftest and rc_pingpong use
// 18515) over IPv4 or IPv6, in the order of their first frames. A new SYN on a
// 4-tuple starts a new connection. Frames that do not decode are skipped.
func TCPStreams(frames []Frame, port uint16) []TCPStream {
	type seg struct {
		seq  uint32
		data []byte
	}
	type dir struct {
		isn    uint32
		hasISN bool
		segs   []seg
	}
	type conn struct {
		s        TCPStream
		toServer dir
		toClient dir
	}
	var conns []*conn
	open := map[[2]netip.AddrPort]*conn{} // by (client, server)
	var eth layers.Ethernet
	var dot1q layers.Dot1Q
	var ip4 layers.IPv4
	var ip6 layers.IPv6
	var tcp layers.TCP
	var payload gopacket.Payload
	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet, &eth, &dot1q, &ip4, &ip6, &tcp, &payload)
	parser.IgnoreUnsupported = true
	decoded := make([]gopacket.LayerType, 0, 8)
	for _, f := range frames {
		decoded = decoded[:0]
		_ = parser.DecodeLayers(f.Data, &decoded) // a partial decode still fills what it reached
		var src, dst netip.Addr
		hasTCP := false
		for _, lt := range decoded {
			switch lt {
			case layers.LayerTypeIPv4:
				src, _ = netip.AddrFromSlice(ip4.SrcIP.To4())
				dst, _ = netip.AddrFromSlice(ip4.DstIP.To4())
			case layers.LayerTypeIPv6:
				src, _ = netip.AddrFromSlice(ip6.SrcIP)
				dst, _ = netip.AddrFromSlice(ip6.DstIP)
			case layers.LayerTypeTCP:
				hasTCP = true
			}
		}
		if !hasTCP || !src.IsValid() || !dst.IsValid() || (uint16(tcp.SrcPort) != port && uint16(tcp.DstPort) != port) {
			continue
		}
		from := netip.AddrPortFrom(src, uint16(tcp.SrcPort))
		to := netip.AddrPortFrom(dst, uint16(tcp.DstPort))
		toServer := uint16(tcp.DstPort) == port
		key := [2]netip.AddrPort{from, to}
		if !toServer {
			key = [2]netip.AddrPort{to, from}
		}
		c := open[key]
		if c == nil || (tcp.SYN && !tcp.ACK && toServer && (c.toServer.hasISN && tcp.Seq != c.toServer.isn)) {
			c = &conn{s: TCPStream{Client: key[0], Server: key[1], First: f.Index}}
			conns = append(conns, c)
			open[key] = c
		}
		c.s.Last = f.Index
		d := &c.toServer
		if !toServer {
			d = &c.toClient
		}
		seq := tcp.Seq
		if tcp.SYN {
			d.isn, d.hasISN = seq, true
			seq++
		}
		if n := len(tcp.Payload); n > 0 {
			d.segs = append(d.segs, seg{seq, append([]byte(nil), tcp.Payload...)})
		}
	}
	out := make([]TCPStream, 0, len(conns))
	for _, c := range conns {
		for _, d := range []*dir{&c.toServer, &c.toClient} {
			if len(d.segs) == 0 {
				continue
			}
			start := d.isn + 1
			if !d.hasISN {
				start = d.segs[0].seq
				for _, s := range d.segs {
					if int32(s.seq-start) < 0 {
						start = s.seq
					}
				}
			}
			sort.SliceStable(d.segs, func(i, j int) bool { return int32(d.segs[i].seq-start) < int32(d.segs[j].seq-start) })
			var b []byte
			for _, s := range d.segs {
				off := int64(int32(s.seq - start)) // position of the segment in the stream
				end := off + int64(len(s.data))
				switch {
				case end <= int64(len(b)) || off < 0:
					continue // already have it (a retransmission), or before the start
				case off > int64(len(b)):
					c.s.Gap = true
				default:
					b = append(b, s.data[int64(len(b))-off:]...)
				}
				if c.s.Gap || len(b) >= MaxTCPStream {
					break
				}
			}
			if len(b) > MaxTCPStream {
				b = b[:MaxTCPStream]
			}
			if d == &c.toServer {
				c.s.ToServer = b
			} else {
				c.s.ToClient = b
			}
		}
		out = append(out, c.s)
	}
	return out
}
