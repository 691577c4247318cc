package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/xroce/xroce/transport"
)

// dcqcnParam is one DCQCN parameter --dcqcn sets, by its mlx5 name
// (drivers/infiniband/hw/mlx5/cong.c; docs/congestion.md lists the defaults).
type dcqcnParam struct {
	name string
	unit string // what a value counts: Mb/s, µs, bytes or 1/1024
	max  int64  // the largest value taken (the smallest is 1)
	set  func(p *transport.DCQCNParams, v int64)
}

var dcqcnParams = []dcqcnParam{
	{"rpg_max_rate", "Mb/s", 400_000, func(p *transport.DCQCNParams, v int64) { p.MaxRate = v * 1e6 }},
	{"rpg_min_rate", "Mb/s", 400_000, func(p *transport.DCQCNParams, v int64) { p.MinRate = v * 1e6 }},
	{"rpg_ai_rate", "Mb/s", 400_000, func(p *transport.DCQCNParams, v int64) { p.AIRate = v * 1e6 }},
	{"rpg_hai_rate", "Mb/s", 400_000, func(p *transport.DCQCNParams, v int64) { p.HAIRate = v * 1e6 }},
	{"rpg_time_reset", "µs", 1e7, func(p *transport.DCQCNParams, v int64) { p.TimeReset = time.Duration(v) * time.Microsecond }},
	{"rpg_byte_reset", "bytes", 1 << 30, func(p *transport.DCQCNParams, v int64) { p.ByteReset = int(v) }},
	{"rpg_threshold", "increase events", 31, func(p *transport.DCQCNParams, v int64) { p.Threshold = int(v) }},
	{"rpg_gd", "log2 of alpha's divisor", 15, func(p *transport.DCQCNParams, v int64) { p.Gd = uint(v) }},
	{"rpg_min_dec_fac", "per cent; 100 would forbid every cut", 99, func(p *transport.DCQCNParams, v int64) { p.MinDecFac = int(v) }},
	{"dce_tcp_g", "1/1024", 1023, func(p *transport.DCQCNParams, v int64) { p.G = int(v) }},
	{"dce_tcp_rtt", "µs", 1e7, func(p *transport.DCQCNParams, v int64) { p.AlphaPeriod = time.Duration(v) * time.Microsecond }},
	{"initial_alpha_value", "1/1024", 1023, func(p *transport.DCQCNParams, v int64) { p.InitialAlpha = int(v) }},
	{"rate_reduce_monitor_period", "µs", 1e7, func(p *transport.DCQCNParams, v int64) { p.ReducePeriod = time.Duration(v) * time.Microsecond }},
	{"min_time_between_cnps", "µs", 1e7, func(p *transport.DCQCNParams, v int64) { p.CNPInterval = time.Duration(v) * time.Microsecond }},
	{"cnp_dscp", "DSCP", 63, func(p *transport.DCQCNParams, v int64) { p.CNPDSCP = uint8(v) }},
}

// The --dcqcn presets: software (transport.SoftwareDCQCN), the default, and mlx5
// (transport.DefaultDCQCN: mlx5's defaults).
var dcqcnPresets = map[string]func() transport.DCQCNParams{
	"software": transport.SoftwareDCQCN,
	"mlx5":     transport.DefaultDCQCN,
}

// parseDCQCN reads --dcqcn: NAME=VALUE pairs, comma separated, NAME one of mlx5's
// DCQCN parameters (rates in Mb/s, times in µs), optionally after a preset name as
// the first item: software (the default) or mlx5. Parameters not named keep the
// preset's values. A value of 0 is refused (in DCQCNParams it means mlx5's
// default), and so are rates that contradict each other (checkDCQCN).
func parseDCQCN(s string) (transport.DCQCNParams, error) {
	p := transport.SoftwareDCQCN()
	if s == "" {
		return p, nil
	}
	items := strings.Split(s, ",")
	for i := range items {
		items[i] = strings.TrimSpace(items[i])
		if items[i] == "" {
			return p, fmt.Errorf("--dcqcn %q: item %d is empty (a stray comma?); want NAME=VALUE pairs separated by single commas, e.g. dce_tcp_rtt=55,dce_tcp_g=1020", s, i+1)
		}
	}
	if preset, ok := dcqcnPresets[items[0]]; ok {
		p, items = preset(), items[1:]
	}
	seen := map[string]bool{}
	for _, kv := range items {
		name, v, err := dcqcnPair(s, kv)
		if err != nil {
			return p, err
		}
		if seen[name.name] {
			return p, fmt.Errorf("--dcqcn %q: %s given twice", s, name.name)
		}
		seen[name.name] = true
		name.set(&p, v)
	}
	return p, checkDCQCN(s, p)
}

// dcqcnPair reads one NAME=VALUE item of --dcqcn s.
func dcqcnPair(s, kv string) (dcqcnParam, int64, error) {
	name, val, ok := strings.Cut(kv, "=")
	name, val = strings.TrimSpace(name), strings.TrimSpace(val)
	if _, preset := dcqcnPresets[name]; preset {
		if ok {
			return dcqcnParam{}, 0, fmt.Errorf("--dcqcn %q: %s is a preset and takes no value; name it alone, as the first item", s, name)
		}
		return dcqcnParam{}, 0, fmt.Errorf("--dcqcn %q: one preset at most, and only as the first item, e.g. %s,dce_tcp_rtt=55", s, name)
	}
	if !ok {
		return dcqcnParam{}, 0, fmt.Errorf("--dcqcn %q: %q is not NAME=VALUE; want NAME=VALUE pairs separated by commas, e.g. dce_tcp_rtt=55,dce_tcp_g=1020, optionally after a preset first (software or mlx5)", s, kv)
	}
	prm, err := dcqcnParamNamed(name)
	if err != nil {
		return prm, 0, err
	}
	v, err := strconv.ParseInt(val, 10, 64)
	if err != nil || v < 1 || v > prm.max { // 0 means the default in DCQCNParams
		return prm, 0, fmt.Errorf("--dcqcn %s=%s: want a whole number from 1 to %d (%s)", name, val, prm.max, prm.unit)
	}
	return prm, v, nil
}

// checkDCQCN refuses rates that contradict each other: a floor above the line
// rate, or a step of increase larger than the line rate.
func checkDCQCN(s string, p transport.DCQCNParams) error {
	mb := func(r int64) int64 { return r / 1e6 }
	switch {
	case p.MinRate > p.MaxRate:
		return fmt.Errorf("--dcqcn %q: rpg_min_rate %d Mb/s is above rpg_max_rate %d Mb/s, the line rate: the rate could never be cut; lower rpg_min_rate", s, mb(p.MinRate), mb(p.MaxRate))
	case p.AIRate > p.MaxRate || p.HAIRate > p.MaxRate:
		return fmt.Errorf("--dcqcn %q: rpg_ai_rate %d and rpg_hai_rate %d Mb/s must not exceed rpg_max_rate %d Mb/s, the line rate: one step would undo any cut", s, mb(p.AIRate), mb(p.HAIRate), mb(p.MaxRate))
	}
	return nil
}

// dcqcnParamNamed finds a --dcqcn parameter, or says which names there are.
func dcqcnParamNamed(name string) (dcqcnParam, error) {
	names := make([]string, len(dcqcnParams))
	for i, prm := range dcqcnParams {
		if prm.name == name {
			return prm, nil
		}
		names[i] = prm.name
	}
	return dcqcnParam{}, fmt.Errorf("--dcqcn %q: not a DCQCN parameter; want one of mlx5's names: %s", name, strings.Join(names, ", "))
}
