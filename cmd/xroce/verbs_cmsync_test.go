package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xroce/xroce/test/testnet"
)

// Synchronous rdma_cm_ids (rdma_create_id without an event channel, rdma_create_ep,
// rdma_get_request): each call waits for its own event, as librdmacm's
// ucma_complete does, and a synchronous listener's requests each get an id with a
// channel of its own (rdma_migrate_id to a new channel).

// TestVerbsSyncIDs: testdata/cmsync.c. A server takes two concurrent connection
// requests with rdma_get_request (each with its own channel, its CONNECT_REQUEST
// event and a QP and CQs made from rdma_create_ep's attributes), accepts them in
// reverse order (each rdma_accept returns at its own ESTABLISHED), and answers each
// client's "ping K" with "pong K"; both sides end with a synchronous
// rdma_disconnect that returns at DISCONNECTED. Connecting where nothing listens
// ends at once: -1, ECONNREFUSED, the REJECTED event with reason 8 (invalid
// service ID) in id->event; rdma_get_request on that id, which does not listen,
// is EINVAL at once (librdmacm would wait for ever).
func TestVerbsSyncIDs(t *testing.T) {
	p := newVerbsPair(t)
	prog := cBuild(t, "testdata/cmsync.c", "-lrdmacm")
	addr, port := p.n.IPA.String(), "7999"
	sout, sdone := cmServer(t, p, prog, "server", addr, port)
	type run struct {
		done <-chan error
		out  *testnet.Output
	}
	var clients []run
	for _, k := range []string{"1", "2"} {
		_, out, done := app(t, p.n.NsB, p.dirB, prog, "client", addr, port, k)
		clients = append(clients, run{done, out})
	}
	for i, c := range clients {
		k := []string{"1", "2"}[i]
		want := "client " + k + ": pong " + k + "\nclient: disconnected, RDMA_CM_EVENT_DISCONNECTED\n"
		if err := wait(t, "client "+k, c.done, c.out, 30*time.Second); err != nil || c.out.String() != want {
			t.Errorf("client %s: %v\n%s\nwant:\n%s", k, err, c.out.String(), want)
		}
	}
	if err := wait(t, "server", sdone, sout, 20*time.Second); err != nil {
		t.Errorf("server: %v\n%s", err, sout.String())
	}
	lines := strings.Split(strings.TrimSuffix(sout.String(), "\n"), "\n")
	if len(lines) != 6 || lines[0] != "server: listening" || lines[1] != "server: two requests" {
		t.Fatalf("server output:\n%s", sout.String())
	}
	answered := []string{lines[2], lines[4]}
	slices.Sort(answered)
	if want := []string{"server: ping 1 answered", "server: ping 2 answered"}; !slices.Equal(answered, want) ||
		lines[3] != "server: disconnected, RDMA_CM_EVENT_DISCONNECTED" || lines[5] != lines[3] {
		t.Errorf("server output:\n%s", sout.String())
	}

	start := time.Now()
	_, out, done := app(t, p.n.NsB, p.dirB, prog, "refused", addr, "7998")
	err := wait(t, "refused", done, out, 20*time.Second)
	if want := "rdma_connect -1 Connection refused, RDMA_CM_EVENT_REJECTED status 8\n" +
		"xroce: rdma_get_request on an id that does not listen: call rdma_listen on it first\nrdma_get_request -1 Invalid argument\n"; err != nil || out.String() != want {
		t.Errorf("refused: %v\n%s\nwant:\n%s", err, out.String(), want)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a refused synchronous connect took %v", d)
	}
}

// TestVerbsRdmaServerClient: rdmacm-utils' rdma_server / rdma_client and
// rdma_xserver / rdma_xclient (RC), unmodified: synchronous endpoints from
// rdma_create_ep, CQs that rdma_create_qp makes, rdma_reg_msgs in the id's PD, and
// a 16-byte inline SEND on a QP asked for no inline data (rdma_rxe's one SGE gives
// 16 bytes: rxeQPCap). Both sides print "end 0"; these programs check neither the
// bytes nor the completions' status (TestVerbsSyncIDs does).
func TestVerbsRdmaServerClient(t *testing.T) {
	for _, c := range []struct{ server, client string }{{"rdma_server", "rdma_client"}, {"rdma_xserver", "rdma_xclient"}} {
		t.Run(c.server, func(t *testing.T) {
			needTool(t, "/usr/bin/"+c.server, "rdmacm-utils")
			p := newVerbsPair(t)
			args := []string{c.server}
			if c.server == "rdma_server" { // rdma_xserver listens on every address
				args = append(args, "-s", p.n.IPA.String())
			}
			sout, sdone := cmServer(t, p, args...)
			_, cout, cdone := app(t, p.n.NsB, p.dirB, c.client, "-s", p.n.IPA.String())
			cerr := wait(t, c.client, cdone, cout, 30*time.Second)
			serr := wait(t, c.server, sdone, sout, 20*time.Second)
			for _, r := range []struct {
				name, out string
				err       error
			}{{c.client, cout.String(), cerr}, {c.server, sout.String(), serr}} {
				if want := r.name + ": start\n" + r.name + ": end 0\n"; r.err != nil || r.out != want {
					t.Errorf("%s: %v\n%s\nwant:\n%s", r.name, r.err, r.out, want)
				}
			}
		})
	}
}

// TestVerbsUcmatoseMigrate: ucmatose -m moves every id, the listener's too, to a
// new event channel (rdma_migrate_id) after its data transfers and disconnects
// there.
func TestVerbsUcmatoseMigrate(t *testing.T) {
	cmatoseTest(t, "ucmatose", "-c", "2", "-m")
}

// TestVerbsMigratePending: rdma_migrate_id moves the id's events that wait unread
// on its old channel to the new one, as the kernel's does (ucma_move_events): a
// client connects to an rping server on an event channel, leaves the ESTABLISHED
// event unread, migrates the id, and reads ESTABLISHED on the new channel, then
// DISCONNECTED there (testdata/cmsync.c migrate). Before, the event stayed behind
// and an application waiting on the new channel waited for ever.
func TestVerbsMigratePending(t *testing.T) {
	needTool(t, "/usr/bin/rping", "rdmacm-utils")
	p := newVerbsPair(t)
	prog := cBuild(t, "testdata/cmsync.c", "-lrdmacm")
	_, sdone := cmServer(t, p, "rping", "-s", "-a", p.n.IPA.String(), "-p", "7301")
	_, out, done := app(t, p.n.NsB, p.dirB, prog, "migrate", p.n.IPA.String(), "7301")
	want := "after the migration: RDMA_CM_EVENT_ESTABLISHED on the new channel\nafter the disconnect: RDMA_CM_EVENT_DISCONNECTED\n"
	if err := wait(t, "migrate", done, out, 30*time.Second); err != nil || out.String() != want {
		t.Errorf("migrate: %v\n%s\nwant:\n%s", err, out.String(), want)
	}
	select { // the server ends when its client goes
	case <-sdone:
	case <-time.After(10 * time.Second):
		t.Error("rping server still running 10 s after its client disconnected")
	}
}
