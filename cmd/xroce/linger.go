package main

import (
	"time"

	"github.com/xroce/xroce/transport"
)

// lingerMax bounds how long a side that finished keeps answering its peer.
const lingerMax = time.Second

// linger keeps this side's QPs answering after a test that has no closing exchange
// ended well (write_lat, as perftest's has none, and RC pingpong, as
// ibv_rc_pingpong's): the peer may still wait for the acknowledgement of its last
// request, lost on the way, and retransmits that request after its local ACK
// timeout (timeout, IBTA Vol 1 §11.2.4.2's code; 0: transport.DefaultTimeout's).
// A QP torn down at once leaves the peer to fail with retry exceeded although
// every message arrived. linger returns once the peer has sent nothing for two
// such timeouts, or after lingerMax; on the xroce engine only (an HCA's QP is the
// application's to keep).
func (c *conn) linger(timeout uint8) {
	if c.env == nil {
		return
	}
	if _, ok := c.env.prov.(*engine); !ok {
		return
	}
	if timeout == 0 {
		timeout = transport.DefaultTimeout
	}
	quiet := min(2*time.Duration(4096<<timeout)*time.Nanosecond, lingerMax)
	heard := c.counterWatch("rcvd_pkts")
	start, last := time.Now(), time.Now()
	for time.Since(last) < quiet && time.Since(start) < lingerMax {
		time.Sleep(quiet / 8)
		if heard() > 0 {
			last = time.Now()
		}
	}
}
