package interop

import (
	"os"
	"testing"
	"time"
)

func TestBoot(t *testing.T) {
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
	t.Logf("booted in %v", lab.Booted)
	out, rc, err := lab.Guest("ibv_devices; rdma link; rdma link add rxe1 type rxe netdev eth0; ls /sys/class/infiniband; cat /proc/modules | cut -c1-40; ip addr show eth0; ping -c 2 10.81.0.1")(60 * time.Second)
	t.Logf("rc %d err %v\n%s\nconsole:\n%s", rc, err, out, tail(lab.Console(), 3000))
}
