package main

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// setNice sets the nice value of every thread of this process (Linux keeps one per
// thread, and a thread created later takes its creator's: the Go runtime's threads
// all do). See setpriority(2) and sched(7). Raising priority (a negative value)
// needs CAP_SYS_NICE; the error says so.
func setNice(nice int) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, nice); err != nil && err != unix.ESRCH {
			return fmt.Errorf("nice %d: %w (a negative value needs root or CAP_SYS_NICE)", nice, err)
		}
	}
	return nil
}
