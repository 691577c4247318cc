package main

import (
	"slices"
	"strings"
	"time"
)

// summary is a measurement's medians over the passes that succeeded.
type summary struct {
	fig      map[string]float64
	bySample map[sample]map[string]float64 // each run's figures
	cpu      [2]cpuTime
	passes   int // runs that succeeded
	failed   int // runs that failed (each failure is tried once more)
	note     string
	err      error // the last failure, if any
}

// summarize takes the median of every figure and of each side's user and system
// time separately.
func summarize(rs []result, errs []error) summary {
	s := summary{fig: map[string]float64{}, bySample: map[sample]map[string]float64{}, passes: len(rs), failed: len(errs)}
	if len(errs) > 0 {
		s.err = errs[len(errs)-1]
	}
	if len(rs) == 0 {
		return s
	}
	names := map[string]bool{}
	for _, r := range rs {
		s.bySample[r.at] = r.fig
		for k := range r.fig {
			names[k] = true
		}
		if r.note != "" {
			s.note = r.note
		}
	}
	for k := range names {
		var xs []float64
		for _, r := range rs {
			if v, ok := r.fig[k]; ok {
				xs = append(xs, v)
			}
		}
		s.fig[k] = median(xs)
	}
	for i := range s.cpu {
		var u, y []float64
		for _, r := range rs {
			u = append(u, float64(r.cpu[i].User))
			y = append(y, float64(r.cpu[i].Sys))
		}
		s.cpu[i] = cpuTime{User: time.Duration(median(u)), Sys: time.Duration(median(y))}
	}
	return s
}

// median returns the middle value (the mean of the two middle ones for an even
// count), or 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// results holds every measurement's summary by key.
type results map[string]summary

// notMeasured is the note of a section no run of which was measured (-only).
const notMeasured = "Not measured in this run."

// anyPrefix reports whether a measurement whose key starts with one of prefixes
// succeeded at least once.
func (r results) anyPrefix(prefixes ...string) bool {
	for k, s := range r {
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) && s.passes > 0 {
				return true
			}
		}
	}
	return false
}

// get returns a figure and whether it was measured.
func (r results) get(key, fig string) (float64, bool) {
	s, ok := r[key]
	if !ok {
		return 0, false
	}
	v, ok := s.fig[fig]
	return v, ok && v > 0
}
