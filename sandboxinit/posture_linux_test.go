package sandboxinit

import (
	"testing"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

func TestPostureHelpers(t *testing.T) {
	writable := []string{"/home/dev/proj", "/tmp/"}
	for p, want := range map[string]bool{"/tmp": true, "/tmp/x": true, "/home/dev/proj/a": true, "/home/dev/projx": false, "/": false, "/etc": false} {
		if got := granted(p, writable); got != want {
			t.Errorf("granted(%q) = %v; want %v", p, got, want)
		}
	}
	v1 := linux.ParseMountinfo(`30 29 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs rw
31 30 0:27 / /sys/fs/cgroup/cpu ro,nosuid - cgroup cgroup rw,cpu
`)
	if !cgroupV1Only(v1) {
		t.Error("read-only v1 hierarchies: want cgroupV1Only")
	}
	rw := linux.ParseMountinfo(`31 30 0:27 / /sys/fs/cgroup/cpu rw,nosuid - cgroup cgroup rw,cpu
`)
	if cgroupV1Only(rw) || cgroupV1Only(nil) {
		t.Error("a read-write hierarchy, or none: want !cgroupV1Only")
	}
	if got := describeValues(map[string][]string{"1": {"10", "11"}}); got != "1" {
		t.Errorf("one value: got %q", got)
	}
	if got := describeValues(map[string][]string{"1": {"10"}, "0": {"11"}}); got != "0 (threads 11); 1 (threads 10)" {
		t.Errorf("two values: got %q", got)
	}
	if (&wire.Posture{}).OK() {
		t.Error("no checks: want not OK")
	}
}
