package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A UDP socket on port 4791 (xroce --link udp) receives the RoCE frames of every
// interface of its network namespace; xroce's XDP program, once attached to one
// of them, takes that interface's frames first, and the UDP side fails later with
// a misleading retry error. So the AF_XDP link is refused while a process holds
// UDP port 4791 in the namespace. rdma_rxe's socket belongs to the kernel, no
// process: it serves only the interfaces it has a device on, and is left alone.

// udpPortOwner returns a description of a process that has UDP port 4791 open in
// this network namespace ("PID 123 (xroce send_bw --link udp ...)"), or "".
func udpPortOwner() string {
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/udp", "/proc/net/udp6"} {
		for _, ino := range socketInodes(f, 4791) {
			inodes["socket:["+ino+"]"] = true
		}
	}
	if len(inodes) == 0 {
		return ""
	}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		if link, err := os.Readlink(fd); err == nil && inodes[link] {
			pid := strings.Split(fd, "/")[2]
			if pid == strconv.Itoa(os.Getpid()) {
				continue
			}
			cmd, _ := os.ReadFile("/proc/" + pid + "/cmdline")
			return fmt.Sprintf("PID %s (%s)", pid, strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " ")))
		}
	}
	return ""
}

// socketInodes lists the inodes of the sockets bound to local port in a
// /proc/net/udp-style table.
func socketInodes(table string, port int) []string {
	f, err := os.Open(table)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	suffix := fmt.Sprintf(":%04X", port)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) > 9 && strings.HasSuffix(fl[1], suffix) && fl[9] != "0" {
			out = append(out, fl[9])
		}
	}
	return out
}
