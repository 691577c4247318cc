package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// profileFile is one xroce process's CPU profile.
type profileFile struct {
	side int // 0 client, 1 server
	path string
}

// profileTops runs `go tool pprof -top` (flat, then cumulative) over the CPU
// profiles of the measurement behind each missed target, client and server
// separately, every pass merged, and returns the outputs as Markdown.
func (b *bench) profileTops(r results) string {
	var out strings.Builder
	done := map[string]bool{}
	for _, q := range ratios() {
		if q.verdict(r) != "missed" || q.profile == "" || done[q.profile] {
			continue
		}
		done[q.profile] = true
		for side := range sideNames {
			var files []string
			for _, f := range b.profiles[q.profile] {
				if _, err := os.Stat(f.path); err == nil && f.side == side {
					files = append(files, f.path)
				}
			}
			if len(files) == 0 {
				continue
			}
			fmt.Fprintf(&out, "<details><summary>Missed: %s. %s, %s side, %d profiles merged</summary>\n\n",
				q.name, labelOf(b.plan, q.profile), sideNames[side], len(files))
			for _, view := range [][]string{{"-top", "-nodecount=12"}, {"-top", "-cum", "-nodecount=25"}} {
				args := append(append([]string{"tool", "pprof"}, view...), files...)
				o, err := exec.Command(b.goBin, args...).CombinedOutput()
				if err != nil {
					o = append(o, fmt.Sprintf("(%v)\n", err)...)
				}
				fmt.Fprintf(&out, "`go tool pprof %s`:\n\n```\n%s```\n\n", strings.Join(view, " "), dropLines(string(o), "File:", "Build ID:", "Type:", "Time:"))
			}
			out.WriteString("</details>\n\n")
		}
	}
	if out.Len() == 0 {
		return "No target was missed, or no profile was written.\n"
	}
	return out.String()
}

// dropLines removes the lines that start with one of the prefixes.
func dropLines(s string, prefixes ...string) string {
	var keep []string
	for _, l := range strings.SplitAfter(s, "\n") {
		drop := false
		for _, p := range prefixes {
			drop = drop || strings.HasPrefix(l, p)
		}
		if !drop {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "")
}

// clearProfiles removes the profiles an earlier run left in dir, so that a failed
// pass cannot pass off an old profile as its own.
func clearProfiles(dir string) error {
	old, err := filepath.Glob(filepath.Join(dir, "*.pprof"))
	if err != nil {
		return err
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	return nil
}
