package main

import (
	"fmt"
	"io"
	"time"

	"github.com/xroce/xroce/transport/rdmacm"
)

// cmAgent serves QP1 while a server without -R waits for its client, as the
// kernel's ib_cm does on every rdma_rxe host: a client started with -R gets a REJ
// with reason Invalid Service ID (IBA Vol 1 12.6.7; nothing listens with the RDMA
// CM here) at once instead of waiting for its REQ's timeouts, and this side says
// once, on warn, what the client asked for. It returns the function that stops it
// (a no-op when the provider is not xroce's engine or QP1 cannot be made).
func (c *conn) cmAgent(warn io.Writer) func() {
	eng, ok := c.env.prov.(*engine)
	if !ok {
		return func() {}
	}
	svc, err := rdmacm.Start(eng.dev, rdmacm.Options{})
	if err != nil {
		return func() {}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(cmAgentLook)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if svc.Stats().Unlistened > 0 {
				fmt.Fprintf(warn, "xroce %s: a client asked to connect with the RDMA CM (perftest's -R) to this server, which runs without -R: give both sides -R, or neither\n", c.t.name)
				return
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
		svc.Close()
	}
}

// cmAgentLook is how often cmAgent looks at the REQs it refused.
const cmAgentLook = 100 * time.Millisecond
