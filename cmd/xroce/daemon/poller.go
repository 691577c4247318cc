package daemon

import (
	"context"
	"sync"

	"github.com/xroce/xroce/transport"
)

// poller is a device's transport.Poller: the engine's loop calls it on every pass
// to take the WRs every session's QPs wrote into their rings, and before it sleeps
// to raise the rings' sleeping flags (the doorbell protocol of transport.Poller).
// The lock orders ring changes (create, RESET, destroy) with the engine's reads.
type poller struct {
	mu     sync.Mutex
	rings  []*qpRing
	events *asyncRouter // the device's asynchronous events, by owner
}

// pollers holds each device's poller, made and installed on first use.
var pollers sync.Map // *transport.Device → *poller

func pollerFor(dev *transport.Device) *poller {
	if p, ok := pollers.Load(dev); ok {
		return p.(*poller)
	}
	p, loaded := pollers.LoadOrStore(dev, &poller{events: newAsyncRouter()})
	if !loaded {
		dev.SetPoller(p.(*poller))
		go p.(*poller).events.run(context.Background(), dev) // for the device's life
	}
	return p.(*poller)
}

func (p *poller) add(r *qpRing) {
	p.mu.Lock()
	p.rings = append(p.rings, r)
	p.mu.Unlock()
}

// remove unregisters r: the engine's loop no longer reads it when remove returns.
func (p *poller) remove(r *qpRing) {
	p.mu.Lock()
	for i, x := range p.rings {
		if x == r {
			last := len(p.rings) - 1
			p.rings[i] = p.rings[last]
			p.rings[last] = nil
			p.rings = p.rings[:last]
			break
		}
	}
	p.mu.Unlock()
}

// locked runs f with the rings held still.
func (p *poller) locked(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f()
}

// Poll implements transport.Poller.
func (p *poller) Poll() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	did := false
	for _, r := range p.rings {
		if r.poll() {
			did = true
		}
	}
	return did
}

// Sleep implements transport.Poller: flags up, then one more look.
func (p *poller) Sleep() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.rings {
		r.setSleeping(1)
	}
	for _, r := range p.rings {
		if r.pending() {
			for _, r := range p.rings {
				r.setSleeping(0)
			}
			return false
		}
	}
	return true
}

// Awake implements transport.Poller.
func (p *poller) Awake() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.rings {
		r.setSleeping(0)
	}
}
