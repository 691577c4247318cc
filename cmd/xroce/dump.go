package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/roce"
)

// runDump is `xroce dump FILE`: one line per RoCE frame of a capture, like
// `tcpdump -v` for RoCE, with the ICRC checked.
func runDump(name string, args []string) error { return dump(args, os.Stdout) }

func dump(args []string, w io.Writer) error {
	fs := pflag.NewFlagSet("xroce dump", pflag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() {
		fmt.Fprintf(w, "usage: xroce dump [flags] FILE\n\nPrints every RoCEv2 frame (UDP port 4791) of a pcap or pcapng capture on one line:\n"+
			"frame number, time in seconds since the first frame, direction (tx/rx, for captures\nrecorded with --pcap), source → destination, the transport headers and the ICRC\nverdict (ok, or BAD with the value carried and the one computed, as Wireshark shows\nthem).\n\n")
		fs.PrintDefaults()
	}
	qpns := fs.StringSlice("qpn", nil, "show only frames whose BTH destination QPN is one of these (hex 0x11 or decimal; repeat or separate with commas)")
	ops := fs.StringSlice("opcode", nil, "show only these opcodes: names as printed (RC_RDMA_WRITE_ONLY, or without RC_), a prefix of names (RDMA_READ), or numbers (0x0a)")
	abs := fs.Bool("abs", false, "print absolute UTC times instead of seconds since the first frame")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errUsage
		}
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("want one capture file, got %d arguments", fs.NArg())
	}
	f := dumpFilter{}
	for _, s := range *qpns {
		v, err := strconv.ParseUint(s, 0, 24)
		if err != nil {
			return fmt.Errorf("--qpn %q: want a 24-bit number, hex with 0x or decimal", s)
		}
		if f.qpns == nil {
			f.qpns = map[uint32]bool{}
		}
		f.qpns[uint32(v)] = true
	}
	for _, s := range *ops {
		m, err := parseOpcodes(s)
		if err != nil {
			return err
		}
		if f.ops == nil {
			f.ops = map[roce.Opcode]bool{}
		}
		for _, op := range m {
			f.ops[op] = true
		}
	}
	frames, rerr := pcap.ReadFile(fs.Arg(0))
	if frames == nil && rerr != nil {
		return rerr
	}
	// What was read is printed even when the capture ends early.
	st := writeDump(w, frames, f, *abs)
	summary := fmt.Sprintf("%d frame%s; %d RoCE: %d ICRC ok, %d ICRC BAD, %d malformed", len(frames), plural(len(frames)), st.roce, st.ok, st.bad, st.malformed)
	if st.cut > 0 {
		summary += fmt.Sprintf(", %d cut short (ICRC not checked)", st.cut)
	}
	if st.cutRoCEHdrs > 0 {
		summary += fmt.Sprintf(", %d cut in their headers", st.cutRoCEHdrs)
	}
	if f.active() {
		summary += fmt.Sprintf("; %d shown", st.shown)
	}
	fmt.Fprintln(w, summary)
	if st.cut > 0 {
		fmt.Fprintf(w, "note: the capture's snap length cut %d RoCE frame%s short: the headers are shown; the rest of the payload and the ICRC were not recorded\n", st.cut, plural(st.cut))
	}
	if st.cutHdrs > 0 {
		fmt.Fprintf(w, "note: the capture's snap length cut %d frame%s inside the IP or UDP header, so whether they are RoCE cannot be told: record with a snap length of at least %d bytes (--pcap-snaplen) to keep every RoCE header\n", st.cutHdrs, plural(st.cutHdrs), minHeaderSnap)
	}
	if st.cutRoCEHdrs > 0 {
		fmt.Fprintf(w, "note: the capture's snap length cut %d RoCE frame%s inside the transport headers (a RETH, an AtomicETH): record with a snap length of at least %d bytes (--pcap-snaplen) to keep every RoCE header\n", st.cutRoCEHdrs, plural(st.cutRoCEHdrs), minHeaderSnap)
	}
	if errors.Is(rerr, pcap.ErrTorn) {
		// A recording cut short (xroce --pcap killed with SIGKILL): every frame
		// before the torn record is whole, and was shown.
		fmt.Fprintf(w, "note: %v; the %d whole frames before it are shown\n", rerr, len(frames))
		return nil
	}
	return rerr
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// dumpFilter selects frames; empty sets select everything.
type dumpFilter struct {
	qpns map[uint32]bool
	ops  map[roce.Opcode]bool
}

func (f dumpFilter) active() bool { return f.qpns != nil || f.ops != nil }

func (f dumpFilter) match(p *roce.Packet) bool {
	return (f.qpns == nil || f.qpns[p.BTH.DestQP]) && (f.ops == nil || f.ops[p.BTH.Opcode])
}

// parseOpcodes resolves an --opcode value: an exact name (with or without RC_), a
// number, or a prefix of names.
func parseOpcodes(s string) ([]roce.Opcode, error) {
	name := strings.ToUpper(strings.TrimSpace(s))
	if op, ok := roce.ParseOpcode(name); ok {
		return []roce.Opcode{op}, nil
	}
	if v, err := strconv.ParseUint(name, 0, 8); err == nil {
		return []roce.Opcode{roce.Opcode(v)}, nil
	}
	var out []roce.Opcode
	var all []string
	for i := 0; i < 256; i++ {
		op := roce.Opcode(i)
		if !op.Valid() {
			continue
		}
		all = append(all, op.String())
		if name != "" && (strings.HasPrefix(op.String(), name) || (op.Service() == roce.ServiceRC && strings.HasPrefix(op.Info().Name, name))) {
			out = append(out, op)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--opcode %q: no such opcode; the opcodes are %s", s, strings.Join(all, ", "))
	}
	return out, nil
}

type dumpStats struct {
	roce, ok, bad, malformed, shown int
	cut                             int // RoCE frames whose headers the capture holds but not all their bytes: ICRC not checked
	cutHdrs                         int // frames cut inside their headers, before the UDP port tells whether they are RoCE
	cutRoCEHdrs                     int // RoCE frames (UDP to port 4791) cut inside their transport headers
}

// writeDump prints the RoCE frames of a capture that pass the filter.
func writeDump(w io.Writer, frames []pcap.Frame, f dumpFilter, abs bool) dumpStats {
	var st dumpStats
	var t0 time.Time // the first timestamp: a Simple Packet Block (pcapng) has none
	for _, fr := range frames {
		if !fr.Time.IsZero() {
			t0 = fr.Time
			break
		}
	}
	var b strings.Builder
	var p roce.Packet
	for i := range frames {
		fr := &frames[i]
		err := p.Decode(fr.Data)
		cut := err == roce.ErrTruncated && decodeCut(&p, fr)
		if cut {
			err = nil
		}
		if err == roce.ErrNotRoCE {
			continue
		}
		src, dst, isRoCE := udpEndpoints(fr.Data)
		if err != nil && err != roce.ErrBadICRC && !isRoCE {
			if len(fr.Data) < fr.Len && len(fr.Data) < udpEnd(fr.Data) {
				st.cutHdrs++
			}
			continue // not UDP to port 4791: not RoCE at all
		}
		st.roce++
		b.Reset()
		fmt.Fprintf(&b, "%5d ", fr.Index)
		switch {
		case fr.Time.IsZero(): // no timestamp (a Simple Packet Block): "-" in the column
			width := 11
			if abs {
				width = len("2006-01-02T15:04:05.000000000Z")
			}
			fmt.Fprintf(&b, "%*s", width, "-")
		case abs:
			b.WriteString(fr.Time.UTC().Format("2006-01-02T15:04:05.000000000Z"))
		default:
			fmt.Fprintf(&b, "%11.6f", fr.Time.Sub(t0).Seconds())
		}
		if fr.Dir != pcap.DirUnknown {
			b.WriteString(" " + fr.Dir.String())
		}
		switch err {
		case nil, roce.ErrBadICRC:
			src = netip.AddrPortFrom(p.SrcAddr(), p.UDP.SrcPort)
			dst = netip.AddrPortFrom(p.DstAddr(), p.UDP.DstPort)
			fmt.Fprintf(&b, " %s → %s%s %s ICRC ", src, dst, trafficClass(&p), pcap.Describe(&p))
			if cut {
				st.cut++
				fmt.Fprintf(&b, "not checked (the capture holds %d of its %d bytes)", len(fr.Data), fr.Len)
			} else if err == nil {
				st.ok++
				b.WriteString("ok")
			} else {
				st.bad++
				// As Wireshark shows an ICRC: the four wire bytes read big-endian.
				fmt.Fprintf(&b, "BAD (carried 0x%08x, computed 0x%08x)", bits.ReverseBytes32(p.ICRC), bits.ReverseBytes32(p.ComputeICRC()))
			}
			if !f.match(&p) {
				continue
			}
		case roce.ErrTruncated:
			if len(fr.Data) < fr.Len { // the snap length cut it inside its transport headers
				st.cutRoCEHdrs++
				if f.active() {
					continue
				}
				fmt.Fprintf(&b, " %s → %s RoCE headers cut by the capture's snap length (it holds %d of the frame's %d bytes)", src, dst, len(fr.Data), fr.Len)
				break
			}
			fallthrough
		default:
			st.malformed++
			if f.active() {
				continue // its QPN and opcode cannot be trusted
			}
			fmt.Fprintf(&b, " %s → %s malformed RoCE: %v", src, dst, err)
		}
		st.shown++
		b.WriteString("\n")
		io.WriteString(w, b.String())
	}
	return st
}

// decodeCut decodes into p a frame of which the capture holds only the first bytes
// (a snap length shorter than the frame, fr.Len bytes on the wire): its headers,
// read with the missing bytes taken as zeros, when the capture holds all of them
// up to the payload. false when the frame is whole, or cut inside its headers.
func decodeCut(p *roce.Packet, fr *pcap.Frame) bool {
	if len(fr.Data) >= fr.Len || fr.Len > maxFrame {
		return false
	}
	whole := make([]byte, fr.Len)
	copy(whole, fr.Data)
	err := p.Decode(whole)
	return (err == nil || err == roce.ErrBadICRC) && p.PayloadOff <= len(fr.Data)
}

// maxFrame bounds the wire length decodeCut believes: an IP packet of 64 KiB
// with Ethernet and a VLAN tag.
const maxFrame = 65535 + 18

// minHeaderSnap is the snap length that keeps every RoCE header of a frame:
// Ethernet with a VLAN tag, IPv6, UDP, the BTH and the longest extension headers
// (the AtomicETH, 28 bytes, of an atomic request).
const minHeaderSnap = 18 + 40 + 8 + roce.BTHLen + roce.AtomicETHLen

// udpEnd is where the UDP header of frame f ends (Ethernet, one optional VLAN
// tag, IPv4 with its IHL or IPv6), or len(f)+1 when f is too short to tell.
func udpEnd(f []byte) int {
	off := 14
	if len(f) >= 14 && binary.BigEndian.Uint16(f[12:14]) == roce.EtherTypeVLAN {
		off = 18
	}
	if len(f) <= off {
		return len(f) + 1
	}
	if f[off]>>4 == 6 {
		return off + 40 + 8
	}
	return off + int(f[off]&0x0F)*4 + 8
}

// trafficClass describes a frame's IPv4 TOS or IPv6 traffic class when it is not
// 0 (the GRH traffic class of the QP: --tclass, perftest's --tclass, rdma_rxe's
// TOS): " TOS 0x6a (DSCP 26, ECN ECT(0))". ECN CE marks a frame a congested switch
// passed on (RFC 3168, RoCEv2 congestion management).
func trafficClass(p *roce.Packet) string {
	tc, name := p.IPv4.TOS, "TOS"
	if p.IsIPv6 {
		tc, name = p.IPv6.TrafficClass, "TC"
	}
	if tc == 0 {
		return ""
	}
	return fmt.Sprintf(" %s 0x%02x (DSCP %d, ECN %v)", name, tc, tc>>2, p.ECN())
}

// udpEndpoints reads the IP addresses and UDP ports of a frame, and whether it is
// UDP to the RoCEv2 port (Ethernet II with at most one 802.1Q tag, IPv4 with or
// without options, or IPv6 without extension headers).
func udpEndpoints(f []byte) (src, dst netip.AddrPort, roceUDP bool) {
	if len(f) < 14 {
		return
	}
	et, off := binary.BigEndian.Uint16(f[12:14]), 14
	if et == roce.EtherTypeVLAN && len(f) >= 18 {
		et, off = binary.BigEndian.Uint16(f[16:18]), 18
	}
	ip := f[off:]
	var s, d netip.Addr
	var udp []byte
	switch {
	case et == roce.EtherTypeIPv4 && len(ip) >= 20 && ip[0]>>4 == 4:
		ihl := int(ip[0]&0x0F) * 4
		if ip[9] != 17 || ihl < 20 || len(ip) < ihl+8 {
			return
		}
		s, d = netip.AddrFrom4([4]byte(ip[12:16])), netip.AddrFrom4([4]byte(ip[16:20]))
		udp = ip[ihl:]
	case et == roce.EtherTypeIPv6 && len(ip) >= 48 && ip[0]>>4 == 6:
		if ip[6] != 17 {
			return
		}
		s, d = netip.AddrFrom16([16]byte(ip[8:24])), netip.AddrFrom16([16]byte(ip[24:40]))
		udp = ip[40:]
	default:
		return
	}
	sp, dp := binary.BigEndian.Uint16(udp[0:2]), binary.BigEndian.Uint16(udp[2:4])
	return netip.AddrPortFrom(s, sp), netip.AddrPortFrom(d, dp), dp == roce.UDPPort
}
