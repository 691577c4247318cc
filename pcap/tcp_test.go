package pcap_test

import (
	"bytes"
	"net"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/test/captures"
)

// TestTCPStreams: the perftest exchanges of ib_write_bw.pcap, one per run: the
// client's and the server's bytes in order (tshark -z follow,tcp shows the same).
func TestTCPStreams(t *testing.T) {
	captures.Run(t, tcpStreams)
}

func tcpStreams(t *testing.T, src captures.Source) {
	ss := pcap.TCPStreams(readCapture(t, src, "ib_write_bw.pcap"), 18515)
	if len(ss) != 2 {
		t.Fatalf("%d streams", len(ss))
	}
	for i, s := range ss {
		// version 16 + 4 + 4 + MTU 2 + 4 key messages + results 5×8 + key + "done"
		want := 16 + 4 + 4 + 2 + 4*108 + 5*8 + 108 + 5
		if len(s.ToServer) != want || len(s.ToClient) != want || s.Gap {
			t.Errorf("stream %d: %d and %d bytes, gap %v; want %d", i, len(s.ToServer), len(s.ToClient), s.Gap, want)
		}
		if string(s.ToServer[:4]) != "6.06" || s.Server.Port() != 18515 || s.Client.Addr().String() != "10.77.0.12" {
			t.Errorf("stream %d: %q from %v to %v", i, s.ToServer[:4], s.Client, s.Server)
		}
	}
	if want := factsOf(t, src).streamFirst; ss[0].First != want[0] || ss[1].First != want[1] || ss[0].Last >= ss[1].First {
		t.Errorf("frames %d-%d, %d-%d", ss[0].First, ss[0].Last, ss[1].First, ss[1].Last)
	}
}

// tcpFrame builds an Ethernet/IPv4/TCP frame.
func tcpFrame(t *testing.T, idx int, seq uint32, syn, toServer bool, payload string) pcap.Frame {
	eth := &layers.Ethernet{SrcMAC: net.HardwareAddr(cliMAC[:]), DstMAC: net.HardwareAddr(srvMAC[:]), EthernetType: layers.EthernetTypeIPv4}
	ip := &layers.IPv4{Version: 4, TTL: 64, Protocol: layers.IPProtocolTCP, SrcIP: net.IP{10, 0, 0, 1}, DstIP: net.IP{10, 0, 0, 2}}
	tcp := &layers.TCP{SrcPort: 40000, DstPort: 18515, Seq: seq, SYN: syn, Window: 1000}
	if !toServer {
		ip.SrcIP, ip.DstIP = ip.DstIP, ip.SrcIP
		tcp.SrcPort, tcp.DstPort = tcp.DstPort, tcp.SrcPort
		tcp.ACK = true
	}
	must(t, tcp.SetNetworkLayerForChecksum(ip))
	buf := gopacket.NewSerializeBuffer()
	must(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, eth, ip, tcp, gopacket.Payload(payload)))
	return pcap.Frame{Index: idx, Time: time.Unix(0, int64(idx)), Data: buf.Bytes(), Len: len(buf.Bytes())}
}

// TestTCPStreamsReassembly: out-of-order, retransmitted and overlapping segments
// give the bytes once, in order; a hole stops the direction and is reported; a new
// SYN on the same ports starts a new connection.
func TestTCPStreamsReassembly(t *testing.T) {
	frames := []pcap.Frame{
		tcpFrame(t, 1, 100, true, true, ""),
		tcpFrame(t, 2, 500, true, false, ""),
		tcpFrame(t, 3, 107, false, true, "world"),  // before "hello " arrives
		tcpFrame(t, 4, 101, false, true, "hello "), // 101..106
		tcpFrame(t, 5, 101, false, true, "hello "), // retransmitted
		tcpFrame(t, 6, 110, false, true, "ld!!"),   // overlaps "world"
		tcpFrame(t, 7, 501, false, false, "ok"),
		tcpFrame(t, 8, 510, false, false, "lost"), // 503..509 never captured
		tcpFrame(t, 9, 9000, true, true, ""),      // a new connection, same ports
		tcpFrame(t, 10, 9001, false, true, "again"),
	}
	ss := pcap.TCPStreams(frames, 18515)
	if len(ss) != 2 {
		t.Fatalf("%d streams", len(ss))
	}
	if got := string(ss[0].ToServer); got != "hello world!!" {
		t.Errorf("to server %q", got)
	}
	if got := string(ss[0].ToClient); got != "ok" || !ss[0].Gap {
		t.Errorf("to client %q, gap %v", got, ss[0].Gap)
	}
	if !bytes.Equal(ss[1].ToServer, []byte("again")) || ss[1].First != 9 || ss[0].Last != 8 {
		t.Errorf("second connection %+v", ss[1])
	}
	// Garbage and truncated frames are skipped.
	bad := append([]pcap.Frame(nil), frames...)
	for i := range bad {
		bad[i].Data = bad[i].Data[:len(bad[i].Data)/2]
	}
	_ = pcap.TCPStreams(bad, 18515)
}
