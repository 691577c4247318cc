package daemon

import (
	"testing"

	"github.com/xroce/xroce/roce"
)

// TestRXEPortAttrMTU: active_mtu follows the link's path MTU, and a netdev MTU
// too small for any (roce.MTUFromNetdev 0) reports 256, as rxe_set_mtu does.
func TestRXEPortAttrMTU(t *testing.T) {
	for _, c := range []struct{ in, want roce.MTU }{{roce.MTU4096, roce.MTU4096}, {roce.MTU1024, roce.MTU1024}, {0, roce.MTU256}} {
		if got := RXEPortAttr(true, c.in, 10000).ActiveMTU; got != uint32(c.want) {
			t.Errorf("active %v: active_mtu %d, want %d", c.in, got, c.want)
		}
	}
}
