package runner

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/testutil"
)

// TestPlacedFileWithoutBirthTimeIsRemoved (red team, rt6): where the file system
// keeps no birth time, a placeholder file's identity is its device, inode and change
// time. A placeholder is made aside, its identity recorded, then renamed into place,
// and a rename sets the renamed inode's change time: once the clock has moved on
// between the record and the rename, the placed file is no longer the entry recorded,
// and the run's teardown (and gc) leaves it as the user's, in the workspace for good.
// The workspace here is ext4 with 128-byte inodes (no birth time, change time in whole
// seconds); the run is held between the record and the rename until the file
// system's clock has passed a second.
func TestPlacedFileWithoutBirthTimeIsRemoved(t *testing.T) {
	testutil.RequireRoot(t)
	ws := t.TempDir()
	mountNoBirthTime(t, ws)
	before := treeOf(t, ws)
	root := filepath.Join(t.TempDir(), "runs")
	rd, _, err := makeRunDir(root, "20261207T080000Z-0a0b0c", ws, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	plan := &contract.Plan{Mounts: []contract.Mount{
		{Path: filepath.Join(ws, ".env"), Create: contract.PlaceholderFile},
		{Path: filepath.Join(ws, ".envrc"), Create: contract.PlaceholderFile, Content: "# cordon\n"},
	}}
	rd.stepHook = func(step string) error {
		if step == "recorded" {
			waitNextSecond(t, ws)
		}
		return nil
	}
	if err := rd.placeholders(plan, nil); err != nil {
		t.Fatal(err)
	}
	for _, m := range plan.Mounts {
		if _, err := os.Lstat(m.Path); err != nil {
			t.Fatalf("placeholder %s not made: %v", m.Path, err)
		}
	}
	if err := rd.remove(); err != nil {
		t.Errorf("teardown: %v", err)
	}
	if after := treeOf(t, ws); !slices.Equal(after, before) {
		t.Errorf("after the run's teardown the workspace holds %q, want %q", after, before)
	}
}

// waitNextSecond returns once the change time the file system under dir gives a file
// it touches is a later second than when it was called: a rename from then on sets
// a change time other than the one recorded before it.
func waitNextSecond(t *testing.T, dir string) {
	t.Helper()
	probe := filepath.Join(dir, "probe")
	defer os.Remove(probe)
	ctime := func() int64 {
		if err := os.WriteFile(probe, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(probe)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ctim.Sec
	}
	first := ctime()
	for ctime() == first {
		if err := os.Chmod(probe, 0o644); err != nil { // a change: a fresh change time
			t.Fatal(err)
		}
	}
}

// mountNoBirthTime mounts over dir a fresh ext4 file system whose 128-byte inodes
// keep no birth time (and change times in whole seconds).
func mountNoBirthTime(t *testing.T, dir string) {
	t.Helper()
	img := filepath.Join(t.TempDir(), "nobirth.img")
	for _, c := range [][]string{
		{"truncate", "-s", "16M", img},
		{"mkfs.ext4", "-q", "-F", "-I", "128", "-O", "^has_journal", img},
		{"mount", "-o", "loop", img, dir},
	} {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			t.Skipf("no file system without birth times here: %v: %v: %s", c, err, out)
		}
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

// treeOf lists every path under dir, sorted.
func treeOf(t *testing.T, dir string) []string {
	t.Helper()
	var paths []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil {
			paths = append(paths, p)
		}
		return nil
	})
	return paths
}
