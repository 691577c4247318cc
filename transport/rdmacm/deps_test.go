package rdmacm_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports checks that package rdmacm builds on the engine and the CM only:
// transport, transport/ibcm and the wire format.
func TestImports(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if !strings.HasPrefix(p, "github.com/xroce/xroce/") {
			continue // the engine's own dependencies
		}
		switch strings.TrimPrefix(p, "github.com/xroce/xroce/") {
		case "roce", "roce/cm", "roce/rocelayers", "transport", "transport/ibcm", "transport/rdmacm":
		default:
			if !strings.Contains(p, "/internal/") {
				t.Errorf("rdmacm depends on %s", p)
			}
		}
	}
}
