package cm

import "net/netip"

// The RDMA IP CM Service (IBTA Vol 1 Annex A11): how rdma_cm maps IP addresses and
// ports onto CM Service IDs and REQ private data.

// PortSpace is the upper 16 bits of an IP CM Service ID's low 32: 0x01 then the IP
// protocol number (Annex A11; Linux enum rdma_ucm_port_space, RDMA_PS_*).
type PortSpace uint16

// The port spaces rdma_cm uses with the IP CM Service ID format.
const (
	PortSpaceTCP PortSpace = 0x0106 // RDMA_PS_TCP: RC connections (rping, perftest -R)
	PortSpaceUDP PortSpace = 0x0111 // RDMA_PS_UDP: UD, through SIDR
	PortSpaceIB  PortSpace = 0x013F // RDMA_PS_IB: any QP type
)

// IPServiceID returns the Service ID of a port in a port space:
// 0x0000000001 | protocol | port, e.g. 0x0000000001064853 for TCP port 18515
// (perftest's default). rdma_cm: cma_get_service_id.
func IPServiceID(ps PortSpace, port uint16) uint64 { return uint64(ps)<<16 | uint64(port) }

// ParseIPServiceID splits an IP CM Service ID into its port space and port; ok is
// false when the Service ID is not of that form (its top 40 bits are not
// 0x0000000001).
func ParseIPServiceID(id uint64) (ps PortSpace, port uint16, ok bool) {
	if id>>24 != 1 {
		return 0, 0, false
	}
	return PortSpace(id >> 16), uint16(id), true
}

// RoCEFlowLabel returns the Primary Flow Label rdma_cm puts in a REQ on RoCEv2 when
// the source address carries none (always for IPv4): (sport × 31 + dport) cut to
// 20 bits, from the IP CM header's source port and the Service ID's port (Linux
// cma.c cma_get_roce_udp_flow_label).
func RoCEFlowLabel(sport, dport uint16) uint32 { return (uint32(sport)*31 + uint32(dport)) & 0xFFFFF }

// Sizes of the IP CM private data in a REQ (Annex A11; Linux struct cma_hdr): the
// header, then what the consumer gave rdma_connect.
const (
	IPCMHeaderLen       = 36
	IPCMConsumerDataLen = REQPrivateDataLen - IPCMHeaderLen
)

// IPCMHeader is the header of a REQ's private data under the RDMA IP CM Service
// (Annex A11 "IP CM Service REQ private data"; Linux struct cma_hdr). An IPv4 address
// occupies the last 4 bytes of its 16, after 12 zero bytes (union cma_ip_addr; not
// the ::ffff: mapped form of a GID).
type IPCMHeader struct {
	MajorVersion  uint8      // 0[0], 4 bits: IP CM Major Version, 0
	MinorVersion  uint8      // 0[4], 4 bits: IP CM Minor Version, 0
	IPVersion     uint8      // 1[0], 4 bits: 4 or 6
	SourcePort    uint16     // 2[0], 16 bits: the active side's port
	SourceIP      netip.Addr // 4[0], 128 bits: Source IP address (4-byte form for IPv4)
	DestinationIP netip.Addr // 20[0], 128 bits: Destination IP address
}

// NewIPCMHeader returns the header rdma_cm writes for a connection from src to dst
// (cma_format_hdr): version 0.0, the IP version of src, src's port. The addresses
// must be of one IP version.
func NewIPCMHeader(src netip.AddrPort, dst netip.Addr) IPCMHeader {
	h := IPCMHeader{IPVersion: 6, SourcePort: src.Port(), SourceIP: src.Addr().Unmap(), DestinationIP: dst.Unmap()}
	if h.SourceIP.Is4() {
		h.IPVersion = 4
	}
	return h
}

// DecodeIPCMHeader reads an IP CM header from b[0:IPCMHeaderLen] (a REQ's
// PrivateData). IP Version must be 4 or 6 and IP CM Major Version 0; as Linux does,
// the 12 bytes before an IPv4 address are not checked.
func DecodeIPCMHeader(b []byte) (IPCMHeader, error) {
	const m = "IP CM private data"
	if len(b) < IPCMHeaderLen {
		return IPCMHeader{}, shortError(m, len(b), IPCMHeaderLen)
	}
	h := IPCMHeader{MajorVersion: b[0] >> 4, MinorVersion: b[0] & 0x0F, IPVersion: b[1] >> 4, SourcePort: be.Uint16(b[2:])}
	if h.MajorVersion != 0 {
		return h, fieldError(m, "IP CM Major Version", "%d, want 0", h.MajorVersion)
	}
	switch h.IPVersion {
	case 4:
		h.SourceIP = netip.AddrFrom4([4]byte(b[16:20]))
		h.DestinationIP = netip.AddrFrom4([4]byte(b[32:36]))
	case 6:
		h.SourceIP = netip.AddrFrom16([16]byte(b[4:20]))
		h.DestinationIP = netip.AddrFrom16([16]byte(b[20:36]))
	default:
		return h, fieldError(m, "IP Version", "%d, want 4 or 6", h.IPVersion)
	}
	return h, nil
}

// Put writes h into b[0:IPCMHeaderLen]; it panics if b is shorter. The versions are
// cut to 4 bits; an address that is not of h's IP version (or missing) is written as
// zeros.
func (h *IPCMHeader) Put(b []byte) {
	b = b[:IPCMHeaderLen]
	clear(b)
	b[0] = h.MajorVersion<<4 | h.MinorVersion&0x0F
	b[1] = h.IPVersion << 4
	be.PutUint16(b[2:], h.SourcePort)
	putIP(b[4:20], h.SourceIP, h.IPVersion)
	putIP(b[20:36], h.DestinationIP, h.IPVersion)
}

func putIP(b []byte, a netip.Addr, version uint8) {
	switch a = a.Unmap(); {
	case version == 4 && a.Is4():
		v := a.As4()
		copy(b[12:], v[:])
	case version == 6 && a.IsValid():
		v := a.As16()
		copy(b, v[:])
	}
}

// IPCM decodes the IP CM header at the start of the REQ's private data; the
// consumer's private data follows it (PrivateData[IPCMHeaderLen:]).
func (m *REQ) IPCM() (IPCMHeader, error) { return DecodeIPCMHeader(m.PrivateData[:]) }
