package main

import (
	"os"
	"runtime"
)

// oneThread makes a perftest-style tool run Go code on one OS thread at a time
// (GOMAXPROCS 1), unless the GOMAXPROCS environment variable is set: the engine's
// loop and the test then hand work to each other by switching goroutines on one
// thread instead of waking a thread on another core, as perftest itself runs in
// one thread. On the 2-core development VM, with both sides' tools on it, this
// gave about 1.4× the goodput of 64 KiB WRITEs and SENDs and half the write_lat
// p50 of GOMAXPROCS 2 (docs/bench.md, "One thread per tool"). The runtime still
// starts threads for system calls that block and for the garbage collector's
// background work; GOMAXPROCS only bounds those running Go code at once.
func oneThread() {
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}
