package runner

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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
	before := testutil.Tree(t, ws)
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
	if after := testutil.Tree(t, ws); !slices.Equal(after, before) {
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
		out, err := exec.Command(c[0], c[1:]...).CombinedOutput()
		testutil.Require(t, err == nil, fmt.Sprintf("no file system without birth times here: %v: %v: %s", c, err, out))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

// TestAsideAttacks (red team, rt6): the workspace is hostile while a run makes its
// placeholders aside and places them, and after a cordon killed meanwhile, until gc.
// Whatever is planted at or above the names a run makes aside, cordon creates,
// removes or changes nothing outside the workspace, never touches the user's file,
// and, once the run's teardown (or gc, for a run killed at that step) is done, leaves
// no entry of its own making in the workspace.
func TestAsideAttacks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		at     string // the step the attack runs at (runDir.stepHook)
		attack func(t *testing.T, ws, outside string)
		after  func(t *testing.T, ws string) // checks the workspace after teardown or gc, or nil
	}{
		{"parent removed before what it holds", "next level", func(t *testing.T, ws, outside string) {
			must(t, os.Remove(filepath.Join(ws, "new"))) // made and placed by the level before
		}, func(t *testing.T, ws string) {
			// Made again under its own name, it would have no identity on record: left.
			if _, err := os.Lstat(filepath.Join(ws, "new")); err == nil {
				t.Errorf("new is in the workspace: cordon made a parent it did not record")
			}
		}},
		{"parent swapped for a link", "recorded", func(t *testing.T, ws, outside string) {
			must(t, os.Rename(filepath.Join(ws, "sub"), filepath.Join(ws, "sub2")))
			must(t, os.Symlink(outside, filepath.Join(ws, "sub")))
		}, nil},
		{"aside entries swapped for links", "recorded", func(t *testing.T, ws, outside string) {
			for _, a := range asides(t, ws) {
				must(t, os.RemoveAll(a))
				must(t, os.Symlink(filepath.Join(outside, "victim"), a))
			}
		}, nil},
		{"aside entries swapped for fifos", "recorded", func(t *testing.T, ws, outside string) {
			for _, a := range asides(t, ws) {
				must(t, os.RemoveAll(a))
				must(t, exec.Command("mkfifo", a).Run())
			}
		}, nil},
		{"aside file swapped for the attacker's", "recorded", func(t *testing.T, ws, outside string) {
			evil := filepath.Join(ws, "evil")
			must(t, os.WriteFile(evil, []byte("echo pwned\n"), 0o644))
			for _, a := range asides(t, ws) {
				if fi, err := os.Lstat(a); err == nil && fi.Mode().IsRegular() {
					must(t, os.Rename(evil, a)) // the .envrc made aside: one file at this level
				}
			}
		}, nil},
		{"aside directory filled", "recorded", func(t *testing.T, ws, outside string) {
			for _, a := range asides(t, ws) {
				if fi, err := os.Lstat(a); err == nil && fi.IsDir() {
					must(t, os.WriteFile(filepath.Join(a, "planted"), []byte("x"), 0o644))
				}
			}
		}, nil},
	} {
		for _, killed := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/killed=%v", tc.name, killed), func(t *testing.T) {
				ws, outside := t.TempDir(), t.TempDir()
				must(t, os.Mkdir(filepath.Join(ws, "sub"), 0o755))
				must(t, os.WriteFile(filepath.Join(ws, "sub", "keep"), []byte("the user's\n"), 0o644))
				must(t, os.WriteFile(filepath.Join(outside, "victim"), nil, 0o600))
				must(t, os.WriteFile(filepath.Join(outside, ".env"), nil, 0o600))
				outsideBefore := testutil.Tree(t, outside)
				root := filepath.Join(t.TempDir(), "runs")
				rd, _, err := makeRunDir(root, "20261207T080000Z-0a0b0c", ws, "", 0)
				if err != nil {
					t.Fatal(err)
				}
				plan := &contract.Plan{Mounts: []contract.Mount{
					{Path: filepath.Join(ws, ".envrc"), Create: contract.PlaceholderFile, Content: "# cordon\n"},
					{Path: filepath.Join(ws, "cordon.yaml"), Create: contract.PlaceholderDir},
					{Path: filepath.Join(ws, "new", "x"), Create: contract.PlaceholderFile},
					{Path: filepath.Join(ws, "sub", ".env"), Create: contract.PlaceholderFile},
				}}
				errKilled := errors.New("killed here")
				var record []byte
				done := false
				rd.stepHook = func(step string) error {
					if step != tc.at || done {
						return nil
					}
					done = true
					tc.attack(t, ws, outside)
					if killed {
						record, _ = os.ReadFile(filepath.Join(rd.path, madeRecord))
						return errKilled
					}
					return nil
				}
				perr := rd.placeholders(plan, nil)
				t.Logf("placeholders: %v", perr)
				if fi, err := os.Lstat(filepath.Join(ws, ".envrc")); perr == nil && err == nil {
					data, _ := os.ReadFile(filepath.Join(ws, ".envrc")) // not a fifo: the run made its placeholders
					if !fi.Mode().IsRegular() || string(data) != "# cordon\n" {
						t.Errorf("the run went on with %v %q at .envrc, an entry it did not make, placed as its placeholder", fi.Mode(), data)
					}
				}
				if killed {
					mustWriteFile(t, filepath.Join(rd.path, madeRecord), string(record))
					rd.owner.PID, rd.owner.Start = 1<<22+1, 42 // its cordon is gone
					must(t, rd.save())
					_, err = GC(root)
					t.Logf("gc: %v", err)
				} else {
					t.Logf("teardown: %v", rd.remove())
				}
				if after := testutil.Tree(t, outside); !slices.Equal(after, outsideBefore) {
					t.Errorf("outside the workspace: %q, want %q", after, outsideBefore)
				}
				for _, p := range []string{"sub/keep", "sub2/keep"} {
					if data, err := os.ReadFile(filepath.Join(ws, p)); err == nil && string(data) != "the user's\n" {
						t.Errorf("the user's %s holds %q", p, data)
					}
				}
				// Left of cordon's own making: a placeholder at a name it makes aside (what
				// the attacker put there is the attacker's).
				filepath.WalkDir(ws, func(p string, d os.DirEntry, err error) error {
					if err != nil || !strings.HasPrefix(d.Name(), asidePrefix) {
						return nil
					}
					if fi, err := os.Lstat(p); err == nil && (fi.Mode().IsRegular() && madeContent(p) || fi.IsDir() && isEmptyDir(p)) {
						t.Errorf("left in the workspace: %s (%v)", p, fi.Mode())
					}
					return nil
				})
				if tc.after != nil {
					tc.after(t, ws)
				}
				t.Logf("workspace after: %q", testutil.Tree(t, ws))
			})
		}
	}
}

// asides lists the entries under ws whose names a run makes placeholders under.
func asides(t *testing.T, ws string) []string {
	t.Helper()
	var as []string
	for _, p := range testutil.Tree(t, ws) {
		if strings.HasPrefix(filepath.Base(p), asidePrefix) {
			as = append(as, p)
		}
	}
	if len(as) == 0 {
		t.Fatal("nothing aside to attack")
	}
	return as
}

// madeContent says whether the file p holds what a placeholder of the test holds.
func madeContent(p string) bool {
	data, err := os.ReadFile(p)
	return err == nil && (len(data) == 0 || string(data) == "# cordon\n")
}

func isEmptyDir(p string) bool {
	ents, err := os.ReadDir(p)
	return err == nil && len(ents) == 0
}
