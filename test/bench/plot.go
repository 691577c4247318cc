package main

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// plotGoodput draws goodput (MiB/s, log scale) against message size (bytes, log
// scale) for WRITE, READ and SEND over both links and for TCP, with the raw AF_XDP
// payload rates at PMTU 1024 and 2048 as horizontal lines, and writes a PNG.
func plotGoodput(r results, passes int, title, path string) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "message size"
	p.Y.Label.Text = fmt.Sprintf("goodput, MiB/s (median of %d)", passes)
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	var xt []plot.Tick
	for _, s := range sizes {
		xt = append(xt, plot.Tick{Value: float64(s), Label: sizeName(s)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(xt)
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = false, false
	lo, hi := 1e300, 0.0
	add := func(name string, xys plotter.XYs, c color.Color, dashes []vg.Length, points bool) error {
		if len(xys) == 0 {
			return nil
		}
		for _, xy := range xys {
			lo, hi = min(lo, xy.Y), max(hi, xy.Y)
		}
		if !points {
			l, err := plotter.NewLine(xys)
			if err != nil {
				return err
			}
			l.Color, l.Dashes, l.Width = c, dashes, vg.Points(1.5)
			p.Add(l)
			p.Legend.Add(name, l)
			return nil
		}
		l, s, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		l.Color, l.Dashes, l.Width = c, dashes, vg.Points(1.5)
		s.Color = c
		p.Add(l, s)
		p.Legend.Add(name, l, s)
		return nil
	}
	opColor := map[string]color.Color{"write": plotutil.Color(2), "read": plotutil.Color(0), "send": plotutil.Color(1)}
	for _, link := range []string{"xdp", "udp"} {
		var dashes []vg.Length
		if link == "udp" {
			dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		for _, op := range []string{"write", "read", "send"} {
			var xys plotter.XYs
			for _, s := range sizes {
				if v, ok := r.get(bwKey(link, op, s, sweepPMTU), figGoodput); ok {
					xys = append(xys, plotter.XY{X: float64(s), Y: v / (1 << 20)})
				}
			}
			name := fmt.Sprintf("xroce %s %s", opName[op], link)
			if err := add(name, xys, opColor[op], dashes, true); err != nil {
				return err
			}
		}
	}
	var tcp plotter.XYs
	for _, s := range sizes {
		if v, ok := r.get(fmt.Sprintf("tcp %d", s), figGoodput); ok {
			tcp = append(tcp, plotter.XY{X: float64(s), Y: v / (1 << 20)})
		}
	}
	if err := add("TCP stream", tcp, color.Black, nil, true); err != nil {
		return err
	}
	for i, pm := range []int{1024, 2048} {
		if v, ok := r.get(fmt.Sprintf("raw pps %d", pm), figPayload); ok {
			xys := plotter.XYs{{X: float64(sizes[0]), Y: v / (1 << 20)}, {X: float64(sizes[len(sizes)-1]), Y: v / (1 << 20)}}
			grey := color.Gray{Y: uint8(96 + 64*i)}
			if err := add(fmt.Sprintf("raw AF_XDP payload rate, PMTU %d", pm), xys, grey, []vg.Length{vg.Points(2), vg.Points(2)}, false); err != nil {
				return err
			}
		}
	}
	if hi == 0 {
		return fmt.Errorf("nothing to plot")
	}
	p.Y.Min, p.Y.Max = lo/4, hi*1.5 // room for the legend at the bottom right
	return p.Save(9*vg.Inch, 5.5*vg.Inch, path)
}

var opName = map[string]string{"write": "WRITE", "read": "READ", "send": "SEND"}
