// Package captures finds the rdma_rxe captures that tests use as inputs: the
// directory named by $XROCE_PCAPS (absolute, or relative to the repository root), or
// shared/pcaps beside the checkout. The captures are required: a test that cannot find
// them fails with what to set.
package captures

import (
	"os"
	"path/filepath"
	"testing"
)

// Dir returns the captures directory (it holds rxe/ and rxe-loss/).
func Dir(t testing.TB) string {
	t.Helper()
	root := repoRoot(t)
	dir := os.Getenv("XROCE_PCAPS")
	switch {
	case dir == "":
		dir = filepath.Join(root, "..", "shared", "pcaps")
	case !filepath.IsAbs(dir):
		dir = filepath.Join(root, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "rxe")); err != nil {
		t.Fatalf("rdma_rxe captures not found (%v): set XROCE_PCAPS to the shared/pcaps directory", err)
	}
	return dir
}

// Path returns the path of a capture under rxe/, e.g. Path(t, "ib_write_bw.pcap").
func Path(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(Dir(t), "rxe", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("capture %s not found: %v", name, err)
	}
	return p
}

// repoRoot walks up from the test's working directory (its package folder) to the
// folder holding go.mod.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's folder")
		}
		dir = parent
	}
}
