package conform

import (
	"io/fs"
	"testing"
	"time"

	"github.com/xroce/xroce/roce"
)

// FuzzParse: no scenario file, however broken, panics the parser; a file it
// accepts builds frames without panicking, every expectation renders, and a
// responder-role one answers a SEND, a READ and an atomic by its rules.
func FuzzParse(f *testing.F) {
	f.Add([]byte(goodScenario))
	f.Add([]byte(goodResponder))
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
		if s.Responder() {
			_ = describeExpectedPasses(s.Expect.Requests, s.Expect.Client.Name)
			r := &responder{c: c, link: &sentLink{}, rules: s.Answer, mem: make([]byte, 64), atomics: map[int]uint64{}}
			for _, op := range []roce.Opcode{roce.RC_SEND_ONLY, roce.RC_RDMA_READ_REQUEST, roce.RC_FETCH_ADD} {
				p := &roce.Packet{BTH: roce.BTH{Opcode: op, PSN: c.EPSN}, RETH: roce.RETH{DMALen: 100}}
				_ = r.handle(p, time.Now())
			}
		}
	})
}
