package main

import (
	"context"
	"strings"
	"time"

	"github.com/xroce/xroce/cmd/xroce/daemon"
	"github.com/xroce/xroce/pcap"
	"github.com/xroce/xroce/transport"
	"github.com/xroce/xroce/xdp"
)

// xskCounters returns a function that reads the AF_XDP counters of link (under a
// --pcap tap too), the kernel's struct xdp_statistics summed over its sockets, as
// counters named daemon.LinkCounterPrefix and the kernel's field name; nil for a
// link that has none (--link udp).
func xskCounters(link transport.Link) func() []daemon.Counter {
	if t, ok := link.(*pcap.Tap); ok {
		link = t.Link
	}
	l, ok := link.(*xdp.Link)
	if !ok {
		return nil
	}
	return func() []daemon.Counter {
		st, _ := l.Stats() // a closed link reads as zeros
		p := daemon.LinkCounterPrefix
		return []daemon.Counter{
			{Name: p + "rx_dropped", Value: st.Rx_dropped},
			{Name: p + "rx_ring_full", Value: st.Rx_ring_full},
			{Name: p + "rx_fill_ring_empty_descs", Value: st.Rx_fill_ring_empty_descs},
			{Name: p + "rx_invalid_descs", Value: st.Rx_invalid_descs},
			{Name: p + "tx_invalid_descs", Value: st.Tx_invalid_descs},
			{Name: p + "tx_ring_empty_descs", Value: st.Tx_ring_empty_descs},
		}
	}
}

// rxLost is how many frames of counters (xskCounters') the kernel dropped before
// the engine took them: no free receive chunk or too long (rx_dropped), no room on
// the RX ring (rx_ring_full).
func rxLost(counters []daemon.Counter) uint64 {
	return counterValue(counters, "rx_dropped") + counterValue(counters, "rx_ring_full")
}

// counterValue is the value of the link counter named daemon.LinkCounterPrefix +
// name in counters (0 when absent).
func counterValue(counters []daemon.Counter, name string) uint64 {
	for _, c := range counters {
		if c.Name == daemon.LinkCounterPrefix+name {
			return c.Value
		}
	}
	return 0
}

// dropCause says why the kernel dropped the frames counters show: the RX ring
// full (the engine did not take frames in time), or no free receive chunk (the
// fill ring empty: the engine did not hand chunks back in time), naming the
// counters that moved.
func dropCause(counters []daemon.Counter) string {
	p := daemon.LinkCounterPrefix
	var why []string
	if counterValue(counters, "rx_ring_full") > 0 {
		why = append(why, p+"rx_ring_full: its RX ring was full")
	}
	if counterValue(counters, "rx_dropped") > 0 {
		what := p + "rx_dropped"
		if counterValue(counters, "rx_fill_ring_empty_descs") > 0 {
			what += " with " + p + "rx_fill_ring_empty_descs: no free receive chunk, as the engine had not handed them back"
		}
		why = append(why, what)
	}
	return strings.Join(why, "; ")
}

// watchLinkDrops logs, at most once per oversizeLogEvery, that the kernel dropped
// frames for the device before its engine took them in, with the time they were
// dropped in and the cause. Nothing else says so: the engine never saw them, so no
// hw counter moved; RC QPs resend what was lost, but UD and UC messages are gone,
// and an application waiting for them waits for ever, as behind an HCA that drops.
func watchLinkDrops(ctx context.Context, counters func() []daemon.Counter, logf func(string, ...any)) {
	if counters == nil {
		return
	}
	since := time.Now()
	daemon.WatchGrowth(ctx, ifaceWatch, oversizeLogEvery, func() uint64 { return rxLost(counters()) }, func(grew, n uint64) {
		now := time.Now()
		logf("%d frame%s dropped by the kernel before the engine took them in, since %s (%d in all, in xroce stat; %s): the engine fell behind the link (a busy or stopped CPU, or a burst larger than its receive rings); RC QPs resend what was lost, but UD and UC messages are gone, and an application waiting for them waits for ever",
			grew, plural(int(grew)), since.Format(time.TimeOnly), n, dropCause(counters()))
		since = now
	})
}
