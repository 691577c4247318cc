package cm

import "github.com/xroce/xroce/roce"

// PathLen is the size of the path fields in a REQ (primary and alternate) and a LAP
// (alternate).
const PathLen = 44

// Path is a path's fields as a REQ (Table 106: Primary … and Alternate …) or a LAP
// (Table 115: Alternate …) carries them. On RoCE the LIDs are the permissive LID
// 0xFFFF (ib_cm: IB_LID_PERMISSIVE) and the GIDs are the endpoints' IP addresses
// (roce.GID). The offsets below are from the start of the path fields: byte 52 of a
// REQ's data (primary), 96 (alternate), 20 of a LAP's.
type Path struct {
	LocalPortLID    uint16   // 0[0], 16 bits
	RemotePortLID   uint16   // 2[0], 16 bits
	LocalPortGID    roce.GID // 4[0], 128 bits
	RemotePortGID   roce.GID // 20[0], 128 bits
	FlowLabel       uint32   // 36[0], 20 bits
	PacketRate      uint8    // REQ 39[2], LAP 41[2], 6 bits (IBTA rate enum; 0 = port current)
	TrafficClass    uint8    // REQ 40[0], LAP 39[0], 8 bits
	HopLimit        uint8    // REQ 41[0], LAP 40[0], 8 bits
	SL              uint8    // 42[0], 4 bits
	SubnetLocal     bool     // 42[4], 1 bit
	LocalACKTimeout uint8    // 43[0], 5 bits: 4.096 µs × 2^value (Timeout)
}

// decodeREQ reads the path from b[0:PathLen] in a REQ's layout.
func (p *Path) decodeREQ(b []byte) {
	p.decodeCommon(b)
	p.PacketRate = b[39] & 0x3F
	p.TrafficClass = b[40]
	p.HopLimit = b[41]
}

// putREQ writes the path into b[0:PathLen] (cleared) in a REQ's layout.
func (p *Path) putREQ(b []byte) {
	p.putCommon(b)
	b[39] = p.PacketRate & 0x3F
	b[40] = p.TrafficClass
	b[41] = p.HopLimit
}

// decodeLAP reads the path from b[0:PathLen] in a LAP's layout.
func (p *Path) decodeLAP(b []byte) {
	p.decodeCommon(b)
	p.TrafficClass = b[39]
	p.HopLimit = b[40]
	p.PacketRate = b[41] & 0x3F
}

// putLAP writes the path into b[0:PathLen] (cleared) in a LAP's layout.
func (p *Path) putLAP(b []byte) {
	p.putCommon(b)
	b[39] = p.TrafficClass
	b[40] = p.HopLimit
	b[41] = p.PacketRate & 0x3F
}

func (p *Path) decodeCommon(b []byte) {
	_ = b[PathLen-1]
	p.LocalPortLID = be.Uint16(b[0:])
	p.RemotePortLID = be.Uint16(b[2:])
	copy(p.LocalPortGID[:], b[4:20])
	copy(p.RemotePortGID[:], b[20:36])
	p.FlowLabel = be.Uint32(b[36:]) >> 12
	p.SL = b[42] >> 4
	p.SubnetLocal = b[42]&0x08 != 0
	p.LocalACKTimeout = b[43] >> 3
}

func (p *Path) putCommon(b []byte) {
	_ = b[PathLen-1]
	be.PutUint16(b[0:], p.LocalPortLID)
	be.PutUint16(b[2:], p.RemotePortLID)
	copy(b[4:20], p.LocalPortGID[:])
	copy(b[20:36], p.RemotePortGID[:])
	be.PutUint32(b[36:], p.FlowLabel<<12) // the low 12 bits: reserved, then the REQ's rate
	b[42] = p.SL<<4 | flag(p.SubnetLocal, 0x08)
	b[43] = p.LocalACKTimeout << 3
}
