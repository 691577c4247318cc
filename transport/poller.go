package transport

// A Poller is work outside the engine that Run polls on every pass, before the
// engine's own: the verbs daemon's shared-memory send and receive rings
// (cmd/xroce/daemon), which it turns into PostSend and PostRecv calls. Run calls
// its methods from Run's goroutine only, without the engine lock, so they may
// post.
//
// The doorbell protocol (the Dekker pattern of rdma-core's providers, which ring a
// doorbell only when the device may not be polling): before Run sleeps in
// Link.Wait it calls Sleep, which raises the producers' "sleeping" flags and then
// looks for work once more; a producer stores its work, then reads the flag, and
// wakes the device (Device.Wake) only when the flag is up. Either the producer sees
// the flag or Sleep sees the work, so nothing waits for a timer.
type Poller interface {
	// Poll takes in what producers posted and reports whether there was any.
	Poll() bool
	// Sleep raises the sleeping flags and reports whether Run may sleep: false when
	// work arrived in the meantime (the flags are then lowered again).
	Sleep() bool
	// Awake lowers the sleeping flags after Run woke.
	Awake()
}

// SetPoller makes Run poll p on every pass (nil: none). It may be called while Run
// runs.
func (d *Device) SetPoller(p Poller) {
	if p == nil {
		d.poller.Store(nil)
		return
	}
	d.poller.Store(&p)
}

// Wake makes a Run that sleeps in Link.Wait make a pass: a Poller's producer calls
// it when it found the sleeping flag up. It never blocks.
func (d *Device) Wake() { d.wakeLoop() }

// pollerOf returns the current Poller or nil.
func (d *Device) pollerOf() Poller {
	if p := d.poller.Load(); p != nil {
		return *p
	}
	return nil
}
