package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// daemonStopped is the exit status of an `xroce daemon` that stopped cleanly on
// SIGTERM (128 + 15: it closes its clients, removes its socket, stops the engine
// and closes the link, then exits as a shell reports the signal).
const daemonStopped = 143

// daemons are one `xroce daemon` in each namespace, on that namespace's end of the
// veth, each with a run directory of its own, for one measurement of unmodified
// verbs applications. A daemon owns its interface's XDP program, so the pair lives
// only as long as the measurement: the native rows attach their own.
type daemons struct {
	procs [2]*proc  // [0] namespace A, [1] namespace B
	dirs  [2]string // their XROCE_RUN_DIR
	names [2]string // "daemon A", "daemon B", for the errors
}

// startDaemons starts the two daemons and waits until both serve their socket. On
// an error nothing is left running.
func (b *bench) startDaemons(ctx context.Context) (*daemons, error) {
	d := &daemons{names: [2]string{"daemon A", "daemon B"}}
	ends := [2][2]string{{b.net.NsA, b.net.IfA}, {b.net.NsB, b.net.IfB}}
	for i, e := range ends {
		dir, err := os.MkdirTemp("", "xroce-bench-run-")
		if err != nil {
			d.stop()
			return nil, err
		}
		d.dirs[i] = dir
		p, err := start(ctx, e[0], side{args: []string{b.xroceBin, "daemon", "-d", e[1]}, env: []string{"XROCE_RUN_DIR=" + dir}, sigterm: true})
		if err != nil {
			d.stop()
			return nil, fmt.Errorf("%s: %v", d.names[i], err)
		}
		d.procs[i] = p
	}
	for i, p := range d.procs {
		if err := p.waitFor(socketIn(d.dirs[i]), 15*time.Second); err != nil {
			d.stop()
			return nil, fmt.Errorf("%s on %s: %v", d.names[i], ends[i][1], err)
		}
	}
	return d, nil
}

// socketIn is ready once a daemon's socket is in dir (a fresh directory: no socket
// of an earlier daemon can be there).
func socketIn(dir string) readiness {
	return readiness{"control socket in " + dir, func(*proc) bool {
		m, _ := filepath.Glob(filepath.Join(dir, "*.sock"))
		return len(m) > 0
	}}
}

// stop sends both daemons SIGTERM, kills one that has not exited 10 s later, removes
// the run directories, and returns each daemon's CPU time. It fails when a daemon
// did not stop cleanly or had exited before (its output is in the error).
func (d *daemons) stop() ([2]cpuTime, error) {
	var cpu [2]cpuTime
	var errs []error
	for _, p := range d.procs {
		if p != nil {
			_ = p.cmd.Process.Signal(syscall.SIGTERM) // ip netns exec execs xroce: the daemon itself
		}
	}
	for i, p := range d.procs {
		if p == nil {
			continue
		}
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
			errs = append(errs, fmt.Errorf("%s did not stop within 10 s of SIGTERM, killed:\n%s", d.names[i], p.out.String()))
			continue
		}
		st := p.cmd.ProcessState
		cpu[i] = cpuTime{User: st.UserTime(), Sys: st.SystemTime()}
		if p.err != nil && st.ExitCode() != daemonStopped {
			errs = append(errs, fmt.Errorf("%s: %v\n%s", d.names[i], p.err, p.out.String()))
		}
	}
	for _, dir := range d.dirs {
		if dir != "" {
			if err := os.RemoveAll(dir); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return cpu, errors.Join(errs...)
}

// logs is both daemons' output so far, for the errors of a failed measurement.
func (d *daemons) logs() string {
	var b strings.Builder
	for i, p := range d.procs {
		if p != nil {
			fmt.Fprintf(&b, "%s:\n%s", d.names[i], p.out.String())
		}
	}
	return b.String()
}
