package daemon

// Unaffiliated asynchronous events of port 1 (enum ibv_event_type).
const (
	EventPortActive uint32 = 9  // IBV_EVENT_PORT_ACTIVE: the netdev is up with carrier
	EventPortErr    uint32 = 10 // IBV_EVENT_PORT_ERR: it went down or lost carrier
	EventGIDChange  uint32 = 18 // IBV_EVENT_GID_CHANGE: a GID table entry came or went
)

// PortEvent sends the port event typ (EventPortActive, EventPortErr,
// EventGIDChange) to every session with an event channel, with port number 1 in
// the cookie's place, as ib_uverbs queues a device's port events on the async file
// of every context (uverbs_main.c ib_uverbs_event_handler) and rdma_rxe raises them
// for its netdev (rxe_net.c rxe_port_up / rxe_port_down; ib_cache.c
// dispatch_gid_change_event, once per entry added or removed).
func (s *Server) PortEvent(typ uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.clients {
		if c.sess != nil {
			c.sess.async.send(typ, 1)
		}
	}
}
