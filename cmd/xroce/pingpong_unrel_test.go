package main

import (
	"strconv"
	"testing"

	"github.com/xroce/xroce/test/testnet"
)

// TestPingpongUnreliable: pingpong --connection UD and UC, xroce against xroce in two
// namespaces, with ibv_ud_pingpong's and ibv_uc_pingpong's output. Interop cells
// against rdma_rxe's ibv_ud_pingpong and ibv_uc_pingpong belong in test/interop.
func TestPingpongUnreliable(t *testing.T) {
	for _, c := range []struct {
		name, link, conn string
		size             int
	}{
		{"UD/xdp", "xdp", "UD", 1000},
		{"UD/udp", "udp", "ud", 1024},
		{"UC/xdp", "xdp", "UC", 2500},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := testnet.New(t, testnet.Options{})
			args := []string{"pingpong", "--connection", c.conn, "--link", c.link, "-n", "200", "-s", strconv.Itoa(c.size)}
			srv, cli := pair(t, n, append(args, "-d", n.IfB), append(args, "-d", n.IfA, n.IPB.String()))
			sep := ","
			if c.conn != "UC" {
				sep = ":"
			}
			checkPingpong(t, srv, cli, c.size*400, sep)
		})
	}
}

// TestPingpongUnreliableErrors: what pingpong refuses for UD and UC.
func TestPingpongUnreliableErrors(t *testing.T) {
	n := testnet.New(t, testnet.Options{})
	out, err := runIn(n.NsA, "pingpong", "--connection", "UD", "--link", "udp", "-d", n.IfA, "-s", "2000")
	wantErr(t, "UD larger than the MTU", out, err, "-s 2000: a UD message is one packet, at most the port's MTU (1024 here")
	out, err = runIn(n.NsA, "pingpong", "--connection", "XRC", "-d", n.IfA)
	wantErr(t, "unknown connection", out, err, `--connection "XRC": want RC, UC or UD`)
}
