package roce_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestStandardLibraryOnly checks that package roce (its non-test files) imports
// nothing outside the standard library and its own internal packages, directly or
// indirectly: gopacket belongs to roce/rocelayers, netlink to xdp.
func TestStandardLibraryOnly(t *testing.T) {
	gobin, err := exec.LookPath("go") // go test puts $GOROOT/bin first on PATH
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var deps []string
	for _, d := range strings.Fields(string(out)) {
		if !strings.HasPrefix(d, "github.com/xroce/xroce/roce/internal/") {
			deps = append(deps, d)
		}
	}
	if len(deps) != 1 || deps[0] != "github.com/xroce/xroce/roce" {
		t.Errorf("roce depends on packages outside the standard library: %q", deps)
	}
}
