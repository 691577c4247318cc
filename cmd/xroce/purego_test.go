package main

import (
	"debug/elf"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestDefaultBuildIsPureGo asserts that, without the verbs tag, no package of
// xroce has cgo files even with cgo enabled, and that the binary built as
// make bin/xroce builds it (CGO_ENABLED=0) is static: no interpreter, no shared
// library.
func TestDefaultBuildIsPureGo(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{len .CgoFiles}}", "github.com/xroce/xroce/...")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		if len(f) == 2 && strings.HasPrefix(f[0], "github.com/xroce/") && f[1] != "0" {
			t.Errorf("%s has %s cgo files in the default build", f[0], f[1])
		}
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	libs, _ := f.ImportedLibraries()
	if len(libs) != 0 {
		t.Errorf("bin/xroce imports %v", libs)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("bin/xroce has a dynamic loader (PT_INTERP)")
		}
	}
}

// TestVersion: xroce --version names the build's providers; the default build has
// only the engine.
func TestVersion(t *testing.T) {
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "xroce ") || !strings.HasSuffix(string(out), ", providers: engine\n") {
		t.Fatalf("%v: %q", err, out)
	}
}
