package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/xroce/xroce/cmd/xroce/oob"
	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

const rule = "---------------------------------------------------------------------------------------"

var testTitles = map[string]string{
	"write_bw": "RDMA_Write BW Test", "read_bw": "RDMA_Read BW Test", "send_bw": "Send BW Test",
	"atomic_bw": "Atomic FETCH_AND_ADD BW Test", "write_lat": "RDMA_Write Latency Test",
	"read_lat": "RDMA_Read Latency Test", "send_lat": "Send Latency Test",
}

// verbose says whether the tool prints perftest's whole report, or (--output)
// only one figure per size.
func (c *conn) verbose() bool { return c.o.output == "" }

// rule prints the report's rule line.
func (c *conn) rule() {
	if c.verbose() {
		fmt.Fprintln(c.o.out, rule)
	}
}

// title is perftest's name of the test: "RDMA_Write BW Test", "Send Bidirectional
// Post List BW Test".
func (c *conn) title() string {
	title := testTitles[c.t.name]
	if c.t.op == transport.WR_ATOMIC_CMP_AND_SWP {
		title = "Atomic CMP_AND_SWAP BW Test"
	}
	if c.t.lat {
		return title
	}
	mods := ""
	if c.o.bidir {
		mods += "Bidirectional "
	}
	if c.o.postList > 1 {
		mods += "Post List "
	}
	return strings.TrimSuffix(title, "BW Test") + mods + "BW Test"
}

// txDepth is the TX depth perftest's header shows: -t, or 1 for a latency test
// (DEF_TX_LAT), which has one message in flight.
func (c *conn) txDepth() int {
	if c.t.lat {
		return 1
	}
	return c.o.txDepth
}

// printHeader prints perftest's header block and both sides' addresses (nothing
// with --output).
func (c *conn) printHeader(peerMTU roce.MTU) {
	if !c.verbose() {
		return
	}
	w := c.o.out
	fmt.Fprintln(w, rule)
	fmt.Fprintf(w, "                    %s\n", c.title())
	if c.o.events {
		fmt.Fprintf(w, " Test with events. Using %s_comp0\n", c.o.dev)
	}
	fmt.Fprintf(w, " Dual-port       : OFF\t\tDevice         : %s\n", c.o.dev)
	fmt.Fprintf(w, " Number of qps   : %d\t\tTransport type : IB\n", len(c.qps))
	fmt.Fprintf(w, " Connection type : RC\t\tUsing SRQ      : OFF\n")
	fmt.Fprintf(w, " PCIe relax order: ON\n")  // perftest's own setting (--disable_pcie_relaxed)
	fmt.Fprintf(w, " ibv_wr* API     : OFF\n") // as perftest prints on rdma_rxe (its ibv_wr_* path is for the devices it lists)
	if c.client || c.o.bidir {
		fmt.Fprintf(w, " TX depth        : %d\n", c.txDepth())
	}
	if c.o.postList > 1 {
		fmt.Fprintf(w, " Post List       : %d\n", c.o.postList)
	}
	if c.t.op == transport.WR_SEND && (!c.client || c.o.bidir) {
		fmt.Fprintf(w, " RX depth        : %d\n", c.o.rxDepth)
	}
	if !c.t.lat {
		fmt.Fprintf(w, " CQ Moderation   : %d\n", c.o.cqMod)
	}
	fmt.Fprintf(w, " Mtu             : %d[B]\n", c.mtu.Bytes())
	if peerMTU != c.ourMTU() {
		fmt.Fprintf(w, " Path MTU        : ours %d[B], the peer's %d[B]: using %d[B]\n", c.ourMTU().Bytes(), peerMTU.Bytes(), c.mtu.Bytes())
	}
	fmt.Fprintf(w, " Link type       : Ethernet\n")
	fmt.Fprintf(w, " GID index       : %d\n", c.env.gid.Index)
	if c.t.op == transport.WR_RDMA_READ || c.atomic() {
		fmt.Fprintf(w, " Outstand reads  : %d\n", c.local[0].OutReads)
	} else {
		fmt.Fprintf(w, " Max inline data : %d[B]\n", c.o.inline)
	}
	if c.o.rdmaCM {
		fmt.Fprintf(w, " rdma_cm QPs\t : ON\n")
		fmt.Fprintf(w, " Data ex. method : rdma_cm\n")
	} else {
		fmt.Fprintf(w, " rdma_cm QPs\t : OFF\n")
		fmt.Fprintf(w, " Data ex. method : Ethernet\n")
	}
	link := c.env.link
	if link == "" {
		link = c.o.link
	}
	fmt.Fprintf(w, " xroce link      : %s\n", link)
	if c.o.cc == "dcqcn" {
		params := c.o.dcqcn
		if params == "" {
			params = "software"
		}
		noEffect := ""
		if c.o.link == "udp" {
			// The kernel's UDP socket does not report a frame's TOS: no CE mark is
			// seen, no CNP sent (docs/congestion.md).
			noEffect = " (no effect over the UDP link, which sees no CE marks: use --link xdp)"
		}
		fmt.Fprintf(w, " xroce cc        : dcqcn, --dcqcn %s%s\n", params, noEffect)
	}
	if c.o.rdmaCM && !c.client { // perftest's -R server, after its rule
		fmt.Fprintln(w, rule)
		fmt.Fprintln(w, " Waiting for client rdma_cm QP to connect")
		fmt.Fprintln(w, " Please run the same command with the IB/RoCE interface IP")
	}
	fmt.Fprintln(w, rule)
	for _, d := range []struct {
		name  string
		dests []oob.Dest
	}{{"local", c.local}, {"remote", c.remote}} {
		for _, dest := range d.dests {
			fmt.Fprintln(w, addrLine(d.name, dest, c.t.op))
			fmt.Fprintf(w, " GID: %s\n", gidDecimal(dest.GID))
		}
	}
	fmt.Fprintln(w, rule)
}

// gidDecimal prints a GID as perftest does: 16 bytes in decimal, colon-separated.
func gidDecimal(g roce.GID) string {
	s := make([]string, 16)
	for i, b := range g {
		s[i] = fmt.Sprintf("%02d", b)
	}
	return strings.Join(s, ":")
}

// printBWHead prints the head of perftest's bandwidth table.
func (c *conn) printBWHead() {
	if !c.verbose() {
		return
	}
	unit := "MB/sec"
	if c.o.reportGbits {
		unit = "Gb/sec"
	}
	fmt.Fprintf(c.o.out, " #bytes     #iterations    BW peak[%s]    BW average[%s]   MsgRate[Mpps]\n", unit, unit)
}

// printBWRow prints one row of the bandwidth table; with --output, the one
// figure asked for, as perftest prints it ("%lf"). Gb/s below 0.1 get six
// decimals, as perftest's REPORT_FMT_EXT gives them.
func (c *conn) printBWRow(r oob.Results) {
	switch c.o.output {
	case "bandwidth":
		fmt.Fprintf(c.o.out, "%f\n", r.AvgBW)
	case "message_rate":
		fmt.Fprintf(c.o.out, "%f\n", r.MsgRate)
	default:
		if c.o.reportGbits && r.AvgBW < 0.1 {
			fmt.Fprintf(c.o.out, " %-10d %-14d %-18.6f %-20.6f %.6f\n", r.Size, r.Iters, r.PeakBW, r.AvgBW, r.MsgRate)
			return
		}
		fmt.Fprintf(c.o.out, " %-10d %-14d %-18.2f %-20.2f %.6f\n", r.Size, r.Iters, r.PeakBW, r.AvgBW, r.MsgRate)
	}
}

// printLatHead prints the head of perftest's latency table.
func (c *conn) printLatHead() {
	if !c.verbose() {
		return
	}
	fmt.Fprintf(c.o.out, " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99%% percentile[usec]   99.9%% percentile[usec]\n")
}

// printLat prints one row of the latency table: the size just run. Like perftest's
// print_report_lat, #iterations is -n, whatever number of samples the figures
// come from (write_lat's client times the n-1 gaps between n arrivals).
func (c *conn) printLat(lats []time.Duration) {
	sorted := append([]time.Duration(nil), lats...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	var sum float64
	for _, d := range sorted {
		sum += usec(d)
	}
	avg := sum / float64(len(sorted))
	var sq float64
	for _, d := range sorted {
		sq += (usec(d) - avg) * (usec(d) - avg)
	}
	stdev := math.Sqrt(sq / float64(len(sorted)))
	if c.o.output == "latency" {
		fmt.Fprintf(c.o.out, "%f\n", avg)
		return
	}
	fmt.Fprintf(c.o.out, " %-7d %-13d %-14.2f %-12.2f %-18.2f %-14.2f %-18.2f %-22.2f %.2f\n", c.size, c.o.iters,
		usec(sorted[0]), usec(sorted[len(sorted)-1]), usec(percentile(sorted, 50)), avg, stdev,
		usec(percentile(sorted, 99)), usec(percentile(sorted, 99.9)))
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func usec(d time.Duration) float64 { return float64(d) / 1e3 }
