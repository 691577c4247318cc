package roce_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/roce/internal/rocetest"
)

// tsharkFields are the Wireshark InfiniBand dissector fields the test compares.
var tsharkFields = []string{
	"infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.psn", "infiniband.bth.a",
	"infiniband.bth.padcnt", "infiniband.reth.va", "infiniband.reth.r_key", "infiniband.reth.dmalen",
	"infiniband.aeth.syndrome", "infiniband.aeth.msn", "infiniband.atomiceth.swapdt", "infiniband.atomiceth.cmpdt",
	"infiniband.atomicacketh.origremdt", "infiniband.immdt", "infiniband.ieth",
	"infiniband.deth.q_key", "infiniband.deth.srcqp", "_ws.malformed", "_ws.expert.severity",
}

// expectFields renders what tshark should print for p, in tsharkFields order.
func expectFields(p *roce.Packet) []string {
	h := p.Headers
	opt := func(has roce.Header, v string) string {
		if h&has != 0 {
			return v
		}
		return ""
	}
	d := func(v uint64) string { return strconv.FormatUint(v, 10) }
	x := func(v uint64, w int) string { return fmt.Sprintf("0x%0*x", w, v) }
	ackreq := "0"
	if p.BTH.AckReq {
		ackreq = "1"
	}
	// Wireshark shows the AtomicETH's VA and R_Key under the RETH field names.
	va, rkey := opt(roce.HdrRETH, x(p.RETH.VA, 16)), opt(roce.HdrRETH, x(uint64(p.RETH.RKey), 8))
	if h&roce.HdrAtomicETH != 0 {
		va, rkey = x(p.AtomicETH.VA, 16), x(uint64(p.AtomicETH.RKey), 8)
	}
	return []string{
		d(uint64(p.BTH.Opcode)), x(uint64(p.BTH.DestQP), 6), d(uint64(p.BTH.PSN)), ackreq,
		d(uint64(p.BTH.PadCnt)),
		va, rkey, opt(roce.HdrRETH, d(uint64(p.RETH.DMALen))),
		opt(roce.HdrAETH, d(uint64(p.AETH.Syndrome))), opt(roce.HdrAETH, d(uint64(p.AETH.MSN))),
		opt(roce.HdrAtomicETH, d(p.AtomicETH.SwapAdd)), opt(roce.HdrAtomicETH, d(p.AtomicETH.Compare)),
		opt(roce.HdrAtomicAckETH, d(p.AtomicAckETH.OrigRemData)), opt(roce.HdrImmDt, fmt.Sprintf("%08x", uint32(p.ImmDt))),
		opt(roce.HdrIETH, fmt.Sprintf("%08x", p.IETH.RKey)),
		opt(roce.HdrDETH, x(uint64(p.DETH.QKey), 16)), opt(roce.HdrDETH, x(uint64(p.DETH.SrcQP), 8)),
		"", "",
	}
}

// TestTsharkDecodesBuiltFrames writes frames built by Packet.Encode to a pcap and
// checks Wireshark's InfiniBand dissector reads back the same fields and no
// malformation or expert warning.
func TestTsharkDecodesBuiltFrames(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Fatal("tshark is required: apt-get install -y tshark (.ci/run installs it)")
	}
	var names []string
	var pkts []roce.Packet
	for _, v6 := range []bool{false, true} {
		m := rocetest.Samples(v6)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if k == "FLUSH" || k == "ATOMIC_WRITE" {
				continue // IBTA 1.5 opcodes: Wireshark 4.0's dissector predates them
			}
			names = append(names, fmt.Sprintf("%s/v6=%v", k, v6))
			pkts = append(pkts, m[k])
		}
	}
	file := filepath.Join(t.TempDir(), "built.pcap")
	frames := make([][]byte, len(pkts))
	for i := range pkts {
		frames[i] = make([]byte, pkts[i].Len())
		if _, err := pkts[i].Encode(frames[i]); err != nil {
			t.Fatalf("%s: %v", names[i], err)
		}
	}
	if err := rocetest.WritePcap(file, frames, time.Unix(1796007739, 0)); err != nil {
		t.Fatal(err)
	}
	// The SEND payloads are test patterns: keep Wireshark's RPC-over-RDMA heuristic
	// from reading them as RPC messages.
	args := []string{"-r", file, "-n", "--disable-protocol", "rpcordma", "-T", "fields", "-E", "separator=/t", "-E", "occurrence=f"}
	for _, fl := range tsharkFields {
		args = append(args, "-e", fl)
	}
	out, err := exec.Command(tshark, args...).Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != len(pkts) {
		t.Fatalf("tshark printed %d lines for %d frames:\n%s", len(lines), len(pkts), out)
	}
	for i, line := range lines {
		got := strings.Split(line, "\t")
		want := expectFields(&pkts[i])
		if len(got) != len(want) {
			t.Errorf("%s: tshark fields %q", names[i], got)
			continue
		}
		for j := range want {
			if !strings.EqualFold(got[j], want[j]) {
				t.Errorf("%s: %s = %q, want %q", names[i], tsharkFields[j], got[j], want[j])
			}
		}
	}
}
