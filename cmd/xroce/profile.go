package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// startCPUProfile starts a pprof CPU profile (100 samples a second of CPU time)
// written to the file named by XROCE_CPUPROFILE, when that variable is set, and
// returns the function that stops it and closes the file; without the variable it
// does nothing. `make bench PROFILE=1` sets it for each engine process. A command
// that fails exits before the profile is written.
func startCPUProfile() (stop func()) {
	path := os.Getenv("XROCE_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "xroce: XROCE_CPUPROFILE: %v\n", err)
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "xroce: XROCE_CPUPROFILE: %v\n", err)
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "xroce: XROCE_CPUPROFILE: %v\n", err)
		}
	}
}
