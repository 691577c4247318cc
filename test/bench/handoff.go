package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// The hand-off measurement: what it costs on this machine to give a CPU from one
// busy thread to another. Through the verbs library each RDMA operation crosses
// between two processes (the application and its daemon) where xroce's own tools
// cross between two goroutines of one thread; with more busy threads than CPUs
// each crossing may wait for such a hand-off. The `yield` helper loops on
// sched_yield(2) on CPU 0 between two instants; with two threads (of one process,
// or of two) runnable there each yield hands the CPU to the other one, so the
// time per yield is the hand-off's. Alone on the CPU it is the system call's.

const (
	handoffFor   = time.Second
	handoffStart = 300 * time.Millisecond // from the launch to the shared start
)

// handoffPlan returns the three hand-off measurements: one thread alone, two
// threads of one process, two processes.
func handoffPlan(scale float64) []measurement {
	var p []measurement
	for _, h := range []struct {
		key            string
		procs, threads int
		label          string
	}{
		{"handoff 1x1", 1, 1, "sched_yield alone on CPU 0: the system call, no hand-off"},
		{"handoff 1x2", 1, 2, "two threads of one process on CPU 0, each yielding to the other"},
		{"handoff 2x1", 2, 1, "two processes on CPU 0, each yielding to the other"},
	} {
		p = append(p, measurement{key: h.key, label: h.label, run: func(ctx context.Context, b *bench, pass int) (result, error) {
			return b.handoff(ctx, h.procs, h.threads, scaleDur(handoffFor, scale))
		}})
	}
	return p
}

// handoff runs procs yield helpers of threads threads each on CPU 0 for d, all
// from one instant, and returns the time per yield (figHandoff).
func (b *bench) handoff(ctx context.Context, procs, threads int, d time.Duration) (result, error) {
	from := time.Now().Add(handoffStart)
	until := from.Add(d)
	outs := make([]bytes.Buffer, procs)
	cmds := make([]*exec.Cmd, procs)
	for i := range cmds {
		cmds[i] = exec.CommandContext(ctx, "taskset", "-c", "0", b.self, "yield", "-threads", fmt.Sprint(threads),
			"-from", fmt.Sprint(from.UnixNano()), "-until", fmt.Sprint(until.UnixNano()))
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
		if err := cmds[i].Start(); err != nil {
			return result{}, err
		}
	}
	var res result
	var yields float64
	var errs []error
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("yield helper %d: %v: %s", i, err, lastLine(outs[i].String())))
			continue
		}
		if i < len(res.cpu) {
			res.cpu[i] = cpuTime{User: c.ProcessState.UserTime(), Sys: c.ProcessState.SystemTime()}
		}
		kv, err := parseResult(outs[i].String())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n, err := floats(kv, "yields")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		yields += n[0]
	}
	if len(errs) > 0 {
		return result{}, errs[0]
	}
	if yields == 0 {
		return result{}, fmt.Errorf("no yield in %v", d)
	}
	res.fig = map[string]float64{figHandoff: d.Seconds() / yields}
	return res, nil
}

// yieldHelper is `bench yield -threads T -from NS -until NS`: it prints the
// count yieldFor returns.
func yieldHelper(args []string) error {
	fs := flag.NewFlagSet("yield", flag.ContinueOnError)
	threads := fs.Int("threads", 1, "threads yielding")
	fromNS := fs.Int64("from", 0, "start, Unix ns")
	untilNS := fs.Int64("until", 0, "end, Unix ns")
	if err := fs.Parse(args); err != nil {
		return err
	}
	n, err := yieldFor(*threads, time.Unix(0, *fromNS), time.Unix(0, *untilNS))
	if err != nil {
		return err
	}
	fmt.Printf("result yields=%d\n", n)
	return nil
}

// yieldFor has threads threads (each locked to its own OS thread, GOMAXPROCS
// threads) call sched_yield from the instant from to until and returns the total
// of their calls. It refuses fewer than one thread or an empty window.
func yieldFor(threads int, from, until time.Time) (uint64, error) {
	if threads < 1 || !from.Before(until) {
		return 0, fmt.Errorf("-threads %d -from %d -until %d: want at least one thread and from before until", threads, from.UnixNano(), until.UnixNano())
	}
	runtime.GOMAXPROCS(threads)
	counts := make([]uint64, threads)
	var wg sync.WaitGroup
	for i := range counts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			time.Sleep(time.Until(from))
			var n uint64
			for time.Now().Before(until) {
				// RawSyscall: the Go scheduler does not see the call, so no other
				// thread takes over this one's P while it yields.
				_, _, _ = syscall.RawSyscall(syscall.SYS_SCHED_YIELD, 0, 0, 0)
				n++
			}
			counts[i] = n
		}()
	}
	wg.Wait()
	var total uint64
	for _, n := range counts {
		total += n
	}
	return total, nil
}
