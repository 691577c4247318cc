//go:build !linux

package transport

import "runtime"

// yieldCPU gives the CPU to another goroutine (elsewhere than Linux, where
// yield_linux.go gives it to any thread).
func yieldCPU() { runtime.Gosched() }
