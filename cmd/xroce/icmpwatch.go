package main

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/xroce/xroce/cmd/xroce/icmp"
	"github.com/xroce/xroce/roce"
)

// watchPortUnreachable sends on hit (without blocking), until ctx ends, each time
// peer reports destination port unreachable for a UDP datagram to port 4791 it
// was sent (icmp.PortUnreachable): its host has no RoCEv2 endpoint, or not yet (no
// rdma_rxe, no RDMA NIC, no xroce running there). It returns false when the raw
// socket cannot be opened (not root); the caller then only waits longer. The
// socket is open when it returns (the first REQ's answer is not missed).
func watchPortUnreachable(ctx context.Context, peer netip.Addr, hit chan<- struct{}) bool {
	peer = peer.Unmap()
	err := icmp.Watch(ctx, peer.Is6(), func(r icmp.Report) {
		if r.Kind == icmp.PortUnreachable && r.From == peer && r.Dst == peer {
			select {
			case hit <- struct{}{}:
			default:
			}
		}
	})
	return err == nil
}

// errNoRoCEEndpoint names a peer whose host answered with ICMP port unreachable.
func errNoRoCEEndpoint(peer netip.Addr, tried time.Duration) error {
	return fmt.Errorf("no RoCE endpoint at %v: for %v its host answered our CM REQs on UDP port %d with ICMP port unreachable (no rdma_rxe, RDMA NIC or xroce there)", peer.Unmap(), tried, roce.UDPPort)
}

// cancelOnUnreachable watches peer for ICMP port unreachable (watchPortUnreachable)
// and calls cancel grace after the first one, unless ctx ended first: a host with no
// RoCE endpoint answers every CM REQ so, and a server that starts meanwhile has had
// the time to answer. The func it returns says whether it cancelled, and for how
// long the host had answered so.
func cancelOnUnreachable(ctx context.Context, peer netip.Addr, grace time.Duration, cancel func()) func() (bool, time.Duration) {
	hit := make(chan struct{}, 1)
	var (
		mu    sync.Mutex
		first time.Time
		did   bool
	)
	if watchPortUnreachable(ctx, peer, hit) {
		go func() {
			select {
			case <-hit:
			case <-ctx.Done():
				return
			}
			mu.Lock()
			first = time.Now()
			mu.Unlock()
			select {
			case <-time.After(grace):
				mu.Lock()
				did = true
				mu.Unlock()
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	return func() (bool, time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		return did, time.Since(first).Round(100 * time.Millisecond)
	}
}
