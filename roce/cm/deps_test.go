package cm_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports checks that package cm (its non-test files) imports the standard
// library and roce (with roce's internal CRC package) only, directly or
// indirectly.
func TestImports(t *testing.T) {
	gobin, err := exec.LookPath("go") // go test puts $GOROOT/bin first on PATH
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	want := []string{"github.com/xroce/xroce/roce/internal/crc", "github.com/xroce/xroce/roce", "github.com/xroce/xroce/roce/cm"}
	if strings.Join(deps, " ") != strings.Join(want, " ") {
		t.Errorf("cm depends on %q, want only %q", deps, want)
	}
}
