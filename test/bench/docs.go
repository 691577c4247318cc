package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// The two parts of docs/bench.md that the bench writes; the rest of the file (the
// method and the analysis) is left as it is.
const (
	resultsBegin  = "<!-- bench results: written by make bench -->"
	resultsEnd    = "<!-- end of bench results -->"
	profilesBegin = "<!-- bench profiles: written by make bench PROFILE=1 -->"
	profilesEnd   = "<!-- end of bench profiles -->"
)

// updateDoc replaces the results part of the Markdown file at path, and the profiles
// part when profiles is not empty, creating the file or the parts as needed.
func updateDoc(path, results, profiles string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	s := string(old)
	if s == "" {
		s = "# Benchmarks\n\n`make bench` writes the parts between the markers below.\n"
	}
	s = replaceBetween(s, resultsBegin, resultsEnd, results)
	if profiles != "" {
		s = replaceBetween(s, profilesBegin, profilesEnd, profiles)
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

// replaceBetween puts body between the begin and end markers of s, appending the
// markers when s has none.
func replaceBetween(s, begin, end, body string) string {
	i := strings.Index(s, begin)
	j := strings.Index(s, end)
	if i < 0 || j < i {
		return strings.TrimRight(s, "\n") + "\n\n" + begin + "\n" + body + end + "\n"
	}
	return s[:i+len(begin)] + "\n" + body + s[j:]
}

// machine describes the machine: nproc, uname -r and the CPU's model name.
func machine() string {
	run := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).Output()
		if err != nil {
			return "?"
		}
		return strings.TrimSpace(string(out))
	}
	model := "?"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("nproc %s, Linux %s, CPU %q", run("nproc"), run("uname", "-r"), model)
}
