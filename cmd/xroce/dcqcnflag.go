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
	max  int64  // the largest value taken
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
	{"rpg_min_dec_fac", "%", 100, func(p *transport.DCQCNParams, v int64) { p.MinDecFac = int(v) }},
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
// default).
func parseDCQCN(s string) (transport.DCQCNParams, error) {
	p := transport.SoftwareDCQCN()
	if s == "" {
		return p, nil
	}
	items := strings.Split(s, ",")
	if preset, ok := dcqcnPresets[strings.TrimSpace(items[0])]; ok {
		p, items = preset(), items[1:]
	}
	seen := map[string]bool{}
	for _, kv := range items {
		name, val, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if _, ok := dcqcnPresets[name]; ok {
			return p, fmt.Errorf("--dcqcn %s: the preset %s comes first, before the parameters it should not set: %s,%s", s, name, name, strings.Replace(s, ","+name, "", 1))
		}
		if !ok {
			return p, fmt.Errorf("--dcqcn %q: want NAME=VALUE pairs separated by commas, e.g. dce_tcp_rtt=55,dce_tcp_g=1020, optionally after a preset first (software or mlx5)", kv)
		}
		prm, err := dcqcnParamNamed(name)
		if err != nil {
			return p, err
		}
		if seen[name] {
			return p, fmt.Errorf("--dcqcn: %s given twice", name)
		}
		seen[name] = true
		v, err := strconv.ParseInt(val, 10, 64)
		if err != nil || v < 1 || v > prm.max {
			return p, fmt.Errorf("--dcqcn %s=%s: want a whole number of %s from 1 to %d", name, val, prm.unit, prm.max)
		}
		prm.set(&p, v)
	}
	return p, nil
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
	return dcqcnParam{}, fmt.Errorf("--dcqcn %s: not a DCQCN parameter; want one of mlx5's names: %s", name, strings.Join(names, ", "))
}
