package roce_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestStandardLibraryOnly checks that package roce (its non-test files) imports
// nothing outside the standard library, directly or indirectly: gopacket belongs to
// roce/rocelayers, netlink to xdp.
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
	deps := strings.Fields(string(out))
	if len(deps) != 1 || deps[0] != "github.com/xroce/xroce/roce" {
		t.Errorf("roce depends on packages outside the standard library: %q", deps)
	}
}
