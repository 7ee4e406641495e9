package sandboxinit

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
	"github.com/cordonhq/cordon/sandboxinit/wire"
)

// On the host, outside any sandbox, the self-check must fail: it is what stops a
// command from running when a backend built less than the contract asked for.
func TestSelfCheckFailsOutsideASandbox(t *testing.T) {
	testutil.RequireRoot(t)
	err := selfCheck(&wire.Spec{Argv: []string{"true"}})
	if err == nil {
		t.Fatal("the self-check passed on the host")
	}
	msg := err.Error()
	if !strings.Contains(msg, "network interface") && !strings.Contains(msg, "capability set") && !strings.Contains(msg, "read-write") {
		t.Fatalf("unexpected reason: %v", err)
	}
}

func TestCheckMounts(t *testing.T) {
	const base = `1 0 0:1 / / ro,nosuid - tmpfs tmpfs ro
2 1 0:2 / /dev rw,nosuid - tmpfs tmpfs rw
3 2 0:5 /null /dev/null rw,nosuid - devtmpfs udev rw
4 1 0:3 / /proc rw,nosuid - proc proc rw
5 1 8:1 /src /work/ws rw,relatime - ext4 /dev/vda rw
6 5 8:1 /src/.git /work/ws/.git ro,relatime - ext4 /dev/vda rw
`
	if err := checkMounts(linux.ParseMountinfo(base), []string{"/work/ws"}); err != nil {
		t.Fatalf("a correct sandbox failed: %v", err)
	}
	if err := checkMounts(linux.ParseMountinfo(base), nil); err == nil || !strings.Contains(err.Error(), "/work/ws is mounted read-write") {
		t.Fatalf("an ungranted writable mount passed: %v", err)
	}
	// A host path at a kernel file system's mount point is not that file system.
	evil := base + "7 1 8:1 /etc /dev/shm rw - ext4 /dev/vda rw\n8 1 8:1 /home /work/with\\040space rw - ext4 /dev/vda rw\n"
	if err := checkMounts(linux.ParseMountinfo(evil), []string{"/work/ws"}); err == nil || !strings.Contains(err.Error(), "/dev/shm") {
		t.Fatalf("a host bind at /dev/shm passed: %v", err)
	}
	if err := checkMounts(linux.ParseMountinfo(evil), []string{"/work/ws", "/dev/shm"}); err == nil || !strings.Contains(err.Error(), "/work/with space") {
		t.Fatalf("escaped mount point: %v", err)
	}
}

// TestProcSysReadOnly: the walk of /proc/sys is skipped only when one read-only procfs
// mount covers it with nothing below, and it is the mount /proc/sys is reached on; every
// other shape is walked.
func TestProcSysReadOnly(t *testing.T) {
	const root = "1 0 0:1 / / ro,nosuid - tmpfs tmpfs ro\n4 1 0:3 / /proc rw,nosuid - proc proc rw\n"
	for _, tc := range []struct {
		name, mounts string
		at           int // the mount a lookup of /proc/sys reaches
		want         bool
	}{
		{"read-only bind of /proc/sys", root + "5 4 0:3 /sys /proc/sys ro,nosuid - proc proc rw\n", 5, true},
		{"no mount at /proc/sys", root, 4, false},
		{"read-write /proc/sys", root + "5 4 0:3 /sys /proc/sys rw,nosuid - proc proc rw\n", 5, false},
		{"read-write stacked on read-only", root + "5 4 0:3 /sys /proc/sys ro - proc proc rw\n6 5 0:3 /sys /proc/sys rw - proc proc rw\n", 6, false},
		{"another file system at /proc/sys", root + "5 4 0:7 / /proc/sys ro - tmpfs tmpfs ro\n", 5, false},
		{"a bind below it", root + "5 4 0:3 /sys /proc/sys ro - proc proc rw\n6 5 0:6 /null /proc/sys/kernel/core_pattern rw - devtmpfs udev rw\n", 5, false},
		{"read-only bind below it", root + "5 4 0:3 /sys /proc/sys ro - proc proc rw\n6 5 0:6 /null /proc/sys/kernel/core_pattern ro - devtmpfs udev rw\n", 5, false},
		{"a sibling with the prefix", root + "5 4 0:3 /sys /proc/sys ro - proc proc rw\n6 4 0:3 /sysrq-trigger /proc/sysrq-trigger ro - proc proc rw\n", 5, true},
		// Hidden: a read-write procfs mounted over /proc after the read-only /proc/sys.
		{"shadowed by a later /proc", root + "5 4 0:3 /sys /proc/sys ro - proc proc rw\n7 4 0:9 / /proc rw - proc proc rw\n", 7, false},
		{"shadowed by a later /", root + "5 4 0:3 /sys /proc/sys ro - proc proc rw\n8 1 0:9 / / rw - proc proc rw\n", 8, false},
		{"where /proc/sys is unknown", root + "5 4 0:3 /sys /proc/sys ro - proc proc rw\n", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := procSysReadOnly(linux.ParseMountinfo(tc.mounts), tc.at); got != tc.want {
				t.Errorf("procSysReadOnly = %v; want %v", got, tc.want)
			}
		})
	}
}

// TestProcSysMount: the mount /proc/sys is reached on is one the mount table lists
// at /proc/sys or above it.
func TestProcSysMount(t *testing.T) {
	at := procSysMount()
	if at < 0 {
		t.Fatal("no mount ID for /proc/sys")
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range linux.ParseMountinfo(string(mi)) {
		if m.ID == at {
			if m.Point != "/" && m.Point != "/proc" && m.Point != "/proc/sys" {
				t.Fatalf("/proc/sys is on mount %d at %s", at, m.Point)
			}
			return
		}
	}
	t.Fatalf("mount %d (/proc/sys's) is not in the mount table:\n%s", at, mi)
}

// Host root is refused even when the host asked for uid 0: no backend runs a sandbox
// as host root.
func TestCheckHostUIDRefusesRoot(t *testing.T) {
	testutil.RequireRoot(t)
	for _, want := range []int{0, 64999} {
		if err := checkHostUID(want); err == nil {
			t.Errorf("checkHostUID(%d) as host root: no error", want)
		}
	}
}

// The walk of /proc/sys finds what a plain walk finds, in the same order: every
// sysctl this process may write, the namespaces' own passed over. As root, outside a
// sandbox, that is a long list.
func TestSysctlWalkFindsWhatAPlainWalkFinds(t *testing.T) {
	testutil.RequireRoot(t)
	var want []string
	_ = filepath.WalkDir("/proc/sys", func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil
		case namespaced(p) && d.IsDir():
			return fs.SkipDir
		case !namespaced(p) && linux.Writable(p):
			want = append(want, p)
		}
		return nil
	})
	if len(want) == 0 {
		t.Fatal("root may write no sysctl: nothing to compare")
	}
	got := sysctlsWritable()
	if !slices.Equal(got, want) {
		t.Errorf("the walk found %d sysctls, a plain walk %d:\n got %v\nwant %v", len(got), len(want), got, want)
	}
}
