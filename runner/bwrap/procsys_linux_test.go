package bwrap

import (
	"testing"

	"github.com/cordonhq/cordon/internal/linux"
)

func TestProcSysBareIn(t *testing.T) {
	root := linux.MountInfo{Point: "/", FSType: "ext4"}
	proc := linux.MountInfo{Point: "/proc", FSType: "proc"}
	for _, c := range []struct {
		name   string
		mounts []linux.MountInfo
		want   bool
	}{
		{"a procfs with nothing below /proc/sys", []linux.MountInfo{root, proc}, true},
		{"a read-only /proc/sys of a container's", []linux.MountInfo{root, proc, {Point: "/proc/sys", FSType: "proc", Opts: "ro"}}, true},
		{"binfmt_misc mounted below it", []linux.MountInfo{root, proc, {Point: "/proc/sys/fs/binfmt_misc", FSType: "binfmt_misc"}}, false},
		{"systemd's automount point for it", []linux.MountInfo{root, proc, {Point: "/proc/sys/fs/binfmt_misc", FSType: "autofs"}}, false},
		{"no /proc", []linux.MountInfo{root}, false},
		{"/proc covered by something else", []linux.MountInfo{root, proc, {Point: "/proc", FSType: "tmpfs"}}, false},
	} {
		if got := procSysBareIn(c.mounts); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
