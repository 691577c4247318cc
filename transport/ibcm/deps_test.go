package ibcm_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports checks that package ibcm uses the standard library and the wire
// format (roce with its internal CRC package, roce/cm) only.
func TestImports(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(gobin, "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	want := "github.com/xroce/xroce/roce/internal/crc github.com/xroce/xroce/roce github.com/xroce/xroce/roce/cm github.com/xroce/xroce/transport/ibcm"
	if got := strings.Join(strings.Fields(string(out)), " "); got != want {
		t.Errorf("ibcm depends on %q, want %q", got, want)
	}
}
