package xdp

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// inNetns runs f on a locked OS thread inside the network namespace at path (as
// created by `ip netns add`, /var/run/netns/NAME), or in the current one when path is
// empty. Sockets and netlink handles created by f stay in that namespace.
func inNetns(path string, f func() error) error {
	if path == "" {
		return f()
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("xdp: current network namespace: %w", err)
	}
	defer orig.Close()
	target, err := netns.GetFromPath(path)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("xdp: network namespace %s: %w", path, err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("xdp: entering network namespace %s: %w", path, err)
	}
	defer func() {
		// A thread that cannot go back stays locked: the runtime then ends it with
		// this goroutine rather than reuse it in the wrong namespace.
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
	}()
	return f()
}
