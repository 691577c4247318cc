// Package captures finds the rdma_rxe captures that tests use as inputs. There are
// two sources, each a directory holding rxe/ and rxe-loss/:
//
//   - "testdata": the repository's own recordings (testdata/ at the repository root,
//     made by test/interop's TestRecordCaptures; testdata/README.md). Always used: a
//     test fails without them.
//   - "shared": the shared captures, shared/pcaps beside the checkout, or the directory
//     named by $XROCE_PCAPS (absolute, or relative to the repository root). Used
//     when present, as an independent second set of recordings; absent, tests run on
//     testdata alone. An XROCE_PCAPS that names a missing directory is an error.
//
// The two sets were recorded the same way but not at the same time: QPNs, PSNs,
// keys, addresses in memory and frame numbers differ. Tests that assert values of a
// particular recording keep them per source (Source.Name).
package captures

import (
	"os"
	"path/filepath"
	"testing"
)

// The sources' names.
const (
	Testdata = "testdata"
	Shared   = "shared"
)

// Source is one set of captures.
type Source struct {
	Name string // Testdata or Shared
	Dir  string // holds rxe/ and rxe-loss/
}

// Sources returns the repository's captures and, when present, the shared ones.
func Sources(t testing.TB) []Source {
	t.Helper()
	srcs := []Source{Repo(t)}
	if s, ok := shared(t); ok {
		srcs = append(srcs, s)
	}
	return srcs
}

// Repo returns the repository's own captures (testdata/).
func Repo(t testing.TB) Source {
	t.Helper()
	dir := filepath.Join(repoRoot(t), "testdata")
	if _, err := os.Stat(filepath.Join(dir, "rxe")); err != nil {
		t.Fatalf("the repository's rdma_rxe captures are missing (%v): testdata/rxe is part of the checkout", err)
	}
	return Source{Testdata, dir}
}

// shared returns the shared captures if they are there.
func shared(t testing.TB) (Source, bool) {
	t.Helper()
	root := repoRoot(t)
	dir := os.Getenv("XROCE_PCAPS")
	switch {
	case dir == "":
		dir = filepath.Join(root, "..", "shared", "pcaps")
		if _, err := os.Stat(filepath.Join(dir, "rxe")); err != nil {
			return Source{}, false
		}
	case !filepath.IsAbs(dir):
		dir = filepath.Join(root, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, "rxe")); err != nil {
		t.Fatalf("XROCE_PCAPS: no captures there (%v): unset it to use testdata/ alone", err)
	}
	return Source{Shared, dir}, true
}

// Run runs f as one subtest per source, named after it.
func Run(t *testing.T, f func(t *testing.T, s Source)) {
	t.Helper()
	for _, s := range Sources(t) {
		t.Run(s.Name, func(t *testing.T) { f(t, s) })
	}
}

// Path returns the path of a capture under rxe/, e.g. Path(t, "ib_write_bw.pcap").
func (s Source) Path(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(s.Dir, "rxe", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s capture %s not found: %v", s.Name, name, err)
	}
	return p
}

// Files returns the captures under sub ("rxe" or "rxe-loss"); there must be some.
func (s Source) Files(t testing.TB, sub string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(s.Dir, sub, "*.pcap"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no %s captures in %s: %v", s.Name, filepath.Join(s.Dir, sub), err)
	}
	return files
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

// Pick returns the entry of m (values per source, keyed by Source.Name) for s,
// failing t when m has none: a test's expectations of one particular recording.
func Pick[T any](t testing.TB, s Source, m map[string]T) T {
	t.Helper()
	v, ok := m[s.Name]
	if !ok {
		t.Fatalf("no values for capture source %q", s.Name)
	}
	return v
}
