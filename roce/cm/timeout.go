package cm

import "time"

// Timeout returns the time a 5-bit CM timeout field stands for: 4.096 µs × 2^v
// (IBTA Vol 1 §12.6: Remote and Local CM Response Timeout, MRA's Service Timeout,
// REP's Target ACK Delay; and a path's Local ACK Timeout, ch. 9's transport timer,
// where 0 means infinite). v is cut to 5 bits.
func Timeout(v uint8) time.Duration {
	return 4096 * time.Nanosecond << (v & 31)
}
