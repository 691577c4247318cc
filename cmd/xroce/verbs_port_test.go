package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xroce/xroce/test/testnet"
)

// TestVerbsPortEvents: the GID table follows the interface's addresses as
// rdma_rxe's does (an entry keeps its index; a removed address leaves an empty
// slot, which the next new address takes), and Debian's unmodified
// ibv_asyncwatch sees IBV_EVENT_GID_CHANGE for each entry and IBV_EVENT_PORT_ERR
// and IBV_EVENT_PORT_ACTIVE when the interface goes down and comes back.
func TestVerbsPortEvents(t *testing.T) {
	needRoot(t)
	libxroce(t)
	if _, err := os.Stat("/usr/bin/ibv_asyncwatch"); err != nil {
		t.Skip("no ibv_asyncwatch: apt-get install ibverbs-utils (.ci/run installs it)")
	}
	n := testnet.New(t, testnet.Options{MTU: 1500})
	dir := t.TempDir()
	sock, stop := startDaemon(t, n.NsA, n.IfA, dir)
	name := strings.TrimSuffix(filepath.Base(sock), ".sock")
	devinfo := func() string { return runVerbs(t, dir, "ibv_devinfo", "-v", "-d", name) }
	before := strings.Count(devinfo(), "\t\t\tGID[")
	if before != 3 { // the default GID, IPA, IP6A
		t.Fatalf("%d GIDs at the start:\n%s", before, devinfo())
	}

	// IPv6 drops an interface's addresses when it goes down, unless told to keep
	// them; then the GID table would lose fd00:79::1 too (as rdma_rxe's does).
	testnet.Sh(t, "ip", "netns", "exec", n.NsA, "sysctl", "-qw", "net.ipv6.conf."+n.IfA+".keep_addr_on_down=1")
	_, out, _ := app(t, n.NsA, dir, "ibv_asyncwatch", "-d", name)
	waitOutput(t, out, name+": async event FD", 1)
	const gidChange = "event_type IBV_EVENT_GID_CHANGE (18), port 1\n"
	steps := []struct {
		cmd     []string
		events  string // ibv_asyncwatch's line for it
		count   int    // how many of them by then
		has     []string
		hasNot  []string
		logLine string
	}{
		{[]string{"addr", "add", "10.98.0.77/24", "dev", n.IfA}, gidChange, 1,
			[]string{"GID[  1]:\t\t::ffff:" + n.IPA.String() + ", RoCE v2", "GID[  3]:\t\t::ffff:10.98.0.77, RoCE v2"}, nil,
			"GID index 3 (::ffff:10.98.0.77) added: a new address of " + n.IfA},
		{[]string{"addr", "del", n.IPA.String() + "/24", "dev", n.IfA}, gidChange, 2,
			[]string{"GID[  3]:\t\t::ffff:10.98.0.77, RoCE v2"}, []string{"GID[  1]:"},
			"GID index 1 (::ffff:" + n.IPA.String() + ") removed: its address left " + n.IfA},
		{[]string{"addr", "add", "10.98.0.78/24", "dev", n.IfA}, gidChange, 3,
			[]string{"GID[  1]:\t\t::ffff:10.98.0.78, RoCE v2", "GID[  3]:\t\t::ffff:10.98.0.77, RoCE v2"}, nil,
			"GID index 1 (::ffff:10.98.0.78) added"},
		{[]string{"link", "set", n.IfA, "down"}, "event_type IBV_EVENT_PORT_ERR (10), port 1\n", 1,
			[]string{"state:\t\t\tPORT_DOWN (1)"}, nil, "the port is PORT_DOWN"},
		{[]string{"link", "set", n.IfA, "up"}, "event_type IBV_EVENT_PORT_ACTIVE (9), port 1\n", 1,
			[]string{"state:\t\t\tPORT_ACTIVE (4)"}, nil, "the port is PORT_ACTIVE"},
	}
	gidTable := cBuild(t, "testdata/gidtable.c")
	for i, st := range steps {
		testnet.Sh(t, append([]string{"ip", "-n", n.NsA}, st.cmd...)...)
		waitOutput(t, out, st.events, st.count)
		info := devinfo()
		for _, w := range st.has {
			if !strings.Contains(info, w) {
				t.Errorf("after ip %s: ibv_devinfo -v lacks %q:\n%s", strings.Join(st.cmd, " "), w, info)
			}
		}
		for _, w := range st.hasNot {
			if strings.Contains(info, w) {
				t.Errorf("after ip %s: ibv_devinfo -v has %q:\n%s", strings.Join(st.cmd, " "), w, info)
			}
		}
		if i == 1 { // the slot of IPA empty: ibv_query_gid_table skips it, not stops there
			if got := runVerbs(t, dir, gidTable); got != "n=3: 0 2 3\n" {
				t.Errorf("ibv_query_gid_table with slot 1 empty: %q", got)
			}
		}
	}
	if got := strings.Count(out.String(), "event_type"); got != 5 {
		t.Errorf("%d events, want 5:\n%s", got, out.String())
	}
	log, _ := stop() // exit status 143: SIGTERM's
	for _, st := range steps {
		if !strings.Contains(log, st.logLine) {
			t.Errorf("the daemon's log lacks %q:\n%s", st.logLine, log)
		}
	}
}

// waitOutput waits up to 5 s for out to hold want count times.
func waitOutput(t *testing.T, out *testnet.Output, want string, count int) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); strings.Count(out.String(), want) < count; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("no %q (%d) within 5 s:\n%s", want, count, out.String())
		}
	}
}
