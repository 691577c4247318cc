package transport

import (
	"fmt"
	"time"
)

// CongestionControl selects a device's rate-based congestion control
// (docs/congestion.md, "DCQCN"). The congestion window and the RTT-timed
// retransmission (cwnd.go, rtt.go) run under either.
type CongestionControl uint8

const (
	// CCNone is rdma_rxe's behaviour, the default: packets leave with the ECN field
	// the QP's traffic class gives (00 unless --tclass says otherwise, as rdma_rxe
	// sends), CE-marked packets are counted but answered with no CNP, and received
	// CNPs are counted as rp_cnp_ignored (rdma_rxe has no CNP handling at all).
	CCNone CongestionControl = iota
	// CCDCQCN is DCQCN (Zhu et al., "Congestion Control for Large-Scale RDMA
	// Deployments", SIGCOMM 2015) with Options.DCQCN's parameters (zero: mlx5's
	// defaults; the tools default to SoftwareDCQCN): packets leave
	// ECN-capable (ECT(0)), the device answers CE-marked packets with CNPs
	// (notification point) and paces each QP at the rate the CNPs it receives
	// leave it (reaction point).
	CCDCQCN
)

// String returns the name ParseCongestionControl takes: "none" or "dcqcn".
func (c CongestionControl) String() string {
	switch c {
	case CCNone:
		return "none"
	case CCDCQCN:
		return "dcqcn"
	}
	return fmt.Sprintf("CongestionControl(%d)", uint8(c))
}

// ParseCongestionControl returns the congestion control named s: "none" or "dcqcn".
func ParseCongestionControl(s string) (CongestionControl, error) {
	switch s {
	case "none":
		return CCNone, nil
	case "dcqcn":
		return CCDCQCN, nil
	}
	return 0, fmt.Errorf("congestion control %q: none (rdma_rxe's: no ECN, no CNPs) or dcqcn", s)
}

// DCQCNParams are DCQCN's parameters, with the names of mlx5's congestion
// parameters (drivers/infiniband/hw/mlx5/cong.c; NVIDIA "DCQCN CC Parameters").
// A zero field takes its default (DefaultDCQCN).
type DCQCNParams struct {
	// MaxRate is the line rate in bits/s: a QP's rate before its first CNP and the
	// rate at which its limiter is released (rpg_max_rate 0: the port's speed).
	MaxRate int64
	// MinRate is the lowest rate a cut leaves, bits/s (rpg_min_rate, 1 Mb/s).
	MinRate int64
	// AIRate and HAIRate raise the target rate in additive and hyper increase,
	// bits/s (rpg_ai_rate 5 Mb/s, rpg_hai_rate 50 Mb/s).
	AIRate, HAIRate int64
	// TimeReset is the rate-increase timer (rpg_time_reset, 300 µs).
	TimeReset time.Duration
	// ByteReset is the rate-increase byte counter in bytes (rpg_byte_reset, 32767).
	ByteReset int
	// Threshold is F: increase events of fast recovery before additive increase
	// (rpg_threshold, 1).
	Threshold int
	// G is the alpha gain in 1/1024 (dce_tcp_g, 1019): every AlphaPeriod alpha
	// becomes α·G/1024, plus (1024 − G) when a CNP came in the period.
	G int
	// AlphaPeriod is alpha's update period (dce_tcp_rtt, 1 µs).
	AlphaPeriod time.Duration
	// InitialAlpha is alpha at a QP's first CNP, in 1/1024 (initial_alpha_value,
	// 1023).
	InitialAlpha int
	// ReducePeriod is the least time between two rate cuts of a QP
	// (rate_reduce_monitor_period, 4 µs): CNPs in between make one cut at its end.
	ReducePeriod time.Duration
	// Gd is log2 of the cut's divisor of alpha, alpha counted in 1/1024 (rpg_gd,
	// 11): the cut is Rc·α/2^Gd, the paper's Rc·α/2.
	Gd uint
	// MinDecFac is the least share of the rate a cut leaves, in per cent
	// (rpg_min_dec_fac, 50).
	MinDecFac int
	// CNPInterval is the least time between two CNPs the device sends to one QP
	// (the notification point's min_time_between_cnps, 4 µs).
	CNPInterval time.Duration
	// CNPDSCP is the DSCP of the CNPs the device sends (cnp_dscp, 48).
	CNPDSCP uint8
}

// DefaultLineRate is DCQCNParams.MaxRate's default: 10 Gb/s, the speed a veth
// reports. mlx5 starts a QP's limiter at the port's speed; xroce's engine moves
// less than that on the development VM (about 3 Gb/s), so its first cuts bring the
// rate down to what the engine sends before they limit anything.
const DefaultLineRate = 10_000_000_000

// DefaultDCQCN returns mlx5's default DCQCN parameters (NVIDIA, "DCQCN CC
// Parameters", ConnectX-4 and later; docs/congestion.md lists each with its source).
func DefaultDCQCN() DCQCNParams {
	return DCQCNParams{
		MaxRate: DefaultLineRate, MinRate: 1_000_000, AIRate: 5_000_000, HAIRate: 50_000_000,
		TimeReset: 300 * time.Microsecond, ByteReset: 32767, Threshold: 1,
		G: 1019, AlphaPeriod: time.Microsecond, InitialAlpha: 1023,
		ReducePeriod: 4 * time.Microsecond, Gd: 11, MinDecFac: 50,
		CNPInterval: 4 * time.Microsecond, CNPDSCP: 48,
	}
}

// SoftwareDCQCN returns DCQCN parameters scaled to a software RoCE path, where a
// QP moves a few Gb/s and a marked one draws a CNP every 100-200 µs rather than
// every few µs (docs/congestion.md, "DCQCN on a software path"). With mlx5's
// defaults alpha decays to nothing between two such CNPs and fast recovery
// climbs back towards a 10 Gb/s target at once, so the rate never comes down
// near a marking point. Here the line rate is 3 Gb/s (about what the engine
// sends), alpha is averaged over 55 µs periods with g = 1020/1024 (the DCQCN
// paper's K and g = 1/256), the rate rises every 1.5 ms or 1 MiB sent, by 40 Mb/s
// (the paper's R_AI), 100 Mb/s in hyper increase, after 5 events of fast
// recovery (the paper's F). The rest are mlx5's. Measured: the sender settles
// within 5 % of an nftables mark rate of 30 and 80 MiB/s with no drops, where
// mlx5's defaults keep it at 200-340 MiB/s.
func SoftwareDCQCN() DCQCNParams {
	p := DefaultDCQCN()
	p.MaxRate = 3_000_000_000
	p.AlphaPeriod, p.G = 55*time.Microsecond, 1020
	p.TimeReset, p.ByteReset = 1500*time.Microsecond, 1<<20
	p.AIRate, p.HAIRate, p.Threshold = 40_000_000, 100_000_000, 5
	return p
}

// withDefaults returns p with each zero field set to its default.
func (p DCQCNParams) withDefaults() DCQCNParams {
	d := DefaultDCQCN()
	setDefault(&p.MaxRate, d.MaxRate)
	setDefault(&p.MinRate, d.MinRate)
	setDefault(&p.AIRate, d.AIRate)
	setDefault(&p.HAIRate, d.HAIRate)
	setDefault(&p.TimeReset, d.TimeReset)
	setDefault(&p.ByteReset, d.ByteReset)
	setDefault(&p.Threshold, d.Threshold)
	setDefault(&p.G, d.G)
	setDefault(&p.AlphaPeriod, d.AlphaPeriod)
	setDefault(&p.InitialAlpha, d.InitialAlpha)
	setDefault(&p.ReducePeriod, d.ReducePeriod)
	setDefault(&p.Gd, d.Gd)
	setDefault(&p.MinDecFac, d.MinDecFac)
	setDefault(&p.CNPInterval, d.CNPInterval)
	setDefault(&p.CNPDSCP, d.CNPDSCP)
	return p
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}
