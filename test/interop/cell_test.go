package interop

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestOneCell(t *testing.T) {
	if os.Getenv("XROCE_INTEROP") == "" {
		t.Skip("set XROCE_INTEROP")
	}
	img, err := Prepare(10 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	lab, err := NewLab(img, 1500)
	if err != nil {
		t.Fatal(err)
	}
	defer lab.Close()
	wait := lab.Guest("ib_write_bw -d rxe0 -x 1 -F -s 64 -n 200")
	lab.Guest("while ! netstat -ltn | grep -q :18515; do sleep 0.1; done")(30 * time.Second)
	out, err := exec.Command("ip", "netns", "exec", lab.NS, "timeout", "60", "../../bin/xroce", "write_bw", "-d", lab.XIf, "-s", "64", "-n", "200", lab.GuestIP.String()).CombinedOutput()
	t.Logf("xroce: %v\n%s", err, out)
	gout, rc, gerr := wait(60 * time.Second)
	t.Logf("rxe: rc %d %v\n%s", rc, gerr, gout)
}
