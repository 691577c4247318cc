package pcap

import (
	"bytes"
	"fmt"

	"github.com/xroce/xroce/roce"
)

// diffPackets compares the engine's response g with the captured w. structural
// reports a difference after which the two can no longer be compared: the opcode,
// the PSN or the AETH syndrome's kind (ACK, RNR NAK, NAK). msnDelta carries the
// MSN offset of the previous pair, so an offset is reported once, where it starts or
// changes, not on every later response.
func diffPackets(g, w *roce.Packet, msnDelta *int32) (fields []FieldDiff, structural bool) {
	add := func(f, s, c string) { fields = append(fields, FieldDiff{f, s, c}) }
	msnField := -1
	defer func() {
		if msnField >= 0 && !structural {
			fields[msnField].Captured += " (later MSNs that differ by as much are not listed)"
		}
	}()
	if g.BTH.Opcode != w.BTH.Opcode {
		add("opcode", g.BTH.Opcode.String(), w.BTH.Opcode.String())
		structural = true
	}
	if g.BTH.PSN != w.BTH.PSN {
		add("PSN", fmt.Sprint(g.BTH.PSN), fmt.Sprint(w.BTH.PSN))
		structural = true
	}
	if g.BTH.DestQP != w.BTH.DestQP {
		add("destination QPN", fmt.Sprintf("0x%06x", g.BTH.DestQP), fmt.Sprintf("0x%06x", w.BTH.DestQP))
	}
	if g.BTH.AckReq != w.BTH.AckReq {
		add("AckReq", fmt.Sprint(g.BTH.AckReq), fmt.Sprint(w.BTH.AckReq))
	}
	both := g.Headers & w.Headers
	if both&roce.HdrAETH != 0 {
		gs, ws := g.AETH.Syndrome, w.AETH.Syndrome
		if gs != ws {
			add("AETH syndrome", fmt.Sprintf("0x%02x (%s)", uint8(gs), gs), fmt.Sprintf("0x%02x (%s)", uint8(ws), ws))
			if gs.Kind() != ws.Kind() {
				structural = true
			}
		}
		d := roce.PSNDiff(g.AETH.MSN, w.AETH.MSN)
		if d != 0 && d != *msnDelta {
			add("AETH MSN", fmt.Sprint(g.AETH.MSN), fmt.Sprint(w.AETH.MSN))
			msnField = len(fields) - 1
		}
		*msnDelta = d
	}
	if both&roce.HdrAtomicAckETH != 0 && g.AtomicAckETH != w.AtomicAckETH {
		add("atomic original value", fmt.Sprintf("0x%x", g.AtomicAckETH.OrigRemData), fmt.Sprintf("0x%x", w.AtomicAckETH.OrigRemData))
	}
	if g.BTH.Opcode.Info().Payload && w.BTH.Opcode.Info().Payload && !bytes.Equal(g.Payload, w.Payload) {
		gp, wp := g.Payload, w.Payload
		if len(gp) != len(wp) {
			add("payload length", fmt.Sprint(len(gp)), fmt.Sprint(len(wp)))
		}
		first, ndiff := -1, 0
		for i := range min(len(gp), len(wp)) {
			if gp[i] != wp[i] {
				if first < 0 {
					first = i
				}
				ndiff++
			}
		}
		if first >= 0 {
			add(fmt.Sprintf("payload byte %d", first), fmt.Sprintf("0x%02x", gp[first]),
				fmt.Sprintf("0x%02x (%d of %d bytes differ)", wp[first], ndiff, min(len(gp), len(wp))))
		}
	}
	return fields, structural
}
