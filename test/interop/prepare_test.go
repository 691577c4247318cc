package interop

import (
	"os"
	"testing"
	"time"
)

func TestPrepare(t *testing.T) {
	if os.Getenv("XROCE_INTEROP") == "" {
		t.Skip("set XROCE_INTEROP=quick or full (make interop-quick, make interop)")
	}
	img, err := Prepare(10 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image %+v", img)
}
