package interop

import (
	"fmt"
	"regexp"
	"strings"
)

// rping cells: xroce rping against rdmacm-utils' rping on rdma_rxe (-v -C 100, -S
// the cell's size), each side's printed data checked line by line.

// rpingCount is the cells' -C.
const rpingCount = 100

var rpingDataRe = regexp.MustCompile(`(?m)^(server )?ping data: .*$`)

// rpingRxeCommand is the guest's rping: the server binds any address; the client
// connects to xroce's. Its stderr (the DISCONNECT EVENT line) comes after its
// stdout: rping's buffered stdout reaches the output file in blocks at its exit,
// and the stderr line written in between would split a data line.
func (c cell) rpingRxeCommand(server bool, xroceIP string) string {
	cmd := fmt.Sprintf("rping -c -v -S %d -C %d -a %s", c.size, rpingCount, xroceIP)
	if server {
		cmd = fmt.Sprintf("rping -s -v -S %d -C %d", c.size, rpingCount)
	}
	return cmd + " 2>/tmp/rping.err; rc=$?; cat /tmp/rping.err; exit $rc"
}

// rpingXroceArgs is xroce rping's command line: it finds its interface from the
// addresses (the lab's only one with an address); the server prints its debug
// lines, rdma_listen among them, which runCell waits for.
func (c cell) rpingXroceArgs(lab *Lab, server bool) []string {
	args := []string{"rping", "-v", "-S", fmt.Sprint(c.size), "-C", fmt.Sprint(rpingCount), "--link", c.link}
	if server {
		return append(args, "-s", "-d")
	}
	return append(args, "-c", "-a", lab.GuestIP.String())
}

// checkRping checks both sides' data lines, exactly: the client's "ping data: "
// and the server's "server ping data: " for pings 0 to rpingCount-1.
func (c cell) checkRping(xout, gout string) error {
	cli, srv := gout, xout
	if c.xroceClient {
		cli, srv = xout, gout
	}
	for _, s := range []struct{ who, out, prefix string }{{"client", cli, "ping data: "}, {"server", srv, "server ping data: "}} {
		got := rpingDataRe.FindAllString(s.out, -1)
		if len(got) != rpingCount {
			return fmt.Errorf("%s: %d data lines, want %d:\n%s", s.who, len(got), rpingCount, tail(s.out, 3000))
		}
		for i, l := range got {
			if want := s.prefix + rpingText(i, c.size); strings.TrimRight(l, "\r") != want {
				return fmt.Errorf("%s: ping %d:\n %q\nwant\n %q", s.who, i, l, want)
			}
		}
	}
	return nil
}

// rpingText is what rping prints of ping i with -S n: "rdma-ping-i: ", then
// letters from 'A'+i (mod 58, 'A'..'z'), n-1 characters in all.
func rpingText(i, n int) string {
	b := []byte(fmt.Sprintf("rdma-ping-%d: ", i))
	for ch := 65 + i%58; len(b) < n-1; ch++ {
		if ch > 122 {
			ch = 65
		}
		b = append(b, byte(ch))
	}
	return string(b)
}
