package main

import (
	"fmt"
)

// maxGuard bounds --guard.
const maxGuard = 1 << 20

// guardByte is the pattern of guard byte i: not zero, not one value repeated,
// so a stray write of zeros or of a fill byte shows.
func guardByte(i int) byte { return byte(0xA5 ^ i*7) }

// allocGuarded allocates n bytes for the registered region; with --guard G, from
// one allocation of n+2G bytes whose first and last G bytes (outside the region
// registered, so outside what any rkey reaches) hold guardByte's pattern.
func (c *conn) allocGuarded(n int) ([]byte, error) {
	g := c.o.guard
	all, err := c.env.prov.Alloc(n + 2*g)
	if err != nil || g == 0 {
		return all, err
	}
	c.guard = [2][]byte{all[:g], all[g+n:]}
	for _, b := range c.guard {
		for i := range b {
			b[i] = guardByte(i)
		}
	}
	return all[g : g+n : g+n], nil
}

// checkGuard checks the guard bytes (--guard) and says so: an error names the
// first changed byte's place relative to the region, nil prints the bytes checked.
func (c *conn) checkGuard() error {
	if c.guard[0] == nil {
		return nil
	}
	for side, b := range c.guard {
		for i := range b {
			if b[i] != guardByte(i) {
				where := fmt.Sprintf("at the region's start - %d", len(b)-i)
				if side == 1 {
					where = fmt.Sprintf("at the region's end + %d", i)
				}
				return fmt.Errorf("guard: memory beside the registered region changed: byte %#x where %#x was, %s", b[i], guardByte(i), where)
			}
		}
	}
	fmt.Fprintf(c.o.out, " Guard: the %d bytes on each side of the registered region are unchanged\n", len(c.guard[0]))
	return nil
}
