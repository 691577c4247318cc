package pcap_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/test/captures"
	"github.com/xroce/xroce/transport"
)

var (
	rxeServer = netip.MustParseAddr("10.77.0.11")
	rxeClient = netip.MustParseAddr("10.77.0.12")
)

func report(t *testing.T, r *pcap.Report) string {
	t.Helper()
	var b bytes.Buffer
	must(t, r.Write(&b))
	return b.String()
}

// TestReplayRxeCaptures: the engine, in rdma_rxe's place, answers every request of
// the captures as rdma_rxe did, with the parameters inferred from the RoCE frames
// (cmd/xroce's tests replay them with the TCP exchanges' parameters).
func TestReplayRxeCaptures(t *testing.T) {
	captures.Run(t, replayRxeCaptures)
}

func replayRxeCaptures(t *testing.T, s captures.Source) {
	for _, c := range []struct {
		file string
		as   netip.Addr
	}{
		{"ib_write_bw.pcap", rxeServer}, {"ib_read_bw.pcap", rxeServer}, {"ib_send_bw.pcap", rxeServer},
		{"ib_atomic_bw.pcap", rxeServer}, {"ibv_rc_pingpong.pcap", rxeServer}, {"ibv_rc_pingpong.pcap", rxeClient},
		{"ib_write_lat.pcap", rxeServer}, {"ib_write_lat.pcap", rxeClient}, {"ib_write_bw_rdmacm.pcap", rxeServer},
		{"ib_write_bw_tclass106.pcap", rxeServer},
		{"hostpeer_rc_pingpong.pcap", rxeClient}, {"hostpeer_rc_pingpong_s2500.pcap", rxeClient}, {"hostpeer_bad_icrc.pcap", rxeClient},
	} {
		t.Run(c.file+"/"+c.as.String(), func(t *testing.T) {
			r, err := pcap.Replay(readCapture(t, s, c.file), pcap.ReplayConfig{As: c.as})
			must(t, err)
			out := report(t, r)
			if r.Differences() != 0 || !strings.HasSuffix(out, "replay: no differences\n") {
				t.Fatalf("differences:\n%s", out)
			}
			for i, cr := range r.Conns {
				if cr.Compared == 0 || cr.Compared != cr.Captured || cr.Sent != cr.Captured {
					t.Errorf("connection %d: %d compared, %d sent, %d captured", i+1, cr.Compared, cr.Sent, cr.Captured)
				}
			}
		})
	}
}

// TestReplayBadICRC: the corrupted frame of hostpeer_bad_icrc.pcap is fed, the
// engine drops it as rdma_rxe did (no answer), and the retransmission is ACKed.
func TestReplayBadICRC(t *testing.T) {
	captures.Run(t, replayBadICRC)
}

func replayBadICRC(t *testing.T, s captures.Source) {
	fs := factsOf(t, s)
	r, err := pcap.Replay(readCapture(t, s, "hostpeer_bad_icrc.pcap"), pcap.ReplayConfig{As: rxeClient})
	must(t, err)
	if len(r.Conns) != 1 {
		t.Fatalf("%d connections", len(r.Conns))
	}
	c := r.Conns[0]
	if c.Fed != 3 || c.BadICRC != 1 || c.DroppedICRC != 1 || c.Compared != 2 || r.Differences() != 0 {
		t.Fatalf("%+v\n%s", c, report(t, r))
	}
	if c.Conn.QPN != fs.badQPN || c.Conn.PeerQPN != fs.badPeerQPN || c.Conn.Peer != netip.MustParseAddr("10.77.0.1") || c.Conn.PSN != fs.badPSN {
		t.Errorf("inferred %+v", c.Conn)
	}
}

// reencode applies edit to frame n (1-based) of frames and recomputes its ICRC.
func reencode(t *testing.T, frames []pcap.Frame, n int, edit func(p *roce.Packet, data []byte)) {
	t.Helper()
	f := &frames[n-1]
	f.Data = append([]byte(nil), f.Data...)
	var p roce.Packet
	must(t, p.Decode(f.Data))
	edit(&p, f.Data)
	must(t, roce.FinishFrame(f.Data))
}

// TestReplayFlippedReadByte: a READ response whose payload byte was changed differs
// from what the engine returns: exactly that byte is reported. ib_read_bw's second
// run reads the same 2500 bytes five times, so the memory contents come from the
// four unaltered responses.
func TestReplayFlippedReadByte(t *testing.T) {
	captures.Run(t, replayFlippedReadByte)
}

func replayFlippedReadByte(t *testing.T, s captures.Source) {
	fs := factsOf(t, s)
	frames := readCapture(t, s, "ib_read_bw.pcap")
	var orig byte
	reencode(t, frames, fs.readMiddle, func(p *roce.Packet, data []byte) {
		if p.BTH.Opcode != roce.RC_RDMA_READ_RESPONSE_MIDDLE {
			t.Fatalf("frame %d is %v", fs.readMiddle, p.BTH.Opcode)
		}
		orig = data[p.PayloadOff+517]
		data[p.PayloadOff+517] ^= 0x40
	})
	r, err := pcap.Replay(frames, pcap.ReplayConfig{As: rxeServer})
	must(t, err)
	out := report(t, r)
	if r.Differences() != 1 || len(r.Conns[1].Diffs) != 1 {
		t.Fatalf("want exactly one difference:\n%s", out)
	}
	d := r.Conns[1].Diffs[0]
	if d.Frame != fs.readMiddle || len(d.Fields) != 1 || d.Fields[0].Field != "payload byte 517" ||
		d.Fields[0].Sent != fmt.Sprintf("0x%02x", orig) || !strings.HasPrefix(d.Fields[0].Captured, fmt.Sprintf("0x%02x (1 of 1024 bytes differ)", orig^0x40)) {
		t.Errorf("difference %+v\n%s", d, out)
	}
	if r.Conns[1].NotCompared != 0 || r.Conns[1].Compared != fs.readConn2Responses {
		t.Errorf("a payload difference must not stop the comparison:\n%s", out)
	}
}

// TestReplaySkippedPSN: a request PSN missing from the capture (the frame is cut
// out, or every later request renumbered) makes the engine NAK with a PSN sequence
// error where rdma_rxe ACKed: one difference, naming the skipped PSN, after which
// the comparison stops.
func TestReplaySkippedPSN(t *testing.T) {
	captures.Run(t, replaySkippedPSN)
}

func replaySkippedPSN(t *testing.T, s captures.Source) {
	fs := factsOf(t, s)
	check := func(t *testing.T, frames []pcap.Frame, frame int) {
		r, err := pcap.Replay(frames, pcap.ReplayConfig{As: rxeServer})
		must(t, err)
		out := report(t, r)
		if r.Differences() != 1 || len(r.Conns[1].Diffs) != 1 {
			t.Fatalf("want exactly one difference:\n%s", out)
		}
		d := r.Conns[1].Diffs[0]
		psn := fs.cutPSN
		if !strings.Contains(d.Sent, fmt.Sprintf("PSN %d AETH 0x60 NAK PSN sequence error", psn)) || d.Frame != fs.nakAt ||
			!strings.Contains(d.Note, fmt.Sprintf("the captured requests skip PSN %d: frame %d carries PSN %d, after frame %d with PSN %d",
				psn, frame, roce.PSNNext(psn), fs.prev, roce.PSNAdd(psn, -1))) {
			t.Errorf("difference %+v\n%s", d, out)
		}
		if r.Conns[1].NotCompared != fs.notCompared || !strings.Contains(out,
			fmt.Sprintf("parted at response %d: %d later captured responses not compared", fs.partedAt, fs.notCompared)) {
			t.Errorf("\n%s", out)
		}
	}
	t.Run("cut", func(t *testing.T) {
		frames := readCapture(t, s, "ib_write_bw.pcap")
		checkRequest(t, frames, fs.cut, roce.RC_RDMA_WRITE_MIDDLE, fs.cutPSN)
		checkRequest(t, frames, fs.prev, 0, roce.PSNAdd(fs.cutPSN, -1))
		frames = append(frames[:fs.cut-1:fs.cut-1], frames[fs.cut:]...)
		check(t, frames, fs.cut+1)
	})
	t.Run("renumbered", func(t *testing.T) {
		frames := readCapture(t, s, "ib_write_bw.pcap")
		for n := fs.cut; n <= fs.lastRequest; n++ { // the client's requests from the cut PSN on
			reencode(t, frames, n, func(p *roce.Packet, data []byte) {
				if p.SrcAddr() != rxeClient {
					return // the server's ACKs between them stay as captured
				}
				psn := roce.PSNNext(p.BTH.PSN)
				data[p.BTHOff+9], data[p.BTHOff+10], data[p.BTHOff+11] = byte(psn>>16), byte(psn>>8), byte(psn)
			})
		}
		check(t, frames, fs.cut)
	})
}

// checkRequest fails unless frame n (1-based) is a request from the rdma_rxe client
// with the PSN (and the opcode, unless 0): the facts still name the frames.
func checkRequest(t *testing.T, frames []pcap.Frame, n int, op roce.Opcode, psn uint32) {
	t.Helper()
	var p roce.Packet
	must(t, p.Decode(frames[n-1].Data))
	if p.SrcAddr() != rxeClient || p.BTH.PSN != psn || (op != 0 && p.BTH.Opcode != op) {
		t.Fatalf("frame %d: %v PSN %d from %v; the facts say %v PSN %d from %v", n, p.BTH.Opcode, p.BTH.PSN, p.SrcAddr(), op, psn, rxeClient)
	}
}

// TestReplayTapRoundTrip: traffic between two engines recorded by a Tap on the
// server replays with no differences, the ACKs coalesced over each Recv batch
// included; without the batches (the same frames as a classic pcap would carry
// them) the coalescing cannot be reproduced.
func TestReplayTapRoundTrip(t *testing.T) {
	path := t.TempDir() + "/srv.pcapng"
	tapped(t, path, pcap.TapOptions{}, func(e *engines) {
		e.post(transport.WR_RDMA_WRITE, 4096, 64)
		e.post(transport.WR_RDMA_READ, 2500, 32)
		e.post(transport.WR_SEND, 3000, 48)
		e.post(transport.WR_ATOMIC_FETCH_AND_ADD, 8, 40)
		e.post(transport.WR_RDMA_WRITE, 64, 100)
	})
	frames, err := pcap.ReadFile(path)
	must(t, err)
	r, err := pcap.Replay(frames, pcap.ReplayConfig{As: srvAddr})
	must(t, err)
	out := report(t, r)
	if r.Differences() != 0 || len(r.Conns) != 1 || r.Conns[0].Compared < 100 {
		t.Fatalf("\n%s", out)
	}
	// Without the directions (classic pcap), or as the peer recorded them (its
	// requests are its tx frames), which requests came together is unknown: the
	// first coalesced ACK differs, and its note says why and what to replay.
	for _, c := range []struct {
		dir  func(pcap.Direction) pcap.Direction
		note string
	}{
		{func(pcap.Direction) pcap.Direction { return pcap.DirUnknown }, "this capture does not say which requests arrived together (classic pcap, or another recorder than xroce's --pcap)"},
		{func(d pcap.Direction) pcap.Direction { return 3 - d }, "this capture is the peer's recording (the requests are its tx frames)"},
	} {
		fs := append([]pcap.Frame(nil), frames...)
		for i := range fs {
			fs[i].Dir = c.dir(fs[i].Dir)
		}
		r, err = pcap.Replay(fs, pcap.ReplayConfig{As: srvAddr})
		must(t, err)
		if r.Differences() == 0 {
			t.Fatalf("replayed one frame at a time, the coalesced ACKs still matched: the test does not exercise the batches")
		}
		d := r.Conns[0].Diffs[0]
		if !strings.HasPrefix(d.Note, "the endpoint acknowledged several requests with one ACK (coalesced over a receive batch); "+c.note) ||
			!strings.HasSuffix(d.Note, "replay the endpoint's own recording, made with --pcap FILE.pcapng") {
			t.Errorf("first difference's note: %q\n%s", d.Note, report(t, r))
		}
	}
}

// TestReplayParameters: given parameters win over inference; a region with a
// length makes requests beyond it fail as on the real responder.
func TestReplayParameters(t *testing.T) {
	captures.Run(t, replayParameters)
}

func replayParameters(t *testing.T, s captures.Source) {
	fs := factsOf(t, s)
	frames := readCapture(t, s, "ib_write_bw.pcap")
	conns := pcap.InferConns(frames, rxeServer)
	if len(conns) != 2 || conns[0].QPN != fs.writeQPN || conns[0].PeerQPN != fs.writePeerQPN || conns[0].PSN != fs.writePSN || conns[1].From != fs.writeRun2 {
		t.Fatalf("inferred %+v", conns)
	}
	// The first WRITE names the region the facts give.
	for _, f := range frames {
		var p roce.Packet
		if p.Decode(f.Data) != nil {
			continue
		}
		if p.BTH.Opcode != roce.RC_RDMA_WRITE_ONLY || p.RETH.RKey != fs.writeRKey || p.RETH.VA != fs.writeVA {
			t.Fatalf("frame %d: %v RETH %+v, want RDMA_WRITE_ONLY to rkey 0x%x va 0x%x", f.Index, p.BTH.Opcode, p.RETH, fs.writeRKey, fs.writeVA)
		}
		break
	}
	// A wrong expected PSN: everything is a duplicate, answered by an ACK of PSN-1.
	c := conns[:1:1]
	c[0].PSN = roce.PSNAdd(fs.writePSN, 2)
	r, err := pcap.Replay(frames, pcap.ReplayConfig{As: rxeServer, Conns: c})
	must(t, err)
	if r.Differences() != 1 || !strings.Contains(r.Conns[0].Diffs[0].Sent, fmt.Sprintf("PSN %d AETH 0x1f ACK credits=31 MSN 0", roce.PSNAdd(fs.writePSN, 1))) {
		t.Errorf("\n%s", report(t, r))
	}
	// The region ends after the first 64 bytes: the second WRITE gets a remote
	// access error.
	c[0].PSN = fs.writePSN
	c[0].Regions = []pcap.Region{{RKey: fs.writeRKey, VA: fs.writeVA, Len: 64}}
	r, err = pcap.Replay(frames, pcap.ReplayConfig{As: rxeServer, Conns: c})
	must(t, err)
	out := report(t, r)
	if r.Differences() != 1 || !strings.Contains(r.Conns[0].Diffs[0].Sent, "NAK remote access error") {
		t.Errorf("\n%s", out)
	}
}

// TestReplayBadInput: wrong endpoints and impossible parameters are errors, and
// corrupted frames never make Replay panic.
func TestReplayBadInput(t *testing.T) {
	captures.Run(t, replayBadInput)
}

func replayBadInput(t *testing.T, s captures.Source) {
	fs := factsOf(t, s)
	frames := readCapture(t, s, "ib_atomic_bw.pcap")
	if _, err := pcap.Replay(frames, pcap.ReplayConfig{}); err == nil {
		t.Error("no address accepted")
	}
	_, err := pcap.Replay(frames, pcap.ReplayConfig{As: netip.MustParseAddr("10.0.0.9")})
	if err == nil || !strings.Contains(err.Error(), "endpoints are 10.77.0.12, 10.77.0.11") {
		t.Errorf("unknown endpoint: %v", err)
	}
	if _, err := pcap.Replay(frames[:3], pcap.ReplayConfig{As: rxeServer}); err == nil || !strings.Contains(err.Error(), "no RoCE RC frames") {
		t.Errorf("no RoCE: %v", err)
	}
	base := pcap.InferConns(frames, rxeServer)[0]
	for _, c := range []struct {
		edit func(c *pcap.Conn)
		want string
	}{
		{func(c *pcap.Conn) { c.Regions = []pcap.Region{{RKey: fs.atomicRKey, VA: 1, Len: 1 << 40}} }, "more than"},
		{func(c *pcap.Conn) { c.Regions = []pcap.Region{{RKey: fs.atomicRKey, VA: ^uint64(0), Len: 2}} }, "wraps"},
		{func(c *pcap.Conn) { c.Regions = []pcap.Region{{RKey: fs.atomicRKey & 0xff, VA: 0x1000}} }, "not advertised"},
		{func(c *pcap.Conn) { c.MTU = 9 }, "not an IB MTU"},
	} {
		k := base
		c.edit(&k)
		r, err := pcap.Replay(frames, pcap.ReplayConfig{As: rxeServer, Conns: []pcap.Conn{k}})
		must(t, err)
		if out := report(t, r); !strings.Contains(out, c.want) {
			t.Errorf("want %q in\n%s", c.want, out)
		}
	}
	// An rkey whose table index is 0 cannot be registered: a clear error.
	reencodeAll := append([]pcap.Frame(nil), frames...)
	for n := fs.atomicFirst; n <= fs.atomicLast; n++ {
		reencode(t, reencodeAll, n, func(p *roce.Packet, data []byte) {
			if p.Headers&roce.HdrAtomicETH == 0 || p.AtomicETH.RKey != fs.atomicRKey {
				t.Fatalf("frame %d: %v rkey 0x%x, not an atomic request with rkey 0x%x", n, p.BTH.Opcode, p.AtomicETH.RKey, fs.atomicRKey)
			}
			off := p.BTHOff + roce.BTHLen + 8
			data[off], data[off+1], data[off+2], data[off+3] = 0, 0, 0, byte(fs.atomicRKey)
		})
	}
	r, err := pcap.Replay(reencodeAll, pcap.ReplayConfig{As: rxeServer})
	must(t, err)
	if out := report(t, r); r.Differences() == 0 || !strings.Contains(out, "index 0 is reserved") {
		t.Errorf("\n%s", out)
	}
	// Every header byte and some payload bytes of a READ request and of a response
	// flipped in turn.
	rd := readCapture(t, s, "ib_read_bw.pcap")
	for _, n := range []int{fs.readRequest, fs.readResponse} {
		for i := 14; i < len(rd[n-1].Data); i++ {
			if i > 90 && i%61 != 0 {
				continue
			}
			fr := append([]pcap.Frame(nil), rd...)
			fr[n-1].Data = append([]byte(nil), fr[n-1].Data...)
			fr[n-1].Data[i] ^= 0xA5
			_ = roce.FinishFrame(fr[n-1].Data)
			if _, err := pcap.Replay(fr, pcap.ReplayConfig{As: rxeServer}); err != nil {
				t.Fatalf("frame %d byte %d: %v", n, i, err)
			}
		}
	}
}

// FuzzReplay replays the second run of the repository's ib_read_bw.pcap with a
// byte of a frame changed.
func FuzzReplay(f *testing.F) {
	s := captures.Repo(f)
	frames, err := pcap.ReadFile(capture(f, s, "ib_read_bw.pcap"))
	if err != nil {
		f.Fatal(err)
	}
	frames = frames[sourceFacts[s.Name].readRun2:]
	f.Add(uint8(11), uint16(50), byte(0xFF), true)  // the first READ request's RETH
	f.Add(uint8(17), uint16(60), byte(0x01), false) // a READ response, ICRC left bad
	f.Add(uint8(15), uint16(45), byte(0x80), true)  // a READ request's PSN
	f.Fuzz(func(t *testing.T, frame uint8, off uint16, x byte, fix bool) {
		fr := append([]pcap.Frame(nil), frames...)
		n := int(frame) % len(fr)
		d := append([]byte(nil), fr[n].Data...)
		d[int(off)%len(d)] ^= x
		if fix {
			_ = roce.FinishFrame(d)
		}
		fr[n].Data = d
		if r, err := pcap.Replay(fr, pcap.ReplayConfig{As: rxeServer}); err == nil {
			_ = r.Write(&bytes.Buffer{})
		}
	})
}

// TestReplayRKeyViolation: xroce conform's write-rkey-violation capture (an RDMA
// WRITE ONLY with rkey 0x80000101 to a responder whose region is rkey 0x101,
// answered NAK remote access error) replays without a difference once the
// region is given with its length: the engine refuses the other rkey as the
// responder did, instead of inventing a region for it.
func TestReplayRKeyViolation(t *testing.T) {
	frames, err := pcap.ReadFile("testdata/write-rkey-violation.pcapng")
	must(t, err)
	as := netip.MustParseAddr("10.77.0.2")
	conns := pcap.InferConns(frames, as)
	if len(conns) != 1 {
		t.Fatalf("inferred %+v", conns)
	}
	conns[0].Regions = []pcap.Region{{RKey: 0x101, VA: 0xf304c5fc000, Len: 4096}}
	r, err := pcap.Replay(frames, pcap.ReplayConfig{As: as, Conns: conns})
	must(t, err)
	out := report(t, r)
	if r.Differences() != 0 || !strings.Contains(out, "rkey 0x80000101 is not a given region's: the engine refuses its requests, as the endpoint would") {
		t.Errorf("\n%s", out)
	}
}

// TestReplayRKeyIndexClash: one WRITE of ib_write_bw's capture with its rkey's
// lowest bit flipped (and its ICRC recomputed) names a key that shares its index
// with the region's. The replay keeps the region of the rkey the other requests
// use, refuses the altered one as the endpoint would (NAK remote access error),
// and reports that as the difference, instead of failing to set up.
func TestReplayRKeyIndexClash(t *testing.T) {
	captures.Run(t, func(t *testing.T, s captures.Source) {
		fs := factsOf(t, s)
		frames := readCapture(t, s, "ib_write_bw.pcap")
		writes := 0
		for i := range frames {
			var p roce.Packet
			if p.Decode(frames[i].Data) != nil || p.BTH.Opcode != roce.RC_RDMA_WRITE_ONLY {
				continue
			}
			if writes++; writes == 2 {
				reencode(t, frames, i+1, func(p *roce.Packet, data []byte) {
					binary.BigEndian.PutUint32(data[p.BTHOff+roce.BTHLen+8:], p.RETH.RKey^1)
				})
				break
			}
		}
		conns := pcap.InferConns(frames, rxeServer)
		r, err := pcap.Replay(frames, pcap.ReplayConfig{As: rxeServer, Conns: conns[:1]})
		must(t, err)
		out := report(t, r)
		c := r.Conns[0]
		note := fmt.Sprintf("rkey 0x%08x and rkey 0x%08x share a key index", fs.writeRKey^1, fs.writeRKey)
		if c.Err != nil || r.Differences() != 1 || !strings.Contains(out, note) || !strings.Contains(c.Diffs[0].Sent, "NAK remote access error") {
			t.Errorf("\n%s", out)
		}
	})
}
