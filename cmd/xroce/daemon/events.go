package daemon

import (
	"context"
	"encoding/binary"
	"sync"

	"github.com/xroce/xroce/transport"
)

// asyncRouter delivers the engine's asynchronous events (transport.Device's
// GetAsyncEvent: IBV_EVENT_CQ_ERR, IBV_EVENT_SQ_DRAINED, IBV_EVENT_SRQ_LIMIT_REACHED)
// to the session that owns the CQ, QP or SRQ, as an AsyncEventMsg on the session's event channel
// (OpAsyncChannel), which the library reads in ibv_get_async_event.
type asyncRouter struct {
	mu   sync.Mutex
	qps  map[uint32]asyncDest // by QPN
	cqs  map[*transport.CompletionQueue]asyncDest
	srqs map[*transport.SharedReceiveQueue]asyncDest
}

// asyncDest is where one object's events go: its session's channel and the
// cookie the library gave the object.
type asyncDest struct {
	out    *asyncOut
	cookie uint64
}

// asyncOut is a session's event channel, set by OpAsyncChannel.
type asyncOut struct {
	mu sync.Mutex
	ch *chanObj
}

func newAsyncRouter() *asyncRouter {
	return &asyncRouter{qps: map[uint32]asyncDest{}, cqs: map[*transport.CompletionQueue]asyncDest{},
		srqs: map[*transport.SharedReceiveQueue]asyncDest{}}
}

// run routes dev's events until ctx ends.
func (r *asyncRouter) run(ctx context.Context, dev *transport.Device) {
	for {
		e, err := dev.GetAsyncEvent(ctx)
		if err != nil {
			return
		}
		r.mu.Lock()
		d, ok := r.qps[e.QPN]
		switch {
		case e.CQ != nil:
			d, ok = r.cqs[e.CQ]
		case e.SRQ != nil:
			d, ok = r.srqs[e.SRQ]
		}
		r.mu.Unlock()
		if ok {
			d.out.send(uint32(e.Type), d.cookie)
		}
	}
}

// setQP routes the events of QP qpn to d (nil: nowhere).
func (r *asyncRouter) setQP(qpn uint32, d *asyncDest) { setDest(&r.mu, r.qps, qpn, d) }

// setCQ routes the events of cq to d (nil: nowhere).
func (r *asyncRouter) setCQ(cq *transport.CompletionQueue, d *asyncDest) {
	setDest(&r.mu, r.cqs, cq, d)
}

// setSRQ routes the events of srq to d (nil: nowhere).
func (r *asyncRouter) setSRQ(srq *transport.SharedReceiveQueue, d *asyncDest) {
	setDest(&r.mu, r.srqs, srq, d)
}

func setDest[K comparable](mu *sync.Mutex, m map[K]asyncDest, k K, d *asyncDest) {
	mu.Lock()
	defer mu.Unlock()
	if d == nil {
		delete(m, k)
		return
	}
	m[k] = *d
}

// send writes one event, if the session has an event channel.
func (o *asyncOut) send(typ uint32, cookie uint64) {
	o.mu.Lock()
	ch := o.ch
	o.mu.Unlock()
	if ch == nil {
		return
	}
	b := binary.LittleEndian.AppendUint32(nil, typ)
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint64(b, cookie)
	ch.write(b)
}

func (o *asyncOut) set(ch *chanObj) {
	o.mu.Lock()
	if o.ch != nil {
		o.ch.close()
	}
	o.ch = ch
	o.mu.Unlock()
}
