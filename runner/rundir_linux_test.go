package runner

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordonhq/cordon/contract"
	"github.com/cordonhq/cordon/internal/errdefs"
	"github.com/cordonhq/cordon/internal/linux"
	"github.com/cordonhq/cordon/internal/testutil"
)

// Placeholders are made and removed without following a symbolic link: one the
// sandbox planted in the workspace must never make cordon create or delete anything
// outside it.
func TestPlaceholdersFollowNoLinks(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	victim := filepath.Join(outside, ".env")
	if err := os.WriteFile(victim, nil, 0o600); err != nil { // empty: would pass for a placeholder
		t.Fatal(err)
	}
	victimID, err := linux.Identify(victim)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "sub")); err != nil {
		t.Fatal(err)
	}
	// Even with its very identity (a run that made it), no link is followed to it.
	if err := removeIfEmpty(filepath.Join(ws, "sub", ".env"), "", victimID); err == nil {
		t.Error("removing through a link reported success")
	}
	if _, err := os.Stat(victim); err != nil {
		t.Fatalf("placeholder clean-up followed a link and deleted %s", victim)
	}
	rd := &runDir{path: t.TempDir()}
	for _, p := range []string{filepath.Join(ws, "sub", "new.env"), filepath.Join(ws, "sub", "deeper", "x")} {
		if err := rdMake(rd, p); err == nil {
			t.Errorf("a placeholder was made through a link: %s", p)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Fatalf("something was created outside: %v", entries)
	}
	// The ordinary case still works, missing parents included.
	p := filepath.Join(ws, "a", "b", ".env")
	if err := rdMake(rd, p); err != nil {
		t.Fatal(err)
	}
	if err := removeIfEmpty(p, "", rd.made[p]); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Fatalf("placeholder left: %v", err)
	}
}

// A placeholder that holds content (git's commondir) is removed only while it still
// holds exactly that, and is readable by anyone while it exists.
func TestPlaceholderWithContent(t *testing.T) {
	ws := t.TempDir()
	p := filepath.Join(ws, ".git", "commondir")
	rd := &runDir{path: t.TempDir()}
	plan := &contract.Plan{Mounts: []contract.Mount{{Path: p, Type: contract.Bind, Create: contract.PlaceholderFile, Content: ".\n"}}}
	if err := rd.placeholders(plan, nil); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(p); string(data) != ".\n" || st.Mode().Perm() != 0o644 {
		t.Fatalf("placeholder holds %q with mode %v, want \".\\n\" 0644", data, st.Mode().Perm())
	}
	if err := removeIfEmpty(p, "", rd.made[p]); err == nil {
		t.Fatal("a placeholder with content was removed as an empty one")
	}
	if err := os.WriteFile(p, []byte("..\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := removeIfEmpty(p, rd.owner.Contents[p], rd.made[p]); err == nil {
		t.Fatal("a changed placeholder was removed")
	}
	if err := os.WriteFile(p, []byte(".\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := rd.remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Fatalf("placeholder left: %v", err)
	}
}

func rdMake(rd *runDir, p string) error {
	plan := &contract.Plan{Mounts: []contract.Mount{{Path: p, Type: contract.Mask, Create: contract.PlaceholderFile}}}
	rd.owner.Created = nil
	return rd.placeholders(plan, nil)
}

// Removing a run directory never reaches through a mount a container backend left in
// it (an idmapped workspace, a staged overlay) into what it shows: the mount is
// detached first.
func TestRunDirRemoveDetachesMounts(t *testing.T) {
	testutil.RequireRoot(t)
	ws := t.TempDir()
	keep := filepath.Join(ws, "keep")
	if err := os.WriteFile(keep, []byte("the owner's"), 0o600); err != nil {
		t.Fatal(err)
	}
	rd := &runDir{path: t.TempDir()}
	target := filepath.Join(rd.path, "idmapped", "0")
	if err := os.MkdirAll(target, 0o700); err != nil {
		t.Fatal(err)
	}
	tree, err := linux.CloneTree(nil, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	if err := linux.AttachTree(tree, target); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = linux.Unmount(target) })
	if err := rd.remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("removing the run directory deleted the workspace's file through a mount: %v", err)
	}
	if _, err := os.Stat(rd.path); !os.IsNotExist(err) {
		t.Errorf("run directory still there: %v", err)
	}
}

// Placeholders are made and removed in batches, each parent directory opened once per
// batch: a parent the sandbox replaced by a link after they were made is walked afresh
// when they are removed, and refused, and a link met while making stops the batch
// there, with only what was made before it to remove.
func TestPlaceholderBatchesFollowNoLinks(t *testing.T) {
	ws, outside := t.TempDir(), t.TempDir()
	rd := &runDir{path: t.TempDir()}
	sub, other := filepath.Join(ws, "sub"), filepath.Join(ws, "other")
	names := []string{filepath.Join(sub, ".env"), filepath.Join(sub, ".envrc"), filepath.Join(other, ".env")}
	var plan contract.Plan
	for _, p := range names {
		plan.Mounts = append(plan.Mounts, contract.Mount{Path: p, Type: contract.Mask, Create: contract.PlaceholderFile})
	}
	if err := rd.placeholders(&plan, nil); err != nil {
		t.Fatal(err)
	}
	// The sandbox swaps sub for a link to a directory holding the same names, empty.
	if err := os.Rename(sub, filepath.Join(ws, "moved")); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{".env", ".envrc"} {
		if err := os.WriteFile(filepath.Join(outside, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, sub); err != nil {
		t.Fatal(err)
	}
	if err := rd.removePlaceholders(); err == nil {
		t.Error("removing through a linked parent reported success")
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 2 {
		t.Fatalf("placeholder removal followed a link: %s holds %v", outside, entries)
	}
	if _, err := os.Lstat(names[2]); !os.IsNotExist(err) {
		t.Errorf("the placeholder beside the link was left: %v", err)
	}

	// Making: a link in the middle of a batch stops it there.
	rd = &runDir{path: t.TempDir()}
	a := filepath.Join(ws, "a")
	plan.Mounts = nil
	for _, p := range []string{filepath.Join(a, "x"), filepath.Join(sub, "y"), filepath.Join(a, "z")} {
		plan.Mounts = append(plan.Mounts, contract.Mount{Path: p, Type: contract.Mask, Create: contract.PlaceholderFile})
	}
	if err := rd.placeholders(&plan, nil); err == nil {
		t.Fatal("a batch with a placeholder behind a link was made")
	}
	if _, ok := rd.made[filepath.Join(a, "x")]; !ok || len(rd.made) != 2 { // a and a/x
		t.Errorf("made %v, want a and a/x alone (not the one behind the link, nor the one after it)", rd.made)
	}
	if _, err := os.Lstat(filepath.Join(outside, "y")); !os.IsNotExist(err) {
		t.Fatalf("a placeholder was made through a link: %v", err)
	}
	if err := os.WriteFile(filepath.Join(a, "z"), nil, 0o600); err != nil { // not the run's
		t.Fatal(err)
	}
	if err := rd.remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(a, "x")); !os.IsNotExist(err) {
		t.Errorf("the placeholder made before the link was left: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(a, "z")); err != nil {
		t.Errorf("an empty file the run did not make was removed: %v", err)
	}
}

// Teardown releases the run directory (its placeholders and all it holds but the owner
// record) beside the seal and removes the record and the directory after: a
// placeholder that is no longer empty is left and reported, the rest goes.
func TestRemoveRunDirAfterPlaceholders(t *testing.T) {
	ws := t.TempDir()
	rd := &runDir{path: t.TempDir()}
	kept, gone := filepath.Join(ws, ".env"), filepath.Join(ws, ".envrc")
	plan := &contract.Plan{Mounts: []contract.Mount{
		{Path: kept, Type: contract.Mask, Create: contract.PlaceholderFile},
		{Path: gone, Type: contract.Mask, Create: contract.PlaceholderFile},
	}}
	if err := rd.placeholders(plan, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kept, []byte("written by the sandbox"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &run{rd: rd, o: &Options{Log: slog.New(slog.DiscardHandler)}}
	err := r.removeRunDir(r.releaseRunDir())
	if err == nil || !strings.Contains(err.Error(), kept+" is no longer empty") {
		t.Errorf("err = %v, want the placeholder that is no longer empty", err)
	}
	if _, err := os.Lstat(kept); err != nil {
		t.Errorf("a placeholder the sandbox wrote was removed: %v", err)
	}
	if _, err := os.Lstat(gone); !os.IsNotExist(err) {
		t.Errorf("placeholder left: %v", err)
	}
	if _, err := os.Lstat(rd.path); !os.IsNotExist(err) {
		t.Errorf("run directory left: %v", err)
	}
	if r.rd != nil || r.removeRunDir(nil) != nil {
		t.Error("a second removal did something")
	}
}

// Releasing a run directory (beside the seal) removes its placeholders and all it holds
// but the owner record: a run lives, for gc and for followers of its log, until the
// record is gone, and gc still finds it to finish the job if cordon dies meanwhile.
func TestReleaseKeepsTheOwnerRecord(t *testing.T) {
	ws := t.TempDir()
	rd, host, err := makeRunDir(t.TempDir(), "run", ws, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(ws, ".env")
	plan := &contract.Plan{Mounts: []contract.Mount{{Path: p, Type: contract.Mask, Create: contract.PlaceholderFile}}}
	if err := rd.placeholders(plan, nil); err != nil {
		t.Fatal(err)
	}
	if keep, err := rd.release(); keep || err != nil {
		t.Fatalf("release: keep %v, %v", keep, err)
	}
	entries, _ := os.ReadDir(rd.path)
	if len(entries) != 2 || entries[0].Name() != ownerRecord || entries[1].Name() != releasedMark {
		t.Errorf("after release the run directory holds %v, want the owner record and the released mark alone", entries)
	}
	if _, err := os.Lstat(p); !os.IsNotExist(err) {
		t.Errorf("placeholder left: %v", err)
	}
	if _, err := os.Lstat(host.MaskDir); !os.IsNotExist(err) {
		t.Errorf("mask left: %v", err)
	}
	if err := rd.removeDir(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(rd.path); !os.IsNotExist(err) {
		t.Errorf("run directory left: %v", err)
	}
}

// TestPlaceholderLockWaitIsBounded: a cordon that holds the placeholder lock and does
// not let go (suspended with ^Z) does not hang the others: a start is refused saying
// so, and a teardown leaves its placeholders and the record naming them for gc.
func TestPlaceholderLockWaitIsBounded(t *testing.T) {
	root := t.TempDir()
	held, err := lockPlaceholders(root)
	if err != nil {
		t.Fatal(err)
	}
	defer held()
	old := placeholderLockWait
	placeholderLockWait = 50 * time.Millisecond
	defer func() { placeholderLockWait = old }()
	// A second descriptor of the same file is another holder for flock(2).
	start := time.Now()
	_, err = lockPlaceholders(root)
	if !errors.Is(err, errPlaceholderLock) || !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("lock held elsewhere: %v; want errPlaceholderLock (unavailable)", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the wait took %v; want it bounded by placeholderLockWait", took)
	}
	ws := t.TempDir()
	p := filepath.Join(ws, ".envrc")
	rd := &runDir{path: filepath.Join(root, "20261206T000000Z-abcdef"), owner: runOwner{Created: []string{p}}}
	if err := os.Mkdir(rd.path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	id, err := linux.Identify(p)
	if err != nil {
		t.Fatal(err)
	}
	rd.made = map[string]linux.FileID{p: id} // the run made it
	keep, err := rd.release()
	if !keep || !errors.Is(err, errPlaceholderLock) {
		t.Errorf("release without the lock: keep %v, err %v; want the run directory kept for gc", keep, err)
	}
	if _, err := os.Lstat(p); err != nil {
		t.Errorf("the placeholder was removed without the lock: %v", err)
	}
}
