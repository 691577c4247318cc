package main

import (
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
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

// interrupted is set when a signal's handling began: what the registered
// functions undo (a connection, the link) then fails the command's own work, and
// that failure is the signal's, not an error to report (interruptedExit).
var interrupted atomic.Bool

// interruptedExit waits, when a signal is being handled, for its exit status
// (128 + its number), so that a command failing because of it neither reports
// that failure nor exits 1 first; it returns after interruptWait (the handler
// stuck) or at once when no signal came.
func interruptedExit() {
	if interrupted.Load() {
		time.Sleep(interruptWait)
	}
}

// interruptWait bounds interruptedExit's wait: the registered functions end
// within a few seconds (a Service closes its connections in one).
const interruptWait = 10 * time.Second

// handleSignals makes SIGINT, SIGTERM and SIGHUP (the terminal of a command
// started with & closed) run the registered functions, then exit with 128 + the
// signal's number, as a shell reports it.
func handleSignals() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-ch
		interrupted.Store(true)
		onExit.Lock()
		fns := onExit.fns
		onExit.Unlock()
		for i := len(fns) - 1; i >= 0; i-- {
			fns[i]()
		}
		code := 128 + 2 // SIGINT
		if n, ok := s.(syscall.Signal); ok {
			code = 128 + int(n)
		}
		os.Exit(code)
	}()
}
