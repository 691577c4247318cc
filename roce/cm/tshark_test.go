package cm_test

import (
	"encoding/hex"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xroce/xroce/roce/cm"
	"github.com/xroce/xroce/roce/internal/rocetest"
	"github.com/xroce/xroce/test/captures"
)

// A tsField is a Wireshark InfiniBand dissector field and what this package says
// it holds for a MAD: "" when the field does not apply to the message (tshark
// prints nothing then too). Numbers are compared as values, addresses as addresses,
// byte fields as hex.
type tsField struct {
	names []string // a field, or the IPv6 and IPv4 forms of an address field
	attr  cm.AttributeID
	want  func(h cm.Header, m cm.Message) string
}

func num[T ~uint8 | ~uint16 | ~uint32 | ~uint64](v T) string {
	return strconv.FormatUint(uint64(v), 10)
}

func b2n(v bool) string {
	if v {
		return "1"
	}
	return "0"
}

func hdr(name string, f func(h cm.Header) string) tsField {
	return tsField{[]string{"infiniband.mad." + name}, 0, func(h cm.Header, _ cm.Message) string { return f(h) }}
}

func on[T cm.Message](attr cm.AttributeID, name string, f func(m T) string) tsField {
	names := []string{"infiniband.cm." + name}
	if strings.HasSuffix(name, "gid") || strings.HasPrefix(name, "req.ip_cm.sip") || strings.HasPrefix(name, "req.ip_cm.dip") {
		names = []string{"infiniband.cm." + name, "infiniband.cm." + name + "_ipv4"}
		if strings.HasPrefix(name, "req.ip_cm.") {
			names = []string{"infiniband.cm." + name + "6", "infiniband.cm." + name + "4"}
		}
	}
	return tsField{names, attr, func(_ cm.Header, m cm.Message) string { return f(m.(T)) }}
}

func ipcm(r *cm.REQ) cm.IPCMHeader {
	h, err := r.IPCM()
	if err != nil {
		panic(err)
	}
	return h
}

// tsharkFields: the common header; every REQ field Wireshark 4.0 decodes but the
// flow labels and packet rates (it reads them from the wrong bytes: see
// TestRecordedValues) and the alternate GIDs (shown as bytes); the IP CM header;
// REP, RTU, REJ, DREQ and DREP. Wireshark 4.0 decodes no other CM message's fields.
var tsharkFields = []tsField{
	hdr("baseversion", func(h cm.Header) string { return num(h.BaseVersion) }),
	hdr("mgmtclass", func(h cm.Header) string { return num(h.MgmtClass) }),
	hdr("classversion", func(h cm.Header) string { return num(h.ClassVersion) }),
	hdr("method", func(h cm.Header) string { return num(h.Method) }),
	hdr("status", func(h cm.Header) string { return num(h.Status) }),
	hdr("classspecific", func(h cm.Header) string { return num(h.ClassSpecific) }),
	hdr("transactionid", func(h cm.Header) string { return num(h.TransactionID) }),
	hdr("attributeid", func(h cm.Header) string { return num(h.AttributeID) }),
	hdr("attributemodifier", func(h cm.Header) string { return num(h.AttributeModifier) }),

	on(cm.AttrREQ, "req", func(m *cm.REQ) string { return num(m.LocalCommID) }),
	on(cm.AttrREQ, "req.serviceid", func(m *cm.REQ) string { return num(m.ServiceID) }),
	on(cm.AttrREQ, "req.localcaguid", func(m *cm.REQ) string { return num(m.LocalCAGUID) }),
	on(cm.AttrREQ, "req.localqkey", func(m *cm.REQ) string { return num(m.LocalQKey) }),
	on(cm.AttrREQ, "req.localqpn", func(m *cm.REQ) string { return num(m.LocalQPN) }),
	on(cm.AttrREQ, "req.responderres", func(m *cm.REQ) string { return num(m.ResponderResources) }),
	on(cm.AttrREQ, "req.localeecn", func(m *cm.REQ) string { return num(m.LocalEECN) }),
	on(cm.AttrREQ, "req.initdepth", func(m *cm.REQ) string { return num(m.InitiatorDepth) }),
	on(cm.AttrREQ, "req.remoteeecn", func(m *cm.REQ) string { return num(m.RemoteEECN) }),
	on(cm.AttrREQ, "req.remoteresptout", func(m *cm.REQ) string { return num(m.RemoteCMResponseTimeout) }),
	on(cm.AttrREQ, "req.transpsvctype", func(m *cm.REQ) string { return num(m.TransportServiceType) }),
	on(cm.AttrREQ, "req.e2eflowctrl", func(m *cm.REQ) string { return b2n(m.EndToEndFlowControl) }),
	on(cm.AttrREQ, "req.startpsn", func(m *cm.REQ) string { return num(m.StartingPSN) }),
	on(cm.AttrREQ, "req.localresptout", func(m *cm.REQ) string { return num(m.LocalCMResponseTimeout) }),
	on(cm.AttrREQ, "req.retrcount", func(m *cm.REQ) string { return num(m.RetryCount) }),
	on(cm.AttrREQ, "req.pkey", func(m *cm.REQ) string { return num(m.PKey) }),
	on(cm.AttrREQ, "req.pppmtu", func(m *cm.REQ) string { return num(m.PathMTU) }),
	on(cm.AttrREQ, "req.rdcexist", func(m *cm.REQ) string { return b2n(m.RDCExists) }),
	on(cm.AttrREQ, "req.rnrretrcount", func(m *cm.REQ) string { return num(m.RNRRetryCount) }),
	on(cm.AttrREQ, "req.maxcmretr", func(m *cm.REQ) string { return num(m.MaxCMRetries) }),
	on(cm.AttrREQ, "req.srq", func(m *cm.REQ) string { return b2n(m.SRQ) }),
	on(cm.AttrREQ, "req.ext_transport", func(m *cm.REQ) string { return num(m.ExtendedTransportType) }),
	on(cm.AttrREQ, "req.prim_locallid", func(m *cm.REQ) string { return num(m.Primary.LocalPortLID) }),
	on(cm.AttrREQ, "req.prim_remotelid", func(m *cm.REQ) string { return num(m.Primary.RemotePortLID) }),
	on(cm.AttrREQ, "req.prim_localgid", func(m *cm.REQ) string { return m.Primary.LocalPortGID.Addr().String() }),
	on(cm.AttrREQ, "req.prim_remotegid", func(m *cm.REQ) string { return m.Primary.RemotePortGID.Addr().String() }),
	on(cm.AttrREQ, "req.prim_tfcclass", func(m *cm.REQ) string { return num(m.Primary.TrafficClass) }),
	on(cm.AttrREQ, "req.prim_hoplim", func(m *cm.REQ) string { return num(m.Primary.HopLimit) }),
	on(cm.AttrREQ, "req.prim_sl", func(m *cm.REQ) string { return num(m.Primary.SL) }),
	on(cm.AttrREQ, "req.prim_subnetlocal", func(m *cm.REQ) string { return b2n(m.Primary.SubnetLocal) }),
	on(cm.AttrREQ, "req.prim_localacktout", func(m *cm.REQ) string { return num(m.Primary.LocalACKTimeout) }),
	on(cm.AttrREQ, "req.alt_locallid", func(m *cm.REQ) string { return num(m.Alternate.LocalPortLID) }),
	on(cm.AttrREQ, "req.alt_remotelid", func(m *cm.REQ) string { return num(m.Alternate.RemotePortLID) }),
	on(cm.AttrREQ, "req.alt_tfcclass", func(m *cm.REQ) string { return num(m.Alternate.TrafficClass) }),
	on(cm.AttrREQ, "req.alt_hoplim", func(m *cm.REQ) string { return num(m.Alternate.HopLimit) }),
	on(cm.AttrREQ, "req.alt_sl", func(m *cm.REQ) string { return num(m.Alternate.SL) }),
	on(cm.AttrREQ, "req.alt_subnetlocal", func(m *cm.REQ) string { return b2n(m.Alternate.SubnetLocal) }),
	on(cm.AttrREQ, "req.alt_localacktout", func(m *cm.REQ) string { return num(m.Alternate.LocalACKTimeout) }),
	on(cm.AttrREQ, "req.ip_cm.majv", func(m *cm.REQ) string { return num(ipcm(m).MajorVersion) }),
	on(cm.AttrREQ, "req.ip_cm.minv", func(m *cm.REQ) string { return num(ipcm(m).MinorVersion) }),
	on(cm.AttrREQ, "req.ip_cm.ipv", func(m *cm.REQ) string { return num(ipcm(m).IPVersion) }),
	on(cm.AttrREQ, "req.ip_cm.sport", func(m *cm.REQ) string { return num(ipcm(m).SourcePort) }),
	on(cm.AttrREQ, "req.ip_cm.sip", func(m *cm.REQ) string { return ipcm(m).SourceIP.String() }),
	on(cm.AttrREQ, "req.ip_cm.dip", func(m *cm.REQ) string { return ipcm(m).DestinationIP.String() }),
	on(cm.AttrREQ, "req.ip_cm.private", func(m *cm.REQ) string { return hex.EncodeToString(m.PrivateData[cm.IPCMHeaderLen:]) }),

	on(cm.AttrREP, "rep", func(m *cm.REP) string { return num(m.LocalCommID) }),
	on(cm.AttrREP, "rep.remotecommid", func(m *cm.REP) string { return num(m.RemoteCommID) }),
	on(cm.AttrREP, "rep.localqkey", func(m *cm.REP) string { return num(m.LocalQKey) }),
	on(cm.AttrREP, "rep.localqpn", func(m *cm.REP) string { return num(m.LocalQPN) }),
	on(cm.AttrREP, "rep.localeecn", func(m *cm.REP) string { return num(m.LocalEECN) }),
	on(cm.AttrREP, "rep.startpsn", func(m *cm.REP) string { return num(m.StartingPSN) }),
	on(cm.AttrREP, "rep.respres", func(m *cm.REP) string { return num(m.ResponderResources) }),
	on(cm.AttrREP, "rep.initdepth", func(m *cm.REP) string { return num(m.InitiatorDepth) }),
	on(cm.AttrREP, "rep.tgtackdelay", func(m *cm.REP) string { return num(m.TargetACKDelay) }),
	on(cm.AttrREP, "rep.failoveracc", func(m *cm.REP) string { return num(m.FailoverAccepted) }),
	on(cm.AttrREP, "rep.e2eflowctrl", func(m *cm.REP) string { return b2n(m.EndToEndFlowControl) }),
	on(cm.AttrREP, "rep.rnrretrcount", func(m *cm.REP) string { return num(m.RNRRetryCount) }),
	on(cm.AttrREP, "rep.srq", func(m *cm.REP) string { return b2n(m.SRQ) }),
	on(cm.AttrREP, "rep.localcaguid", func(m *cm.REP) string { return num(m.LocalCAGUID) }),
	on(cm.AttrREP, "rep.private", func(m *cm.REP) string { return hex.EncodeToString(m.PrivateData[:]) }),

	on(cm.AttrRTU, "rtu.localcommid", func(m *cm.RTU) string { return num(m.LocalCommID) }),
	on(cm.AttrRTU, "rtu.remotecommid", func(m *cm.RTU) string { return num(m.RemoteCommID) }),
	on(cm.AttrRTU, "rtu.private", func(m *cm.RTU) string { return hex.EncodeToString(m.PrivateData[:]) }),

	on(cm.AttrREJ, "rej.localcommid", func(m *cm.REJ) string { return num(m.LocalCommID) }),
	on(cm.AttrREJ, "rej.remotecommid", func(m *cm.REJ) string { return num(m.RemoteCommID) }),
	on(cm.AttrREJ, "rej.msgrej", func(m *cm.REJ) string { return num(m.MessageRejected) }),
	on(cm.AttrREJ, "rej.rejinfolen", func(m *cm.REJ) string { return num(m.RejectedInfoLength) }),
	on(cm.AttrREJ, "rej.reason", func(m *cm.REJ) string { return num(m.Reason) }),
	on(cm.AttrREJ, "rej.ari", func(m *cm.REJ) string { return hex.EncodeToString(m.ARI[:]) }),
	on(cm.AttrREJ, "rej.private", func(m *cm.REJ) string { return hex.EncodeToString(m.PrivateData[:]) }),

	on(cm.AttrDREQ, "dreq.localcommid", func(m *cm.DREQ) string { return num(m.LocalCommID) }),
	on(cm.AttrDREQ, "dreq.remotecommid", func(m *cm.DREQ) string { return num(m.RemoteCommID) }),
	on(cm.AttrDREQ, "req.remoteqpneecn", func(m *cm.DREQ) string { return num(m.RemoteQPNEECN) }),
	on(cm.AttrDREQ, "dreq.private", func(m *cm.DREQ) string { return hex.EncodeToString(m.PrivateData[:]) }),

	on(cm.AttrDREP, "drsp.localcommid", func(m *cm.DREP) string { return num(m.LocalCommID) }),
	on(cm.AttrDREP, "drsp.remotecommid", func(m *cm.DREP) string { return num(m.RemoteCommID) }),
	on(cm.AttrDREP, "drsp.private", func(m *cm.DREP) string { return hex.EncodeToString(m.PrivateData[:]) }),
}

// tsharkRows runs tshark on file for the GSI frames and returns, per frame number,
// each tsField's value (the first non-empty of its names), and whether Wireshark
// flagged the frame (malformed, or an expert note).
func tsharkRows(t *testing.T, file string) map[int][]string {
	t.Helper()
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Fatal("tshark is required: apt-get install -y tshark (.ci/run installs it)")
	}
	args := []string{"-r", file, "-n", "-Y", "infiniband.bth.destqp == 1", "-T", "fields",
		"-E", "separator=/t", "-E", "occurrence=f", "-e", "frame.number", "-e", "_ws.malformed", "-e", "_ws.expert.severity"}
	var cols [][]int
	n := 3
	for _, f := range tsharkFields {
		var c []int
		for _, name := range f.names {
			args = append(args, "-e", name)
			c = append(c, n)
			n++
		}
		cols = append(cols, c)
	}
	out, err := exec.Command(tshark, args...).Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	rows := map[int][]string{}
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		v := strings.Split(line, "\t")
		if len(v) != n {
			t.Fatalf("tshark printed %d fields, want %d: %q", len(v), n, line)
		}
		frame, _ := strconv.Atoi(v[0])
		if v[1] != "" || v[2] != "" {
			t.Errorf("frame %d: Wireshark flags it: malformed %q, expert %q", frame, v[1], v[2])
		}
		row := make([]string, len(tsharkFields))
		for i, c := range cols {
			for _, j := range c {
				if row[i] == "" {
					row[i] = v[j]
				}
			}
		}
		rows[frame] = row
	}
	return rows
}

// compareTshark checks tshark's row for a MAD against the package's decoding.
func compareTshark(t *testing.T, what string, row []string, h cm.Header, m cm.Message) {
	t.Helper()
	for i, f := range tsharkFields {
		want := ""
		if f.attr == 0 || f.attr == m.AttributeID() {
			want = f.want(h, m)
		}
		got := row[i]
		if n, err := strconv.ParseUint(got, 0, 64); err == nil && !strings.HasSuffix(f.names[0], "private") &&
			!strings.HasSuffix(f.names[0], "ari") {
			got = strconv.FormatUint(n, 10)
		} else if a, err := netip.ParseAddr(got); err == nil {
			got = a.Unmap().String()
		}
		if !strings.EqualFold(got, want) {
			t.Errorf("%s: %s = %q (tshark %q), want %q", what, f.names[0], got, row[i], want)
		}
	}
}

// TestTsharkCaptures: in rdma_rxe's exchange, every field Wireshark decodes equals
// this package's reading, in every CM frame of every capture source.
func TestTsharkCaptures(t *testing.T) {
	captures.Run(t, func(t *testing.T, s captures.Source) {
		rows := tsharkRows(t, s.Path(t, rdmacmCapture))
		frames := readCM(t, s)
		if len(rows) != len(frames) {
			t.Fatalf("tshark shows %d GSI frames, the package %d", len(rows), len(frames))
		}
		for _, f := range frames {
			row, ok := rows[f.Index]
			if !ok {
				t.Fatalf("frame %d: not in tshark's output", f.Index)
			}
			compareTshark(t, "frame "+strconv.Itoa(f.Index), row, f.Hdr, f.Msg)
		}
	})
}

// TestTsharkBuilt: frames this package builds, one per CM message over IPv4 and
// IPv6, are read by Wireshark with no malformation or expert note, and with the
// fields the package put in them.
func TestTsharkBuilt(t *testing.T) {
	var frames [][]byte
	var msgs []cm.Message
	var tids []uint64
	for _, v6 := range []bool{false, true} {
		for i, m := range samples() {
			// Wireshark shows a REQ's GIDs in the frame's IP version: pair them so.
			if r, ok := m.(*cm.REQ); ok && r.Primary.LocalPortGID.IsIPv4Mapped() == v6 {
				continue
			}
			tid := 0x1000 + uint64(i)
			frames = append(frames, sampleFrame(m, tid, uint32(len(frames)), v6))
			msgs = append(msgs, m)
			tids = append(tids, tid)
		}
	}
	file := filepath.Join(t.TempDir(), "built.pcap")
	if err := rocetest.WritePcap(file, frames, time.Unix(1796101813, 0)); err != nil {
		t.Fatal(err)
	}
	rows := tsharkRows(t, file)
	if len(rows) != len(frames) {
		t.Fatalf("tshark shows %d GSI frames, want %d", len(rows), len(frames))
	}
	for i, m := range msgs {
		compareTshark(t, m.AttributeID().String(), rows[i+1], cm.CMHeader(tids[i], m.AttributeID()), m)
	}
}
