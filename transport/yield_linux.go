package transport

import "syscall"

// yieldCPU gives the CPU to another runnable thread, of any process
// (sched_yield(2)). Measured on the 2-core VM with the verbs daemon: perftest's
// 64-byte ib_write_bw through the library ran at 3-15 MB/s while the daemon
// busy-polled with runtime.Gosched, which keeps the CPU from the application
// spinning on its CQ beside it, and at 20-23.5 MB/s with this (native xroce
// write_bw: 17-18 MB/s in the same minutes).
func yieldCPU() { _, _, _ = syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
