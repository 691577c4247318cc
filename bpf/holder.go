package bpf

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Holder names the process that keeps the XDP program with ID id attached ("PID
// 123 (xroce daemon -d eth0)"), or returns "" when none is found. xroce attaches
// through a BPF link, which lives as long as a file descriptor of its process:
// /proc/PID/fd/N reads "anon_inode:bpf_link" and /proc/PID/fdinfo/N names the
// link's prog_id (the kernel's bpf_link_show_fdinfo, kernel/bpf/syscall.c). A
// process of another PID namespace, or one whose /proc this user cannot read, is
// not found.
func Holder(id uint32) string {
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	want := "prog_id:\t" + strconv.FormatUint(uint64(id), 10)
	for _, fd := range fds {
		if link, err := os.Readlink(fd); err != nil || link != "anon_inode:bpf_link" {
			continue
		}
		parts := strings.Split(fd, "/") // "", proc, PID, fd, N
		if parts[2] == strconv.Itoa(os.Getpid()) || !fdinfoHas(filepath.Join("/proc", parts[2], "fdinfo", parts[4]), want) {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", parts[2], "cmdline"))
		return fmt.Sprintf("PID %s (%s)", parts[2], strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " ")))
	}
	return ""
}

// fdinfoHas reports whether the fdinfo file has the line want.
func fdinfoHas(path, want string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if sc.Text() == want {
			return true
		}
	}
	return false
}
