package transport_test

import (
	"net/netip"
	"sync"
	"testing"

	"github.com/xroce/xroce/roce"
	"github.com/xroce/xroce/transport"
)

// movingLink is a link whose addresses a test changes, as `ip addr` changes an
// interface's.
type movingLink struct {
	*transport.PipeEnd
	mu    sync.Mutex
	addrs []netip.Addr
}

func (l *movingLink) Addrs() []netip.Addr {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.addrs
}

func (l *movingLink) set(a ...netip.Addr) {
	l.mu.Lock()
	l.addrs = a
	l.mu.Unlock()
}

// TestFollowAddrs: the device's GID table follows its link's addresses
// (roce.GIDTable.Follow); an address handle naming the slot of a removed address
// is refused with the cause, one naming the new address's slot is resolved, and a
// table returned before the change is left as it was.
func TestFollowAddrs(t *testing.T) {
	a, _ := transport.NewPipe(transport.PipeConfig{MAC: macA, Addrs: []netip.Addr{addrA}}, transport.PipeConfig{MAC: macB, Addrs: []netip.Addr{addrB}})
	link := &movingLink{PipeEnd: a, addrs: []netip.Addr{addrA}}
	dev, err := transport.Open(link, transport.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	start := dev.GIDTable()
	if added, removed := dev.FollowAddrs(); added != nil || removed != nil {
		t.Fatalf("nothing changed, but FollowAddrs = %v, %v", added, removed)
	}
	extra := netip.MustParseAddr("10.77.0.99")
	link.set(addrA, extra)
	added, removed := dev.FollowAddrs()
	if len(added) != 1 || added[0].Index != 2 || added[0].GID != roce.GIDFromAddr(extra) || removed != nil {
		t.Fatalf("adding %v: added %v, removed %v", extra, added, removed)
	}
	link.set(extra)
	added, removed = dev.FollowAddrs()
	if len(removed) != 1 || removed[0].Index != 1 || removed[0].GID != roce.GIDFromAddr(addrA) || added != nil {
		t.Fatalf("removing %v: added %v, removed %v", addrA, added, removed)
	}
	if len(start) != 2 || start[1].GID != roce.GIDFromAddr(addrA) {
		t.Errorf("the table returned before the change changed:\n%v", start)
	}
	pd := dev.AllocPD()
	_, err = pd.CreateAH(transport.AddressHandle{DGID: roce.GIDFromAddr(addrB), SGIDIndex: 1})
	const want = "transport: address handle: roce: GID index 1 is empty: its address was removed from the interface"
	if err == nil || err.Error() != want {
		t.Errorf("AH on the empty slot: %v, want %q", err, want)
	}
	if _, err := pd.CreateAH(transport.AddressHandle{DGID: roce.GIDFromAddr(addrB), SGIDIndex: 2}); err != nil {
		t.Errorf("AH on the new address's slot: %v", err)
	}
}
