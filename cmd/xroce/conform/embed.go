package conform

import "embed"

// builtin holds the scenarios shipped in the binary (scenarios/*.yaml).
//
//go:embed scenarios/*.yaml
var builtin embed.FS

// Builtin returns the scenarios embedded in the binary, sorted by name.
func Builtin() ([]*Scenario, error) { return Load(builtin, "scenarios") }
