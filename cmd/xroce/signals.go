package main

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// onExit holds what must run even when the user interrupts the tool: closing the
// link (detaching nothing is needed, BPF links go with the process, but a --pcap
// recording must be flushed whole or dump and replay reject its last block).
var onExit struct {
	sync.Mutex
	fns []func()
}

// atExit registers f to run at an interrupt, and returns f made safe to call more
// than once (the tool's own deferred call and the interrupt may both run it).
func atExit(f func()) func() {
	var once sync.Once
	g := func() { once.Do(f) }
	onExit.Lock()
	onExit.fns = append(onExit.fns, g)
	onExit.Unlock()
	return g
}

// handleSignals makes SIGINT and SIGTERM run the registered functions, then exit
// with 128 + the signal's number, as a shell reports it.
func handleSignals() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-ch
		onExit.Lock()
		fns := onExit.fns
		onExit.Unlock()
		for i := len(fns) - 1; i >= 0; i-- {
			fns[i]()
		}
		code := 130
		if s == syscall.SIGTERM {
			code = 143
		}
		os.Exit(code)
	}()
}
