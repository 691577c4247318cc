package conform

import (
	"io/fs"
	"testing"
)

// FuzzParse: no scenario file, however broken, panics the parser; a file it
// accepts builds frames without panicking and every expectation renders.
func FuzzParse(f *testing.F) {
	f.Add([]byte(goodScenario))
	_ = fs.WalkDir(builtin, "scenarios", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := fs.ReadFile(builtin, p)
			f.Add(b)
		}
		return nil
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("fuzz.yaml", data)
		if err != nil {
			if s != nil {
				t.Fatal("a scenario with an error")
			}
			return
		}
		c := testConn()
		for i := range s.Send {
			_, _ = c.Build(&s.Send[i])
		}
		for i := range s.Expect.Responses {
			_ = s.Expect.Responses[i].describe()
		}
	})
}
