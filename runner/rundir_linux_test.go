package runner

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cordonhq/cordon/contract"
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
	if err := os.Symlink(outside, filepath.Join(ws, "sub")); err != nil {
		t.Fatal(err)
	}
	if err := removeIfEmpty(filepath.Join(ws, "sub", ".env"), ""); err == nil {
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
	if err := removeIfEmpty(p, ""); err != nil {
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
	if err := removeIfEmpty(p, ""); err == nil {
		t.Fatal("a placeholder with content was removed as an empty one")
	}
	if err := os.WriteFile(p, []byte("..\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := removeIfEmpty(p, rd.owner.Contents[p]); err == nil {
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
