package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/xroce/xroce/pcap"
)

// pcapOptions are the --pcap flags of the subcommands that generate traffic.
type pcapOptions struct {
	path        string
	snaplen     int
	rotateSize  string
	rotateEvery time.Duration
	rotateFiles int
}

// addPcapFlags registers the --pcap flags on fs.
func addPcapFlags(fs *pflag.FlagSet, p *pcapOptions) {
	fs.StringVar(&p.path, "pcap", "", "record every frame sent and received to this file: pcapng with interfaces \"tx\" and \"rx\" for the direction (classic pcap if the name ends in .pcap: no direction, and so none of the receive batches 'xroce replay' needs to reproduce coalesced ACKs)")
	fs.IntVar(&p.snaplen, "pcap-snaplen", 0, "bytes of each frame to record (0: whole frames)")
	fs.StringVar(&p.rotateSize, "pcap-rotate-size", "", "start a new capture file when the current one reaches this size, e.g. 100M (files FILE, FILE-1, FILE-2, ... before the extension)")
	fs.DurationVar(&p.rotateEvery, "pcap-rotate-every", 0, "start a new capture file when the current one is this old, e.g. 10s")
	fs.IntVar(&p.rotateFiles, "pcap-rotate-files", 0, "with rotation, keep at most this many files, reusing their names in a ring (0: keep all)")
}

// tapOptions checks the flags and converts them. Rotation and snaplen flags without
// --pcap are refused, so a typo does not silently record nothing.
func (p pcapOptions) tapOptions() (pcap.TapOptions, error) {
	o := pcap.TapOptions{Format: pcap.FormatFor(p.path), Snaplen: p.snaplen, RotateEvery: p.rotateEvery, RotateFiles: p.rotateFiles}
	if p.path == "" {
		if p.snaplen != 0 || p.rotateSize != "" || p.rotateEvery != 0 || p.rotateFiles != 0 {
			return o, fmt.Errorf("--pcap-snaplen and --pcap-rotate-* need --pcap FILE")
		}
		return o, nil
	}
	if p.snaplen < 0 || p.snaplen > pcap.MaxSnaplen {
		return o, fmt.Errorf("--pcap-snaplen %d: want 0 (whole frames) to %d", p.snaplen, pcap.MaxSnaplen)
	}
	if p.rotateEvery < 0 || p.rotateFiles < 0 {
		return o, fmt.Errorf("--pcap-rotate-every and --pcap-rotate-files must not be negative")
	}
	if p.rotateSize != "" {
		n, err := parseSize(p.rotateSize)
		if err != nil || n <= 0 {
			return o, fmt.Errorf("--pcap-rotate-size %q: want a positive size in bytes, with an optional K, M or G suffix (powers of 1024)", p.rotateSize)
		}
		o.RotateSize = n
	}
	if p.rotateFiles > 0 && o.RotateSize == 0 && o.RotateEvery == 0 {
		return o, fmt.Errorf("--pcap-rotate-files needs --pcap-rotate-size or --pcap-rotate-every")
	}
	return o, nil
}

// parseSize parses "1048576", "512K", "100M" or "2G" (powers of 1024).
func parseSize(s string) (int64, error) {
	mult := int64(1)
	switch strings.ToUpper(s[len(s)-1:]) {
	case "K":
		mult = 1 << 10
	case "M":
		mult = 1 << 20
	case "G":
		mult = 1 << 30
	}
	if mult != 1 {
		s = s[:len(s)-1]
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, err
	}
	if n > (1<<62)/mult {
		return 0, fmt.Errorf("too large")
	}
	return n * mult, nil
}
