//go:build !verbs

package main

import "fmt"

// verbsBuilt reports whether this binary has the verbs provider.
const verbsBuilt = false

func openVerbs(linkOptions) (*env, error) {
	return nil, fmt.Errorf("--provider verbs: this xroce was built without libibverbs; build it with `make verbs` (needs cgo and libibverbs-dev)")
}
