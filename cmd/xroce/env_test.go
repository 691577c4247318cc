package main

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/xroce/xroce/roce"
)

// TestPeerGIDHint: a GID kind mismatch names our GID of the peer's kind and, when
// we have one, of its scope: a peer on its link-local IPv6 GID gets -x 0.
func TestPeerGIDHint(t *testing.T) {
	gid := func(s string) roce.GID { return roce.GIDFromAddr(netip.MustParseAddr(s)) }
	table := roce.GIDTable{
		{Index: 0, GID: gid("fe80::1"), Version: roce.RoCEv2},
		{Index: 1, GID: gid("10.0.0.1"), Version: roce.RoCEv2},
		{Index: 2, GID: gid("fd00::1"), Version: roce.RoCEv2},
	}
	for _, c := range []struct {
		local int
		peer  string
		want  string
	}{
		{1, "fe80::2", "use -x 0 here"},
		{1, "fd00::2", "use -x 2 here"},
		{0, "10.0.0.2", "use -x 1 here"},
		{2, "10.0.0.2", "use -x 1 here"},
	} {
		err := checkPeerGID(table, table[c.local], gid(c.peer), "-x")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("local index %d, peer %s: %v; want %q", c.local, c.peer, err, c.want)
		}
	}
	if err := checkPeerGID(table, table[0], gid("fd00::2"), "-x"); err != nil {
		t.Errorf("two IPv6 GIDs: %v", err)
	}
	if err := checkPeerGID(table[1:2], table[1], gid("fe80::2"), "-x"); err == nil || !strings.Contains(err.Error(), "use a GID index of that kind here") {
		t.Errorf("no IPv6 GID here: %v", err)
	}
	if err := checkPeerGID(table, table[1], gid("fe80::2"), "-g"); err == nil || !strings.Contains(err.Error(), "use -g 0 here") {
		t.Errorf("pingpong's flag: %v; want \"use -g 0 here\"", err)
	}
}
