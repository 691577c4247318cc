package transport

import (
	"context"
	"strconv"
)

// EventType is an asynchronous event's type (enum ibv_event_type, with its values).
type EventType uint8

// Asynchronous event types this engine raises.
const (
	EVENT_CQ_ERR            EventType = 0  // IBV_EVENT_CQ_ERR: a CQ overran
	EVENT_QP_FATAL          EventType = 1  // IBV_EVENT_QP_FATAL: a QP moved to ERR on its own (the engine raises none, as rdma_rxe)
	EVENT_SQ_DRAINED        EventType = 5  // IBV_EVENT_SQ_DRAINED: a QP moved to SQD has no request outstanding any more
	EVENT_SRQ_LIMIT_REACHED EventType = 15 // IBV_EVENT_SRQ_LIMIT_REACHED: fewer WQEs than the armed limit remain
)

func (t EventType) String() string {
	switch t {
	case EVENT_CQ_ERR:
		return "IBV_EVENT_CQ_ERR"
	case EVENT_QP_FATAL:
		return "IBV_EVENT_QP_FATAL"
	case EVENT_SQ_DRAINED:
		return "IBV_EVENT_SQ_DRAINED"
	case EVENT_SRQ_LIMIT_REACHED:
		return "IBV_EVENT_SRQ_LIMIT_REACHED"
	}
	return "IBV_EVENT(" + strconv.Itoa(int(t)) + ")"
}

// AsyncEvent is an affiliated asynchronous event (struct ibv_async_event): CQ is set
// for a CQ event, QPN for a QP event, SRQ for an SRQ event.
type AsyncEvent struct {
	Type EventType
	CQ   *CompletionQueue
	QPN  uint32
	SRQ  *SharedReceiveQueue
}

// maxEvents bounds the events kept unread; older ones are dropped beyond it.
const maxEvents = 256

// raise queues an asynchronous event. It may be called with or without the engine
// lock.
func (d *Device) raise(e AsyncEvent) {
	d.evMu.Lock()
	if len(d.events) >= maxEvents {
		d.events = d.events[1:]
	}
	d.events = append(d.events, e)
	d.evMu.Unlock()
	select {
	case d.evNotify <- struct{}{}:
	default:
	}
}

// GetAsyncEvent returns the oldest unread asynchronous event, waiting for one until
// ctx ends (ibv_get_async_event); the error is ctx.Err().
func (d *Device) GetAsyncEvent(ctx context.Context) (AsyncEvent, error) {
	for {
		d.evMu.Lock()
		if len(d.events) > 0 {
			e := d.events[0]
			d.events = d.events[1:]
			d.evMu.Unlock()
			return e, nil
		}
		d.evMu.Unlock()
		select {
		case <-d.evNotify:
		case <-ctx.Done():
			return AsyncEvent{}, ctx.Err()
		}
	}
}

// failFatal moves the QPs that lost a receive completion in this pass to ERR,
// raising no event of their own (the CQ raised IBV_EVENT_CQ_ERR): rxe_resp.c's
// RESPST_ERR_CQ_OVERFLOW goes to rxe_qp_error, which raises none. The engine lock
// is held.
func (d *Device) failFatal() {
	for _, qp := range d.fatal {
		qp.fatal = false
		if qp.state != QPS_ERR && qp.state != QPS_RESET && !qp.destroyed {
			qp.toError()
		}
	}
	clear(d.fatal)
	d.fatal = d.fatal[:0]
}
