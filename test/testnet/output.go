package testnet

import (
	"strings"
	"sync"
)

// Output collects what a process writes (as its Stdout and Stderr) while the test
// reads it: a strings.Builder behind a mutex.
type Output struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p; it never fails.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

// String returns everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}
